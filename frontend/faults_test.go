package frontend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard-llm/switchyard/internal/memtransport"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// sendAll sends n requests of maxTokens to rank and returns their ids.
func sendAll(t *testing.T, f *Frontend, rank, n int, maxTokens int64, prefix string) []string {
	return sendAllLayout(t, f, rank, n, maxTokens, prefix, wire.Native())
}

// sendAllLayout is sendAll with the ADDs encoded in layout l.
func sendAllLayout(t *testing.T, f *Frontend, rank, n int, maxTokens int64, prefix string, l *wire.Layout) []string {
	t.Helper()
	var ids []string
	for j := range n {
		id := fmt.Sprintf("%s-r%d-%d", prefix, rank, j)
		if err := f.Send(rank, wire.RequestAdd, addBodyLayout(t, l, id, maxTokens, nil), nil); err != nil {
			t.Fatalf("send %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func (r *recorder) allFinished(ids []string) bool {
	for _, id := range ids {
		if _, ok := r.finished[id]; !ok {
			return false
		}
	}
	return true
}

// vLLM's Python frontend kills every rank when one sends ENGINE_CORE_DEAD, and the
// Rust client fails every stream on the first engine error. Here rank 1 dies
// mid-generation; ranks 0 and 2 finish every request with exact tokens, only rank 1
// is reported down, and a restarted rank 1 rejoins through HELLO and serves again.
func TestDeadEngineIsolatedAndRejoins(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		f := startFrontend(t, testConfig(t, tr, 3), rec)
		for rank := range 3 {
			c := mockConfig(f.HandshakeAddress(), rank, 3)
			if rank == 1 {
				c.Faults.DieAfterSteps = 3
			}
			m := startMock(t, c)
			if rank == 1 {
				defer func() {
					if err := testwait.Recv(t, m.done, "the dying engine to exit"); !errors.Is(err, mockengine.ErrFault) {
						t.Errorf("dying engine returned %v", err)
					}
					m.done <- nil // for the cleanup
				}()
			}
		}
		waitReady(t, f, 3)
		var survivors []string
		for rank := range 3 {
			ids := sendAll(t, f, rank, 3, 12, "a")
			if rank != 1 {
				survivors = append(survivors, ids...)
			}
		}
		rec.waitFor(t, "rank 1 down and the others finished", func() bool {
			return len(rec.downs[1]) == 1 && rec.allFinished(survivors)
		})
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if err := rec.downs[1][0]; !errors.Is(err, ErrEngineCoreDead) || !errIs[*EngineDeadError](err) {
			t.Fatalf("rank 1 down with %v", err)
		}
		for _, id := range survivors {
			if !slices.Equal(rec.tokens[id], expectedTokens(id, 12)) {
				t.Errorf("%s: tokens %v", id, rec.tokens[id])
			}
		}
		if len(rec.downs[0])+len(rec.downs[2]) != 0 {
			t.Fatalf("healthy ranks reported down: %v", rec.downs)
		}
		var dead *EngineDeadError
		if err := f.Send(1, wire.RequestAdd, addBody(t, "late", 1, nil), nil); !errors.As(err, &dead) || dead.Rank != 1 || !errors.Is(err, ErrEngineCoreDead) {
			t.Fatalf("send to dead rank: %v", err)
		}
		if info := f.Engines()[1]; info.State != Dead || info.Cause == "" {
			t.Fatalf("rank 1 info %+v", info)
		}
		rec.mu.Unlock()

		// Restart rank 1: it goes through HELLO again and rejoins.
		startMock(t, mockConfig(f.HandshakeAddress(), 1, 3))
		rec.waitFor(t, "rank 1 up again", func() bool { return rec.ups[1] == 2 })
		ids := sendAll(t, f, 1, 2, 4, "b")
		rec.waitFor(t, "rejoined rank serves", func() bool { return rec.allFinished(ids) })
		rec.mu.Lock()
		if info := f.Engines()[1]; info.State != Ready || info.Generation != 1 {
			t.Fatalf("rejoined info %+v", info)
		}
	})
}

// Garbage on one engine's output and an engine exiting without a sentinel are each
// attributed to exactly that rank.
func TestGarbageAndSilentExitIsolated(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		f := startFrontend(t, testConfig(t, tr, 3), rec)
		for rank := range 3 {
			c := mockConfig(f.HandshakeAddress(), rank, 3)
			switch rank {
			case 0:
				c.Faults.GarbageAfterSteps = 2
			case 1:
				c.Faults.ExitAfterSteps = 2
			}
			startMock(t, c)
		}
		waitReady(t, f, 3)
		sendAll(t, f, 0, 1, 20, "g")
		sendAll(t, f, 1, 1, 20, "g")
		ok := sendAll(t, f, 2, 3, 20, "g")
		rec.waitFor(t, "two ranks down, one finished", func() bool {
			return len(rec.downs[0]) == 1 && len(rec.downs[1]) == 1 && rec.allFinished(ok)
		})
		rec.mu.Lock()
		defer rec.mu.Unlock()
		var de *wire.DecodeError
		if err := rec.downs[0][0]; !errors.As(err, &de) {
			t.Errorf("garbage: %v", err)
		}
		if err := rec.downs[1][0]; !errors.Is(err, ErrEngineLeft) {
			t.Errorf("silent exit: %v", err)
		}
		if len(rec.downs[2]) != 0 {
			t.Errorf("rank 2 down: %v", rec.downs[2])
		}
	})
}

