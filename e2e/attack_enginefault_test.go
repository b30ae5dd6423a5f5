package e2e

// Attacks from the engines' side that held before and must keep holding: an
// engine killed with SIGKILL mid-load, an engine that sends garbage, and a
// storm of HELLO-and-hang-ups claiming an engine's identity. Bounded, loopback
// only; the other rank and well-behaved clients must be unaffected.

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

// pinnedLoad sends n non-streaming requests pinned to rank from a few
// goroutines and counts how they end: ok (200), and failed with a body that
// names the rank (clearFail).
type pinnedLoad struct {
	ok, clearFail, other atomic.Int64
	firstOther           atomic.Pointer[string]
	wg                   sync.WaitGroup
}

func startPinnedLoad(ctx context.Context, s *server, rank, n, workers int, maxTokens int) *pinnedLoad {
	l := &pinnedLoad{}
	var next atomic.Int64
	body := fmt.Sprintf(`{"prompt": [1, 2, 3], "max_tokens": %d}`, maxTokens)
	for range workers {
		l.wg.Go(func() {
			for next.Add(1) <= int64(n) {
				resp, b, err := s.post(ctx, body, "X-data-parallel-rank", fmt.Sprint(rank))
				switch {
				case err == nil && resp.StatusCode == http.StatusOK:
					l.ok.Add(1)
				case err == nil && strings.Contains(string(b), fmt.Sprintf("rank %d", rank)):
					l.clearFail.Add(1)
				default:
					if l.other.Add(1) == 1 {
						msg := fmt.Sprintf("%v %v %s", err, resp, b)
						l.firstOther.Store(&msg)
					}
				}
			}
		})
	}
	return l
}

