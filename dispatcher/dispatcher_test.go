package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

type waveStub struct{ wave int64 }

func (w *waveStub) OnAdd(int) int64 { return w.wave }

func TestSubmitStampsAndSendsOneAdd(t *testing.T) {
	fixed := time.Unix(1700000000, 500_000_000)
	h := newHarness(t, Config{ClientIndex: 3, Waves: &waveStub{wave: 7}, Now: func() time.Time { return fixed }}, 0)
	s, err := h.d.Submit(context.Background(), mkReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	adds := h.s.sent(wire.RequestAdd)
	if len(adds) != 1 {
		t.Fatalf("%d ADDs sent, want 1", len(adds))
	}
	got := adds[0].add
	if got.RequestID != "a" || got.ClientIndex != 3 || got.CurrentWave != 7 || got.ArrivalTime != 1700000000.5 {
		t.Errorf("ADD stamped id=%q client=%d wave=%d arrival=%v", got.RequestID, got.ClientIndex, got.CurrentWave, got.ArrivalTime)
	}
	if s.ID() != "a" || s.Rank() != 0 || h.d.InFlight() != 1 {
		t.Errorf("stream %q rank %d, in flight %d", s.ID(), s.Rank(), h.d.InFlight())
	}
}

func TestOutputsRouteToTheirStreams(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	a, _ := h.d.Submit(context.Background(), pinned("a", 0))
	b, _ := h.d.Submit(context.Background(), pinned("b", 1))
	h.d.HandleOutputs(0, batch(0, tokOut("a", 1, 2)))
	h.d.HandleOutputs(1, batch(1, tokOut("b", 7)))
	h.d.HandleOutputs(1, batch(1, finOut("b", wire.FinishLength, 8)))
	h.d.HandleOutputs(0, batch(0, tokOut("b", 99), finOut("a", wire.FinishStop, 3))) // b's id from the wrong rank is dropped

	outs, err := recvAll(t, a)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int64{{1, 2}, {3}}, tokens(outs)); diff != "" {
		t.Errorf("a tokens (-want +got):\n%s", diff)
	}
	if outs[1].Finish != wire.FinishStop {
		t.Errorf("a finished with %v", outs[1].Finish)
	}
	outs, err = recvAll(t, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int64{{7}, {8}}, tokens(outs)); diff != "" {
		t.Errorf("b tokens (-want +got):\n%s", diff)
	}
	if h.d.InFlight() != 0 {
		t.Errorf("in flight %d after both finished", h.d.InFlight())
	}
	if v := testutil.ToFloat64(h.d.m.requests.WithLabelValues("0", "stop")); v != 1 {
		t.Errorf("requests_total{rank=0,outcome=stop} = %v", v)
	}
	if v := testutil.ToFloat64(h.d.m.tokens.WithLabelValues("1")); v != 2 {
		t.Errorf("output_tokens_total{rank=1} = %v", v)
	}
}

func tokens(outs []Output) [][]int64 {
	var ts [][]int64
	for _, o := range outs {
		ts = append(ts, o.TokenIDs)
	}
	return ts
}

func TestOutputTokensStayValid(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	req := mkReq("a")
	req.Sampling.MaxTokens = wire.SomeInt(1000)
	s, _ := h.d.Submit(context.Background(), req)
	reused := []int64{0}
	o := batch(0, wire.EngineCoreOutput{RequestID: "a", NewTokenIDs: reused, FinishReason: wire.FinishNone})
	var got [][]int64
	for i := range int64(100) {
		reused[0] = i // the caller reuses its decode buffers
		h.d.HandleOutputs(0, o)
		out, err := s.Recv(waitCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, out.TokenIDs)
	}
	for i, ts := range got {
		if len(ts) != 1 || ts[0] != int64(i) {
			t.Fatalf("output %d now holds %v", i, ts)
		}
	}
}