// A second engine claiming a live rank gets no INIT; a rank outside the data
// parallel size neither. Both HELLOs reach the frontend and are counted.
func TestHelloRefused(t *testing.T) {
	rec := newRecorder()
	cfg := testConfig(t, "ipc", 1)
	f := startFrontend(t, cfg, rec)
	startMock(t, mockConfig(f.HandshakeAddress(), 0, 1))
	waitReady(t, f, 1)
	dup := helloRefused(t, f, 0)                         // duplicate of a live rank
	startMock(t, mockConfig(f.HandshakeAddress(), 1, 2)) // outside DataParallelSize
	waitChanged(t, f, func() bool { return f.refusedN.Load() == 2 })
	if info := f.Engines(); len(info) != 1 || info[0].State != Ready || info[0].Generation != 0 {
		t.Fatalf("engines after refusals: %+v", info)
	}
	select {
	case r := <-dup:
		t.Fatalf("refused engine got %q %v", r.frames, r.err)
	default:
	}
}

type recvResult struct {
	frames [][]byte
	err    error
}

// helloRefused sends HELLO to f's handshake socket as rank and waits until the
// frontend has refused it. The engine of that rank closed its own handshake
// connection after READY, but the ROUTER may not have seen the close yet; until it
// has, it refuses a new connection with the same identity at the ZMTP level (closes
// it, which PeerEvents reports), so such a HELLO never reaches the frontend: dial
// again on each such refusal. The returned channel gets anything the frontend sends
// on the connection it refused (it should send nothing).
func helloRefused(t *testing.T, f *Frontend, rank int) <-chan recvResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	id := wire.IdentityOf(rank)
	hello := wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "HELLO", Headless: true})
	before := f.refusedN.Load()
	for {
		s, err := transport.Dial(ctx, transport.Dealer, f.HandshakeAddress(), transport.Options{Identity: id[:], PeerEvents: true})
		if err != nil {
			if ctx.Err() != nil {
				t.Fatal(err)
			}
			continue // refused as a duplicate identity before the handshake completed
		}
		got := make(chan recvResult, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			fr, err := s.Recv()
			got <- recvResult{fr, err}
		}()
		t.Cleanup(func() {
			s.Close()
			testwait.Closed(t, done, "the handshake reader to end")
		})
		s.Send(hello) // a failed write drops the connection, which Recv reports
	waiting:
		for {
			f.mu.Lock()
			changed := f.changed
			f.mu.Unlock()
			if f.refusedN.Load() > before {
				return got
			}
			select {
			case <-changed:
			case r := <-got:
				if !errors.Is(r.err, transport.ErrPeerLeft) {
					t.Fatalf("HELLO as rank %d answered: %q %v", rank, r.frames, r.err)
				}
				break waiting // refused as a duplicate identity: the old connection is closing
			case <-ctx.Done():
				t.Fatalf("HELLO as rank %d never refused", rank)
			}
		}
	}
}

func waitChanged(t *testing.T, f *Frontend, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatal("timed out")
		}
	}
}

// An engine that never registers fails WaitReady with an error naming rank and phase,
// one watchdog tick at most after PhaseTimeout from its HELLO (fake time: a real
// 300 ms deadline also bound the healthy rank's handshake on a loaded machine).
func TestRegistrationTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memtransport.New()
		cfg := testConfig(t, "tcp", 2)
		cfg.Network = mem
		cfg.PhaseTimeout = 5 * time.Second
		f := startFrontend(t, cfg, newRecorder())
		start := time.Now()
		for rank := range 2 {
			c := mockConfig(f.HandshakeAddress(), rank, 2)
			c.Network = mem
			c.Faults.SkipRegistration = rank == 1
			startMock(t, c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := f.WaitReady(ctx, 2)
		var pt *PhaseTimeoutError
		if !errors.As(err, &pt) || pt.Rank != 1 || pt.Phase != PhaseRegistration || pt.Timeout != cfg.PhaseTimeout {
			t.Fatalf("want registration timeout of rank 1, got %v", err)
		}
		if d := time.Since(start); d < cfg.PhaseTimeout || d > cfg.PhaseTimeout+f.tickInterval() {
			t.Fatalf("timed out after %v (PhaseTimeout %v, tick %v)", d, cfg.PhaseTimeout, f.tickInterval())
		}
		if err := f.WaitReady(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if info := f.Engines(); info[0].State != Ready || info[1].State != Dead {
			t.Fatalf("engines %+v", info)
		}
	})
}

// Engines older than c8d98f81 register with an empty frame: a v0.18 engine is placed
// by UTILITY probes. An empty frame with a newer READY is a shape no release has: the
// engine is refused and sent nothing.
func TestEmptyRegistration(t *testing.T) {
	rec := newRecorder()
	f := startFrontend(t, testConfig(t, "ipc", 2), rec)
	c := mockConfig(f.HandshakeAddress(), 0, 2)
	c.Layout = wire.BuiltinLayout("v0.18")
	startMock(t, c)
	bad := mockConfig(f.HandshakeAddress(), 1, 2)
	bad.Faults.EmptyRegistration = true
	startMock(t, bad)
	waitFor(t, f, "rank 0 ready, rank 1 refused", func(es []EngineInfo) bool {
		return es[0].State == Ready && es[1].State == Dead
	})
	es := f.Engines()
	if !es[0].Ready.Empty || es[0].Layout != c.Layout || !strings.Contains(es[0].LayoutHow, "probes") {
		t.Fatalf("rank 0: %+v", es[0])
	}
	if !strings.Contains(es[1].Cause, "cannot be placed") || !strings.Contains(es[1].Cause, "--vllm-layout") {
		t.Fatalf("rank 1 cause: %s", es[1].Cause)
	}
}