// An engine killed with SIGKILL while requests run on both ranks: its
// requests fail with an error naming its rank, the other rank serves every
// request, and a restarted engine rejoins and serves.
func TestAttackEngineKilledMidLoad(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2", "--engine-transport", "tcp")
	startEngine(t, s.handshake, 0, 2)
	victim := startEngine(t, s.handshake, 1, 2)
	eventually(t, 20*time.Second, "both engines ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) })
	base := sampleResources(t, s.cmd.Process.Pid, s.url("/metrics"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const n = 200
	good := startPinnedLoad(ctx, s, 0, n, 4, 20)
	doomed := startPinnedLoad(ctx, s, 1, n, 4, 20)
	eventually(t, 10*time.Second, "load on rank 1", func() bool { return doomed.ok.Load() >= 10 })
	if code := victim.stop(syscall.SIGKILL, 10*time.Second); code == 0 {
		t.Errorf("killed engine exited 0")
	}
	testwait.Wait(t, &good.wg, "the load on rank 0")
	testwait.Wait(t, &doomed.wg, "the load on the killed rank 1")
	if good.ok.Load() != n {
		t.Errorf("rank 0 while rank 1 was killed: %d of %d ok, %d failed (first: %v)", good.ok.Load(), n, good.clearFail.Load()+good.other.Load(), good.firstOther.Load())
	}
	if doomed.other.Load() != 0 {
		t.Errorf("%d rank-1 requests failed without naming the rank, first: %s", doomed.other.Load(), *doomed.firstOther.Load())
	}
	if code, _ := s.get(t, "/health"); code != 200 {
		t.Errorf("/health %d with rank 0 up", code)
	}
	startEngine(t, s.handshake, 1, 2) // the restart
	eventually(t, 20*time.Second, "restarted engine rejoins", func() bool { return ready(t, s, 1) })
	if resp, body, err := s.post(ctx, `{"prompt": [1], "max_tokens": 3}`, "X-data-parallel-rank", "1"); err != nil || resp.StatusCode != 200 {
		t.Errorf("rank 1 after the restart: %v %v %s", err, resp, body)
	}
	after := settle(t, s.cmd.Process.Pid, s.url("/metrics"), base, 20*time.Second, 64<<20, 8, 30)
	t.Logf("kill: rank 1 %d ok before the kill, %d failed naming the rank; rank 0 %d of %d ok", doomed.ok.Load(), doomed.clearFail.Load(), good.ok.Load(), n)
	attackReport(t, "engine-sigkill-mid-load", 2*n+1, int(doomed.clearFail.Load()+doomed.other.Load()+good.clearFail.Load()+good.other.Load()), base, after)
}

// An engine that starts sending garbage on its output socket is isolated:
// its requests fail naming its rank, the other rank serves everything.
func TestAttackEngineGarbage(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2", "--engine-transport", "tcp")
	startEngine(t, s.handshake, 0, 2)
	start(t, "mock-engine 1 (garbage)", "mock-engine", "--handshake-address", s.handshake,
		"--data-parallel-rank", "1", "--data-parallel-size", "2", "--step-ms", "2", "--garbage-after-steps", "50")
	eventually(t, 20*time.Second, "both engines ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) })
	base := sampleResources(t, s.cmd.Process.Pid, s.url("/metrics"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const n = 100
	good := startPinnedLoad(ctx, s, 0, n, 4, 10)
	bad := startPinnedLoad(ctx, s, 1, n, 4, 10)
	testwait.Wait(t, &good.wg, "the load on rank 0")
	testwait.Wait(t, &bad.wg, "the load on the garbage rank 1")
	if good.ok.Load() != n {
		t.Errorf("rank 0 beside a garbage engine: %d of %d ok (first failure: %v)", good.ok.Load(), n, good.firstOther.Load())
	}
	if bad.other.Load() != 0 {
		t.Errorf("%d rank-1 requests failed without naming the rank, first: %s", bad.other.Load(), *bad.firstOther.Load())
	}
	if bad.clearFail.Load() == 0 {
		t.Errorf("the garbage engine failed none of its %d requests", n)
	}
	eventually(t, 10*time.Second, "rank 1 shown down", func() bool { return !ready(t, s, 1) })
	if code, _ := s.get(t, "/health"); code != 200 {
		t.Errorf("/health %d with rank 0 up", code)
	}
	after := settle(t, s.cmd.Process.Pid, s.url("/metrics"), base, 20*time.Second, 64<<20, 8, 30)
	t.Logf("garbage: rank 1 %d ok, %d failed naming the rank; rank 0 %d of %d ok", bad.ok.Load(), bad.clearFail.Load(), good.ok.Load(), n)
	attackReport(t, "engine-garbage", 2*n, int(bad.clearFail.Load()+bad.other.Load()+good.clearFail.Load()+good.other.Load()), base, after)
}

// A storm of HELLO-and-READY-and-hang-ups claiming rank 0, from four
// goroutines, while the real engine starts: it must join within 15 s, serve,
// and the storm's generations must not leak (sockets, goroutines).
func TestAttackHelloStorm(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "1", "--engine-transport", "tcp")
	base := sampleResources(t, s.cmd.Process.Pid, s.url("/metrics"))
	id := wire.IdentityOf(0)
	hello := wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "HELLO", Headless: true})
	ready0 := wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "READY", Headless: true})
	stop := make(chan struct{})
	var storm sync.WaitGroup
	var sent atomic.Int64
	const maxStorm = 20000
	for w := range 4 {
		storm.Go(func() {
			for sent.Load() < maxStorm {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				c, err := transport.Dial(ctx, transport.Dealer, s.handshake, transport.Options{Identity: id[:]})
				cancel()
				if err != nil {
					continue // refused: the identity is held by another storm connection
				}
				c.Send(hello)
				if w%2 == 0 {
					c.Send(ready0)
				}
				sent.Add(1)
				c.Close()
			}
		})
	}
	eventually(t, 10*time.Second, "the storm under way", func() bool { return sent.Load() >= 200 })
	begin := time.Now()
	startEngine(t, s.handshake, 0, 1)
	eventually(t, 15*time.Second, "the real engine joins through the storm", func() bool { return ready(t, s, 0) })
	joined := time.Since(begin)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	failed := 0
	const wellBehaved = 20
	for range wellBehaved {
		if resp, body, err := s.post(ctx, `{"prompt": [1, 2], "max_tokens": 3}`); err != nil || resp.StatusCode != 200 {
			failed++
			t.Errorf("request during the storm: %v %v %s", err, resp, body)
		}
	}
	close(stop)
	testwait.Wait(t, &storm, "the hello storm to stop")
	if !ready(t, s, 0) {
		t.Errorf("the engine lost its rank to the storm")
	}
	after := settle(t, s.cmd.Process.Pid, s.url("/metrics"), base, 20*time.Second, 64<<20, 16, 30)
	t.Logf("hello storm: %d storm connections; the real engine joined after %v", sent.Load(), joined.Round(time.Millisecond))
	attackReport(t, "hello-storm", int(sent.Load())+wellBehaved, failed, base, after)
}
