package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// adapter feeds the frontend's engine events into the dispatcher, as the serve layer
// does, and wakes tests waiting on engine state.
type adapter struct {
	d  *dispatcher.Dispatcher
	mu sync.Mutex
	ch chan struct{} // closed and replaced on every EngineUp/EngineDown
}

func (a *adapter) HandleOutputs(rank int, outs *wire.EngineCoreOutputs) {
	a.d.HandleOutputs(rank, outs)
}
func (a *adapter) EngineUp(rank int, _ frontend.EngineInfo) { a.d.EngineUp(rank); a.poke() }
func (a *adapter) EngineDown(rank int, err error)           { a.d.EngineDown(rank, err); a.poke() }

func (a *adapter) poke() {
	a.mu.Lock()
	close(a.ch)
	a.ch = make(chan struct{})
	a.mu.Unlock()
}

// waitEngines blocks until cond holds for the dispatcher's view of the engines.
func (a *adapter) waitEngines(t testing.TB, what string, cond func([]dispatcher.EngineStatus) bool) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		ch := a.ch
		a.mu.Unlock()
		if cond(a.d.Engines()) {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s: %+v", what, a.d.Engines())
		}
	}
}

// lateSender lets the dispatcher and the frontend be built in either order.
type lateSender struct {
	f atomic.Pointer[frontend.Frontend]
}

func (s *lateSender) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	return s.f.Load().Send(rank, typ, body, aux)
}

type stack struct {
	d  *dispatcher.Dispatcher
	f  *frontend.Frontend
	a  *adapter
	ts *timedSender // set when stackOpts.timed
}

type stackOpts struct {
	faults map[int]mockengine.Faults // injected into those ranks
	timed  bool                      // time ADDs and stamp output arrival (benchmarks)
}

// newStack wires dispatcher, frontend and dp mock engines over engineTransport.
func newStack(t testing.TB, engineTransport string, dp int, o stackOpts) *stack {
	t.Helper()
	ls := &lateSender{}
	var sender dispatcher.Sender = ls
	st := &stack{}
	if o.timed {
		st.ts = &timedSender{next: ls}
		sender = st.ts
	}
	d, err := dispatcher.New(dispatcher.Config{}, sender)
	if err != nil {
		t.Fatal(err)
	}
	a := &adapter{d: d, ch: make(chan struct{})}
	var h frontend.Handler = a
	if o.timed {
		h = stampingAdapter{a}
	}
	fcfg := frontend.DefaultConfig()
	fcfg.HandshakeAddress = "tcp://127.0.0.1:0"
	fcfg.EngineTransport = engineTransport
	fcfg.IPCDir = t.TempDir()
	fcfg.DataParallelSize = dp
	fcfg.PhaseTimeout = 20 * time.Second
	f, err := frontend.New(fcfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ls.f.Store(f)
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mocks sync.WaitGroup
	t.Cleanup(func() {
		_ = d.Close()
		cancel()
		testwait.Wait(t, &mocks, "the mock engines to stop")
		_ = f.Close()
	})
	for r := range dp {
		mc := mockengine.DefaultConfig()
		mc.HandshakeAddress = f.HandshakeAddress()
		mc.Rank, mc.DataParallelSize = r, dp
		mc.StepInterval = 2 * time.Millisecond
		mc.Faults = o.faults[r]
		mocks.Go(func() { _ = mockengine.Run(ctx, mc) })
	}
	a.waitEngines(t, "every engine up", func(st []dispatcher.EngineStatus) bool {
		up := 0
		for _, e := range st {
			if e.State == dispatcher.EngineStateUp {
				up++
			}
		}
		return up == dp
	})
	st.d, st.f, st.a = d, f, a
	return st
}

func forEachTransport(t *testing.T, body func(t *testing.T, tr string)) {
	for _, tr := range []string{"ipc", "tcp"} {
		t.Run(tr, func(t *testing.T) { body(t, tr) })
	}
}

func request(id string, maxTokens int64) *wire.EngineCoreRequest {
	sp := wire.DefaultSamplingParams()
	sp.SetEOS(wire.SomeInt(2)) // mock tokens are >= 100: EOS never fires
	sp.MaxTokens = wire.SomeInt(maxTokens)
	sp.Normalize()
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp}
}

type result struct {
	rank   int
	tokens []int64
	finish wire.FinishReason
	err    error
}

// drive runs n requests through workers concurrent streams; request i is "<prefix>i"
// asking for 1+i%17 tokens.
func drive(t *testing.T, d *dispatcher.Dispatcher, prefix string, n, workers int) []result {
	t.Helper()
	res := make([]result, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				s, err := d.Submit(ctx, request(fmt.Sprint(prefix, i), int64(1+i%17)))
				if err != nil {
					res[i] = result{rank: -1, err: err}
					continue
				}
				r := result{rank: s.Rank()}
				for {
					o, err := s.Recv(ctx)
					if err != nil {
						if !errors.Is(err, io.EOF) {
							r.err = err
						}
						break
					}
					r.tokens = append(r.tokens, o.TokenIDs...)
					r.finish = o.Finish
				}
				res[i] = r
			}
		})
	}
	wg.Wait()
	return res
}

// waitCtx ends after testwait.Deadline: the context for a Recv that would
// otherwise wait with no end.
func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	t.Cleanup(cancel)
	return ctx
}

// expected is the mock engine's uninterrupted stream for the prompt [1, 2, 3] every
// request here carries (the mock's tokens follow the sequence, not the id).
func expected(_ string, n int) []int64 { return mockengine.TokensFor([]int64{1, 2, 3}, n) }