func TestExplicitRank(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1, 2)
	for i := range 6 {
		if _, err := h.d.Submit(context.Background(), pinned(fmt.Sprint(i), 2)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range h.s.sent(wire.RequestAdd) {
		if f.rank != 2 {
			t.Errorf("pinned request went to rank %d", f.rank)
		}
	}
	h.d.EngineDown(2, errors.New("gone"))
	_, err := h.d.Submit(context.Background(), pinned("x", 2))
	var inv *InvalidDataParallelRank
	if !errors.As(err, &inv) || err.Error() != "data parallel rank 2 is not connected to this frontend; connected ranks: [0, 1]" {
		t.Errorf("Submit to a down rank: %v", err)
	}
	if n := len(h.s.sent(wire.RequestAdd)); n != 6 {
		t.Errorf("%d ADDs sent, want 6 (nothing for the refused one)", n)
	}
}

func TestDuplicateRequestID(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	if _, err := h.d.Submit(context.Background(), mkReq("dup")); err != nil {
		t.Fatal(err)
	}
	_, err := h.d.Submit(context.Background(), mkReq("dup"))
	var dup *DuplicateRequestId
	if !errors.As(err, &dup) || dup.ID != "dup" || err.Error() != `request id "dup" is already in flight` {
		t.Fatalf("second Submit: %v", err)
	}
	if _, err := h.d.SubmitFunc(mkReq("dup"), func(int, *wire.EngineCoreOutput, error) {}); !errors.As(err, &dup) {
		t.Fatalf("SubmitFunc with a live id: %v", err)
	}
	if n := len(h.s.sent(wire.RequestAdd)); n != 1 {
		t.Fatalf("%d ADDs sent, want 1", n)
	}
	if h.d.InFlight() != 1 {
		t.Errorf("in flight %d, want 1", h.d.InFlight())
	}
	// Once finished the id is free again.
	rank := h.s.sent(wire.RequestAdd)[0].rank
	h.d.HandleOutputs(rank, batch(rank, finOut("dup", wire.FinishStop, 1)))
	if _, err := h.d.Submit(context.Background(), mkReq("dup")); err != nil {
		t.Errorf("reusing a finished id: %v", err)
	}
}

func TestFinishedRequestsWithoutFinalOutput(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	s, _ := h.d.Submit(context.Background(), mkReq("a"))
	o := batch(0, tokOut("a", 5))
	o.FinishedRequests = []string{"a", "never-ours"}
	h.d.HandleOutputs(0, o)
	outs, err := recvAll(t, s)
	var rf *RequestFailedError
	if len(outs) != 1 || !errors.As(err, &rf) || !errors.Is(err, ErrNoFinalOutput) || rf.Rank != 0 || rf.ID != "a" {
		t.Fatalf("got %d outputs then %v", len(outs), err)
	}
	// A final output in the same message wins: finished_requests is only a safety net.
	s2, _ := h.d.Submit(context.Background(), mkReq("b"))
	o = batch(0, finOut("b", wire.FinishStop, 1))
	o.FinishedRequests = []string{"b"}
	h.d.HandleOutputs(0, o)
	if _, err := recvAll(t, s2); err != nil {
		t.Errorf("b: %v", err)
	}
}

func TestCloseStreamAbortsAtEngine(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	s, _ := h.d.Submit(context.Background(), mkReq("a"))
	h.d.HandleOutputs(0, batch(0, tokOut("a", 1)))
	s.Close()
	outs, err := recvAll(t, s)
	if err != nil || len(outs) != 2 || outs[1].Finish != wire.FinishAbort {
		t.Fatalf("after Close: %+v, %v; want the token then a final abort", outs, err)
	}
	if fr := h.s.next(t, wire.RequestAbort); fr.rank != 0 || !cmp.Equal(fr.ids, []string{"a"}) {
		t.Errorf("ABORT to rank %d with %v", fr.rank, fr.ids)
	}
	h.d.HandleOutputs(0, batch(0, tokOut("a", 2))) // the engine lags: ignored
	s.Close()                                      // idempotent
	if n := len(h.s.sent(wire.RequestAbort)); n != 1 {
		t.Errorf("%d ABORTs, want 1", n)
	}
	if v := testutil.ToFloat64(h.d.m.requests.WithLabelValues("0", "cancelled")); v != 1 {
		t.Errorf("cancelled = %v", v)
	}
}

func TestContextCancelAborts(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	s, _ := h.d.Submit(ctx, mkReq("a"))
	cancel()
	if fr := h.s.next(t, wire.RequestAbort); !cmp.Equal(fr.ids, []string{"a"}) {
		t.Errorf("ABORT ids %v", fr.ids)
	}
	outs, err := recvAll(t, s)
	if err != nil || len(outs) != 1 || outs[0].Finish != wire.FinishAbort {
		t.Errorf("after cancel: %+v, %v", outs, err)
	}
	// The id is reusable once the ABORT is out. The fake sender records the frame
	// inside Send, and the aborter frees the id only after Send returns, so a resubmit
	// may briefly still be refused as a duplicate; anything else is an error.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := h.d.Submit(context.Background(), mkReq("a"))
		if err == nil {
			break
		}
		var dup *DuplicateRequestId
		if !errors.As(err, &dup) || time.Now().After(deadline) {
			t.Fatalf("resubmit after abort: %v", err)
		}
		runtime.Gosched()
	}
}

