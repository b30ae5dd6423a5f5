package e2e

// The standing attack suite, text: tokenizing is the costly part of a text request
// (one 16 MB body to /tokenize cost 70 s of CPU and 1.45 GB; a 16 MiB prompt to
// /v1/completions tens of seconds before its 400 for max_model_len). Now a text
// longer than max_model_len times the tokenizer's longest token is a 400 before
// it is tokenized, and tokenizing happens only under a --max-concurrent-requests
// slot, /tokenize and /detokenize included.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// textMaxModelLen is the mock engine's context: with qwen3's 128 bytes a token
// at most (512 for text not in NFC), ASCII text over 128 KiB is certainly too long.
const textMaxModelLen = 1024

// procCPU is pid's user+system CPU time (/proc/PID/stat, 100 ticks a second).
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("reading /proc/%d/stat: %v", pid, err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:])) // fields from 3 (state) on
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// textTarget is serve with qwen3's tokenizer, --max-concurrent-requests 4 and one
// mock engine of a 1,024-token context, warmed up, its baseline sampled.
func textTarget(t *testing.T) *target {
	t.Helper()
	s := startServe(t, "--tokenizer", modelDir(t, "qwen3"), "--handshake-address", "tcp://127.0.0.1:0",
		"--max-concurrent-requests", "4")
	start(t, "mock-engine", "mock-engine", "--handshake-address", s.handshake, "--step-ms", "2",
		"--max-model-len", strconv.Itoa(textMaxModelLen))
	eventually(t, 20*time.Second, "the engine is ready", func() bool {
		e := s.engines(t)
		return len(e) == 1 && e[0].Ready
	})
	tg := &target{server: s, pid: s.cmd.Process.Pid}
	for range 4 {
		if code, b := tg.postJSON(t, "/v1/completions", `{"prompt": "hello there", "max_tokens": 3}`); code != 200 {
			t.Fatalf("warm-up completion: %d %.200s", code, b)
		}
		if code, b := tg.postJSON(t, "/tokenize", `{"prompt": "hello there"}`); code != 200 {
			t.Fatalf("warm-up /tokenize: %d %.200s", code, b)
		}
	}
	tg.base = sampleResources(t, tg.pid, tg.url("/metrics"))
	return tg
}

// postBody posts body to path and returns the status and answer (0 on a transport
// error).
func postBody(path string, tg *target, body []byte) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url(path), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// wordBody is a JSON body with field set to n bytes of one long word (BPE's most
// costly input), distinct per i so no cache helps.
func wordBody(field string, i, n int) []byte {
	word := fmt.Sprintf("x%d", i) + strings.Repeat("x", n)
	if field == "messages" {
		return []byte(`{"messages": [{"role": "user", "content": "` + word + `"}], "max_tokens": 1}`)
	}
	return []byte(`{"` + field + `": "` + word + `"}`)
}

func TestAttackTextTooLong(t *testing.T) {
	tg := textTarget(t)
	cpu0 := procCPU(t, tg.pid)
	start := time.Now()
	attacks := []struct {
		path, field string
		n           int
		want        string
	}{
		// --max-body-bytes' worth of prompt: the cap refuses it.
		{"/v1/completions", "prompt", 16<<20 - 1024, "longer than the maximum model length"},
		// Within /tokenize's 1 MiB a field, over the cap.
		{"/tokenize", "prompt", 1<<20 - 1024, "longer than the maximum model length"},
		{"/v1/chat/completions", "messages", 1<<20 - 1024, "longer than the maximum model length"},
		{"/tokenize", "messages", 1<<20 - 1024, "longer than the maximum model length"},
		// A 16 MiB /tokenize body: its field bound refuses it.
		{"/tokenize", "prompt", 16<<20 - 1024, "larger than"},
	}
	sent := 0
	var slowest time.Duration
	for round := range 3 {
		for _, a := range attacks {
			t0 := time.Now()
			code, b := postBody(a.path, tg, wordBody(a.field, round, a.n))
			took := time.Since(t0)
			slowest = max(slowest, took)
			sent++
			// A field over its bound ends the read and the connection: the client,
			// still writing, may see the reset instead of the 400.
			reset := a.want == "larger than" && code == 0 && strings.Contains(string(b), "connection reset")
			if !reset && (code != 400 || !strings.Contains(string(b), a.want)) {
				t.Errorf("%s %s of %d bytes: %d %.300s", a.path, a.field, a.n, code, b)
			}
			// Generous: CI runs this binary under the race detector, on a loaded
			// machine; tokenizing it took about 40 s without the race detector.
			if took > 20*time.Second {
				t.Errorf("%s %s of %d bytes: answered in %v", a.path, a.field, a.n, took)
			}
		}
	}
	cpu := procCPU(t, tg.pid) - cpu0
	t.Logf("%d over-long texts in %v (slowest %v), server CPU %v", sent, time.Since(start), slowest, cpu)
	// Before the cap, one of the 16 MiB prompts alone cost about 40 s of CPU
	// (several times that under the race detector CI builds with).
	if cpu > 60*time.Second {
		t.Errorf("server CPU for %d refused texts: %v", sent, cpu)
	}
	if code, b := tg.postJSON(t, "/tokenize", `{"prompt": "still serving"}`); code != 200 {
		t.Errorf("after the attack: %d %.200s", code, b)
	}
	// RSS slack: 16 MiB bodies, read whole, leave heap the runtime returns late.
	after := settle(t, tg.pid, tg.url("/metrics"), tg.base, 20*time.Second, 384<<20, 8, 20)
	attackReport(t, "text-too-long", sent, 0, tg.base, after)
}

// A flood of costly /tokenize requests beyond --max-concurrent-requests: at most 4
// tokenize at once, the rest get the generation's 503 at once.
func TestAttackTokenizeFlood(t *testing.T) {
	tg := textTarget(t)
	const flood = 48
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	cpu0 := procCPU(t, tg.pid)
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Under the cap (128 KiB): a real tokenization of a long word, ~0.2 s.
			code, b := postBody("/tokenize", tg, wordBody("prompt", i, 96<<10))
			// A 503 sent before the body was read ends the connection: a client still
			// writing its 96 KiB may see the reset instead of the answer.
			if code == 0 && (strings.Contains(string(b), "broken pipe") || strings.Contains(string(b), "connection reset")) {
				code = 503
			} else if code != 200 && (code != 503 || !strings.Contains(string(b), "--max-concurrent-requests")) {
				t.Errorf("flood /tokenize: %d %.200s", code, b)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	testwait.Wait(t, &wg, "the /tokenize flood")
	t.Logf("%d concurrent /tokenize with --max-concurrent-requests 4: %v, server CPU %v", flood, codes, procCPU(t, tg.pid)-cpu0)
	if codes[503] == 0 || codes[200] == 0 {
		t.Errorf("flood answers %v: want some tokenized and the rest refused with 503", codes)
	}
	if code, b := tg.postJSON(t, "/detokenize", `{"tokens": [14990]}`); code != 200 {
		t.Errorf("after the flood: %d %.200s", code, b)
	}
	after := settle(t, tg.pid, tg.url("/metrics"), tg.base, 20*time.Second, 128<<20, 8, 20)
	attackReport(t, "tokenize-flood", flood, codes[503], tg.base, after)
}