func TestE2E10kRequestsOver4Engines(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		st := newStack(t, tr, 4, stackOpts{})
		const n = 10000
		res := drive(t, st.d, "req-", n, 256)
		perRank := make([]int, 4)
		for i, r := range res {
			if r.err != nil {
				t.Fatalf("request %d: %v", i, r.err)
			}
			id := fmt.Sprint("req-", i)
			if diff := cmp.Diff(expected(id, 1+i%17), r.tokens); diff != "" || r.finish != wire.FinishLength {
				t.Fatalf("request %d finished %v with tokens (-want +got):\n%s", i, r.finish, diff)
			}
			perRank[r.rank]++
		}
		for r, c := range perRank {
			if c < n/4*75/100 || c > n/4*125/100 {
				t.Errorf("rank %d took %d of %d (%v): not balanced", r, c, n, perRank)
			}
		}
		if n := dispatcher.InFlightAfterEnd(st.d); n != 0 {
			t.Errorf("%d still in flight", n)
		}
		t.Logf("spread %v", perRank)
	})
}

func TestE2EExplicitRanks(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		st := newStack(t, tr, 4, stackOpts{})
		ctx := context.Background()
		var streams []*dispatcher.Stream
		for i := range 40 {
			req := request(fmt.Sprint("pin-", i), 3)
			req.DataParallelRank = wire.SomeInt(int64(i % 4))
			s, err := st.d.Submit(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if s.Rank() != i%4 {
				t.Fatalf("pinned to %d, went to %d", i%4, s.Rank())
			}
			streams = append(streams, s)
		}
		// Completion proves the rank we asked for served it: outputs from any other
		// rank would be dropped as not ours.
		for _, s := range streams {
			var toks []int64
			for {
				o, err := s.Recv(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				toks = append(toks, o.TokenIDs...)
			}
			if !cmp.Equal(toks, expected(s.ID(), 3)) {
				t.Errorf("%s: %v", s.ID(), toks)
			}
		}
		req := request("nowhere", 3)
		req.DataParallelRank = wire.SomeInt(7)
		_, err := st.d.Submit(ctx, req)
		var inv *dispatcher.InvalidDataParallelRank
		if !errors.As(err, &inv) || err.Error() != "data parallel rank 7 is not connected to this frontend; connected ranks: [0, 1, 2, 3]" {
			t.Errorf("rank 7: %v", err)
		}
	})
}

// Rank 2 dies mid-run: its in-flight requests move to the other ranks and
// continue their streams exactly (the mock's tokens follow the sequence), so no
// request fails and every one has its uninterrupted tokens.
func TestE2EEngineKilledMidRun(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		st := newStack(t, tr, 4, stackOpts{faults: map[int]mockengine.Faults{2: {DieAfterSteps: 40}}})
		res := drive(t, st.d, "kill-", 4000, 256)
		for i, r := range res {
			if r.err != nil {
				t.Fatalf("request %d (submitted to rank %d) failed with %v; rank 2's should have moved", i, r.rank, r.err)
			}
			if !cmp.Equal(expected(fmt.Sprint("kill-", i), 1+i%17), r.tokens) {
				t.Fatalf("request %d (submitted to rank %d): wrong tokens", i, r.rank)
			}
		}
		if s := st.d.Engines()[2]; s.State != dispatcher.EngineStateDown || s.Cause == "" {
			t.Errorf("rank 2: %+v", s)
		}
		if n := dispatcher.InFlightAfterEnd(st.d); n != 0 {
			t.Errorf("%d still in flight", n)
		}
	})
}

func TestE2EAbortThenReuseID(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		st := newStack(t, tr, 2, stackOpts{})
		for round := range 50 {
			ctx, cancel := context.WithCancel(context.Background())
			req := request("reused", 1000)
			req.DataParallelRank = wire.SomeInt(int64(round % 2))
			s, err := st.d.Submit(ctx, req)
			// The last round's request may still hold the id: an output its
			// aborted predecessor had in flight reaches it under the same id, its
			// max_tokens 1 cuts it there and aborts it, and the id is free only
			// once that ABORT is out.
			for dup, end := (*dispatcher.DuplicateRequestId)(nil), time.Now().Add(testwait.Deadline); errors.As(err, &dup) && time.Now().Before(end); {
				s, err = st.d.Submit(ctx, req)
			}
			if err != nil {
				cancel()
				t.Fatalf("round %d: %v", round, err)
			}
			if _, err := s.Recv(waitCtx(t)); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			cancel()
			// Resubmitting at once must either be refused as a duplicate (the ABORT is
			// not out yet) or reach the engine after the ABORT; the mock engine dies on
			// a duplicate live id, so a wrong order would kill it.
			for {
				s2, err := st.d.Submit(context.Background(), request("reused", 1))
				var dup *dispatcher.DuplicateRequestId
				if errors.As(err, &dup) {
					continue
				}
				if err != nil {
					t.Fatalf("round %d resubmit: %v", round, err)
				}
				for {
					_, err := s2.Recv(waitCtx(t))
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("round %d resubmitted request: %v", round, err)
					}
				}
				break
			}
		}
		for _, e := range st.d.Engines() {
			if e.State != dispatcher.EngineStateUp {
				t.Errorf("rank %d went down: %s", e.Rank, e.Cause)
			}
		}
	})
}

func TestE2EUtility(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		st := newStack(t, tr, 3, stackOpts{})
		res, err := st.d.CallUtility(context.Background(), "is_sleeping")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := res.Consensus(); err != nil || v != false {
			t.Errorf("is_sleeping consensus %v, %v", v, err)
		}
		_, err = st.d.CallUtility(context.Background(), "no_such_method")
		var ce *dispatcher.UtilityCallError
		if !errors.As(err, &ce) {
			t.Errorf("unknown method: %v", err)
		}
	})
}