// Under WithCallerAborts the dispatcher does not watch ctx: the caller's Close
// aborts, and nothing is registered with ctx to be removed at the finish.
func TestCallerAbortsNoWatch(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := h.d.Submit(WithCallerAborts(ctx), mkReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	if s.r.stopWatch != nil {
		t.Fatal("a watch was registered with the caller's ctx")
	}
	cancel()
	s.Close()
	if fr := h.s.next(t, wire.RequestAbort); !cmp.Equal(fr.ids, []string{"a"}) {
		t.Errorf("ABORT ids %v", fr.ids)
	}
	if n := len(h.s.sent(wire.RequestAbort)); n != 1 {
		t.Errorf("%d ABORTs, want 1", n)
	}
}

func TestAbortIsGroupedPerEngine(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	for _, id := range []string{"a0", "b0", "c0"} {
		h.d.Submit(context.Background(), pinned(id, 0))
	}
	for _, id := range []string{"a1", "b1"} {
		h.d.Submit(context.Background(), pinned(id, 1))
	}
	h.d.Abort("a0", "a1", "unknown", "c0", "b1")
	got := map[int][]string{}
	for _, f := range h.s.sent(wire.RequestAbort) {
		if _, dup := got[f.rank]; dup {
			t.Errorf("rank %d got more than one ABORT frame", f.rank)
		}
		got[f.rank] = f.ids
	}
	if diff := cmp.Diff(map[int][]string{0: {"a0", "c0"}, 1: {"a1", "b1"}}, got); diff != "" {
		t.Errorf("ABORT frames (-want +got):\n%s", diff)
	}
	if h.d.InFlight() != 1 {
		t.Errorf("in flight %d, want 1 (b0)", h.d.InFlight())
	}
}

func TestDroppedStreamAborts(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	func() {
		_, err := h.d.Submit(context.Background(), mkReq("dropped"))
		if err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(h.s.sent(wire.RequestAbort)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no ABORT after the stream was dropped")
		}
		runtime.GC() // the cleanup runs after a collection notices the Stream is gone
		select {
		case fr := <-h.s.ch:
			if fr.typ == wire.RequestAbort && !cmp.Equal(fr.ids, []string{"dropped"}) {
				t.Errorf("ABORT ids %v", fr.ids)
			}
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestEngineDownFailsOnlyItsRequests(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	a, _ := h.d.Submit(context.Background(), pinned("a", 0))
	b, _ := h.d.Submit(context.Background(), pinned("b", 1))
	var cbErr error
	h.d.SubmitFunc(pinned("c", 0), func(_ int, _ *wire.EngineCoreOutput, err error) { cbErr = err })
	h.d.HandleOutputs(0, batch(0, tokOut("a", 1)))
	h.d.EngineDown(0, errors.New("ENGINE_CORE_DEAD"))

	outs, err := recvAll(t, a)
	var rf *RequestFailedError
	var down *EngineDownError
	if len(outs) != 1 || !errors.As(err, &rf) || !errors.As(err, &down) || down.Rank != 0 {
		t.Fatalf("a: %d outputs, %v", len(outs), err)
	}
	if want := `request "a" on engine rank 0 failed: engine rank 0 is down: ENGINE_CORE_DEAD`; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
	if !errors.As(cbErr, &down) {
		t.Errorf("callback got %v", cbErr)
	}
	if len(h.s.sent(wire.RequestAbort)) != 0 {
		t.Error("ABORT sent to a dead engine")
	}
	// b is untouched; new requests avoid rank 0 until it rejoins.
	h.d.HandleOutputs(1, batch(1, finOut("b", wire.FinishStop, 2)))
	if _, err := recvAll(t, b); err != nil {
		t.Errorf("b: %v", err)
	}
	for i := range 4 {
		s, err := h.d.Submit(context.Background(), mkReq(fmt.Sprint("n", i)))
		if err != nil || s.Rank() != 1 {
			t.Fatalf("after EngineDown: rank %v, %v", s, err)
		}
	}
	st := h.d.Engines()
	if st[0].State != EngineStateDown || st[0].Cause != "ENGINE_CORE_DEAD" || st[1].State != EngineStateUp || st[1].InFlight != 4 {
		t.Errorf("Engines() = %+v", st)
	}
	h.d.EngineUp(0)
	s, err := h.d.Submit(context.Background(), mkReq("back"))
	if err != nil || s.Rank() != 0 {
		t.Errorf("after rejoin: %v, %v; want rank 0 (idle)", s, err)
	}
}

func TestSendFailureRollsBack(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	stuck := errors.New("engine rank 0 stuck")
	h.s.setFail(0, stuck)
	_, err := h.d.Submit(context.Background(), mkReq("a"))
	var rf *RequestFailedError
	if !errors.As(err, &rf) || !errors.Is(err, stuck) {
		t.Fatalf("Submit: %v", err)
	}
	if h.d.InFlight() != 0 {
		t.Errorf("in flight %d after a refused send", h.d.InFlight())
	}
	h.s.setFail(0, nil)
	if _, err := h.d.Submit(context.Background(), mkReq("a")); err != nil {
		t.Errorf("id not freed after a refused send: %v", err)
	}
}

func TestRefusedSendTriesAnotherEngine(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyRoundRobin}, 0, 1, 2)
	h.s.setFail(0, errors.New("engine rank 0 dead"))
	h.s.setFail(1, errors.New("engine rank 1 stuck"))
	for i := range 6 {
		s, err := h.d.Submit(context.Background(), mkReq(fmt.Sprint(i)))
		if err != nil || s.Rank() != 2 {
			t.Fatalf("request %d: %v, %v; want rank 2, the one that takes frames", i, s, err)
		}
	}
	// A pinned request is not moved.
	if _, err := h.d.Submit(context.Background(), pinned("p", 0)); err == nil {
		t.Error("a request pinned to a refusing engine was accepted")
	}
	h.s.setFail(2, errors.New("engine rank 2 stuck"))
	_, err := h.d.Submit(context.Background(), mkReq("none"))
	var rf *RequestFailedError
	if !errors.As(err, &rf) || h.d.InFlight() != 6 {
		t.Errorf("every engine refusing: %v (in flight %d)", err, h.d.InFlight())
	}
}

func TestSlowConsumerIsAborted(t *testing.T) {
	h := newHarness(t, Config{StreamBuffer: 2}, 0, 1)
	slow, _ := h.d.Submit(context.Background(), pinned("slow", 0))
	fast, _ := h.d.Submit(context.Background(), pinned("fast", 0))
	for i := range int64(5) {
		h.d.HandleOutputs(0, batch(0, tokOut("slow", i), tokOut("fast", i)))
		if _, err := fast.Recv(waitCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	outs, err := recvAll(t, slow)
	var sc *SlowConsumerError
	if len(outs) != 2 || !errors.As(err, &sc) || sc.ID != "slow" {
		t.Fatalf("slow: %d outputs, %v", len(outs), err)
	}
	if fr := h.s.next(t, wire.RequestAbort); !cmp.Equal(fr.ids, []string{"slow"}) {
		t.Errorf("ABORT %v", fr.ids)
	}
	h.d.HandleOutputs(0, batch(0, finOut("fast", wire.FinishStop)))
	if outs, err := recvAll(t, fast); err != nil || len(outs) != 1 {
		t.Errorf("fast: %v, %v", outs, err)
	}
}

func TestNoEngines(t *testing.T) {
	h := newHarness(t, Config{})
	if _, err := h.d.Submit(context.Background(), mkReq("a")); !errors.Is(err, ErrNoEngines) {
		t.Errorf("Submit with no engines: %v", err)
	}
	if _, err := h.d.Submit(context.Background(), &wire.EngineCoreRequest{RequestID: "x"}); err == nil {
		t.Error("an invalid request was accepted")
	}
}

func TestCloseFailsEverythingLive(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	a, _ := h.d.Submit(context.Background(), pinned("a", 0))
	b, _ := h.d.Submit(context.Background(), pinned("b", 1))
	if err := h.d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Stream{a, b} {
		if _, err := recvAll(t, s); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: %v", s.ID(), err)
		}
	}
	if n := len(h.s.sent(wire.RequestAbort)); n != 2 {
		t.Errorf("%d ABORT frames, want one per engine", n)
	}
	if _, err := h.d.Submit(context.Background(), mkReq("c")); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v", err)
	}
	if _, err := h.d.CallUtility(context.Background(), "is_sleeping"); !errors.Is(err, ErrClosed) {
		t.Errorf("CallUtility after Close: %v", err)
	}
}

func TestDrain(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	s, _ := h.d.Submit(context.Background(), mkReq("a"))
	done := make(chan error, 1)
	go func() { done <- h.d.Drain(context.Background()) }()
	// Drain refuses new work as soon as it starts; wait for that, not for time.
	for {
		_, err := h.d.Submit(context.Background(), mkReq("probe"))
		if errors.Is(err, ErrDraining) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h.d.Abort("probe")
		select {
		case err := <-done:
			t.Fatalf("Drain returned %v with a request in flight", err)
		default:
		}
	}
	h.d.HandleOutputs(0, batch(0, finOut("a", wire.FinishStop, 1)))
	if err := testwait.Recv(t, done, "Drain to return"); err != nil {
		t.Errorf("Drain: %v", err)
	}
	if _, err := recvAll(t, s); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.d.Drain(ctx); err != nil {
		t.Errorf("Drain with nothing in flight: %v", err)
	}
}

func TestSubmitFuncDelivers(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	var got []int64
	var fin wire.FinishReason
	var ended error
	rank, err := h.d.SubmitFunc(mkReq("a"), func(_ int, out *wire.EngineCoreOutput, err error) {
		if err != nil {
			ended = err
			return
		}
		got = append(got, out.NewTokenIDs...)
		fin = out.FinishReason
	})
	if err != nil || rank != 0 {
		t.Fatal(rank, err)
	}
	h.d.HandleOutputs(0, batch(0, tokOut("a", 1, 2)))
	h.d.HandleOutputs(0, batch(0, finOut("a", wire.FinishLength, 3)))
	if !cmp.Equal(got, []int64{1, 2, 3}) || fin != wire.FinishLength || ended != nil {
		t.Errorf("got %v fin %v err %v", got, fin, ended)
	}
	h.d.SubmitFunc(mkReq("b"), func(_ int, _ *wire.EngineCoreOutput, err error) { ended = err })
	h.d.Abort("b")
	if !errors.Is(ended, ErrAborted) {
		t.Errorf("aborted callback got %v", ended)
	}
}

func TestSchedulerStatsSteerChoice(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	o := batch(0)
	o.SchedulerStats = &wire.SchedulerStats{NumWaitingReqs: 10, NumRunningReqs: 20}
	h.d.HandleOutputs(0, o)
	h.d.ObserveLoad(1, 0, 3, 0.1)
	for i := range 3 {
		s, err := h.d.Submit(context.Background(), mkReq(fmt.Sprint(i)))
		if err != nil || s.Rank() != 1 {
			t.Fatalf("request %d went to %v (%v); rank 1 is far lighter", i, s, err)
		}
	}
	st := h.d.Engines()
	if st[0].Waiting != 10 || st[0].Running != 20 || st[1].KVCacheUsage != 0.1 || st[0].LastOutput.IsZero() {
		t.Errorf("Engines() = %+v", st)
	}
}

func TestRecvContext(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	s, _ := h.d.Submit(context.Background(), mkReq("a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Recv(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Recv with a cancelled context: %v", err)
	}
	h.d.HandleOutputs(0, batch(0, finOut("a", wire.FinishStop, 1)))
	if _, err := s.Recv(waitCtx(t)); err != nil {
		t.Error(err)
	}
	if _, err := s.Recv(waitCtx(t)); err != io.EOF {
		t.Errorf("after the final output: %v", err)
	}
}
