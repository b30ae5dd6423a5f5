package e2e

// Attacks through the engines' side: one client's burst that fills the
// engines' send queues, and an engine that stays connected but stops
// producing. Bounded, loopback only; well-behaved clients must lose nothing.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// burstClient is a msgpack client-protocol client (a DEALER) that sends n
// ADDs as fast as it can and counts how its requests end.
type burstClient struct {
	sock               transport.Socket
	finished, refusals atomic.Int64
	firstRefusal       atomic.Pointer[string]
	done               chan struct{}
}

func startBurst(t *testing.T, endpoint string, n int) *burstClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sock, err := transport.Dial(ctx, transport.Dealer, endpoint, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := &burstClient{sock: sock, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		var dec wire.OutputsDecoder
		var outs wire.EngineCoreOutputs
		for {
			frames, err := sock.Recv()
			if err != nil {
				return
			}
			if len(frames[0]) > 0 && (frames[0][0]&0xf0 == 0x80 || frames[0][0] == 0xde) { // a map: an error message
				if b.refusals.Add(1) == 1 {
					s := fmt.Sprintf("%q", frames[0])
					b.firstRefusal.Store(&s)
				}
				continue
			}
			if dec.Decode(frames, &outs) != nil {
				continue
			}
			for i := range outs.Outputs {
				if outs.Outputs[i].Finished() {
					b.finished.Add(1)
				}
			}
		}
	}()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1)
	sp.IgnoreEOS = true
	sp.Normalize()
	go func() {
		for i := range n {
			req := &wire.EngineCoreRequest{RequestID: fmt.Sprintf("burst-%d", i), PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp}
			body, aux, err := wire.AppendAdd(nil, req)
			if err != nil {
				return
			}
			if sock.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...) != nil {
				return
			}
		}
	}()
	return b
}

func (b *burstClient) close(t *testing.T) {
	t.Helper()
	b.sock.Close()
	testwait.Recv(t, b.done, "the burst client's receive loop to end")
}

// One msgpack client sends 20,000 ADDs at once while an HTTP client sends
// its requests one by one. The burst used to fill the engines' send queues
// and fail requests of both ('engine rank 0 stuck: send queue full', 500 for
// the HTTP client); now the burst queues behind itself.
func TestAttackBurstOneClient(t *testing.T) {
	s := startServe(t, "--step-ms", "2")
	base := sampleResources(t, s.cmd.Process.Pid, s.url("/metrics"))
	const n = 20000
	b := startBurst(t, s.client, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	httpFailed := 0
	const wellBehaved = 200
	for i := range wellBehaved {
		resp, body, err := s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 2}`)
		if err != nil || resp.StatusCode != 200 {
			httpFailed++
			if httpFailed < 3 {
				t.Errorf("well-behaved request %d: %v %v %s", i, err, resp, body)
			}
		}
	}
	eventually(t, 60*time.Second, "every burst request ended", func() bool {
		return b.finished.Load()+b.refusals.Load() >= n
	})
	b.close(t)
	if r := b.refusals.Load(); r != 0 {
		t.Errorf("%d of the burst's own requests were refused, first %s", r, *b.firstRefusal.Load())
	}
	if code, _ := s.get(t, "/health"); code != 200 {
		t.Errorf("/health %d after the burst", code)
	}
	after := settle(t, s.cmd.Process.Pid, s.url("/metrics"), base, 20*time.Second, 128<<20, 8, 40)
	t.Logf("burst: %d finished, %d refused; well-behaved HTTP: %d of %d failed", b.finished.Load(), b.refusals.Load(), httpFailed, wellBehaved)
	attackReport(t, "burst-one-client", n+wellBehaved, httpFailed+int(b.refusals.Load()), base, after)
}

// An engine that stays connected but stops producing (SIGSTOP) used to stay
// 'ready' for ever: its requests hung and it kept getting new work. With
// --engine-stall-timeout its requests fail with a clear cause, new work goes
// to the other rank, and it comes back when it speaks again (SIGCONT).
func TestAttackStalledEngine(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2",
		"--engine-transport", "tcp", "--engine-stall-timeout", "1s")
	e0 := startEngine(t, s.handshake, 0, 2)
	startEngine(t, s.handshake, 1, 2)
	eventually(t, 20*time.Second, "both engines ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) })
	base := sampleResources(t, s.cmd.Process.Pid, s.url("/metrics"))

	if err := e0.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const pinnedN = 20
	var wg sync.WaitGroup
	var stalledAnswers atomic.Int64
	for range pinnedN {
		wg.Go(func() {
			resp, body, err := s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 50}`, "X-data-parallel-rank", "0")
			if err == nil && resp.StatusCode != 200 && strings.Contains(string(body), "stalled") {
				stalledAnswers.Add(1)
			} else {
				t.Errorf("request pinned to the stopped engine: %v %v %s", err, resp, body)
			}
		})
	}
	// A well-behaved client meanwhile: nothing of it is lost.
	failed := 0
	const wellBehaved = 50
	for i := range wellBehaved {
		resp, body, err := s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 3}`)
		if err != nil || resp.StatusCode != http.StatusOK {
			failed++
			t.Errorf("well-behaved request %d: %v %v %s", i, err, resp, body)
		}
	}
	testwait.Wait(t, &wg, "the requests pinned to the stopped engine")
	states := map[int]string{}
	for _, e := range s.engines(t) {
		states[e.Rank] = e.State
	}
	if states[0] != "stalled" || states[1] != "ready" {
		t.Errorf("states %v, want rank 0 stalled, rank 1 ready", states)
	}

	if err := e0.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the engine routable again after it speaks", func() bool { return ready(t, s, 0) })
	resp, body, err := s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 3}`, "X-data-parallel-rank", "0")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("pinned request after recovery: %v %v %s", err, resp, body)
	}
	after := settle(t, s.cmd.Process.Pid, s.url("/metrics"), base, 20*time.Second, 64<<20, 8, 20)
	t.Logf("stall: %d of %d pinned requests failed as stalled; well-behaved %d of %d failed", stalledAnswers.Load(), pinnedN, failed, wellBehaved)
	attackReport(t, "stalled-engine", pinnedN+wellBehaved+1, failed, base, after)
}
