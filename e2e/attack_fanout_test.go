package e2e

// Fan-out: n=128 turns one HTTP request into 128 engine requests. When
// --max-concurrent-requests counted HTTP requests, 100 of them put 12,800
// requests on the built-in engines, another client's 5-token completion waited
// 8-13 s, and a mock engine was declared stuck and stayed so. Admission now
// counts choices, and a built-in engine the dispatcher finds stalled is
// restarted and rejoins.

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func TestAttackFanOut(t *testing.T) {
	// The defaults (--max-concurrent-requests 4096, 5 ms steps): before, this
	// put 12,800 requests on the two engines, the other client waited up to
	// 9.3 s and rank 1 was declared stuck (a send pending 12 s) for good.
	// --max-concurrent-requests 1024: what the test shows (choices counted, the
	// other client served promptly, every rank ready after) does not need the
	// default's 4,096 requests a step, which under the race detector on a shared
	// 2-core machine make each mock step take CPU seconds.
	tg := startTarget(t, "--step-ms", "5", "--max-concurrent-requests", "1024")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const requests, n = 100, 128
	body := `{"prompt": [1, 2, 3], "max_tokens": 64, "n": 128}`
	var served, refused, failed atomic.Int64
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			for {
				resp, b, err := tg.post(ctx, body)
				switch {
				case err == nil && resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
					refused.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				case err == nil && resp.StatusCode == http.StatusOK && strings.Count(string(b), `"finish_reason":"length"`) == n:
					served.Add(1)
				default:
					failed.Add(1)
					t.Errorf("fan-out request: %v %v %.200s", err, resp, b)
				}
				return
			}
		})
	}
	// Another client, on another address (another share), while the fan-out runs.
	other := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	var worst time.Duration
	victims, victimFailed := 0, 0
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && served.Load()+failed.Load() < requests {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url("/v1/completions"),
			strings.NewReader(`{"prompt": [4, 5, 6], "max_tokens": 5}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := other.Do(req)
		took := time.Since(start)
		victims++
		if err != nil || resp.StatusCode != http.StatusOK {
			victimFailed++
			t.Errorf("the other client's completion: %v %v", err, resp)
		} else {
			resp.Body.Close()
		}
		worst = max(worst, took)
		time.Sleep(100 * time.Millisecond)
	}
	if worst > 5*time.Second {
		t.Errorf("the other client's 5-token completion took %v during the fan-out (want < 5s)", worst)
	}
	testwait.Wait(t, &wg, "the fan-out requests")
	if refused.Load() == 0 {
		t.Error("no fan-out request was refused: admission did not count choices")
	}
	eventually(t, 20*time.Second, "every rank ready after the fan-out", func() bool {
		for _, e := range tg.engines(t) {
			if !e.Ready {
				return false
			}
		}
		return true
	})
	t.Logf("fan-out: %d served, %d refused (503) and retried, %d failed; other client: %d completions, worst %v, %d failed",
		served.Load(), refused.Load(), failed.Load(), victims, worst, victimFailed)
	tg.finish(t, "fan-out", requests+int(refused.Load())+victims, int(failed.Load())+victimFailed, 256, 8)
}
