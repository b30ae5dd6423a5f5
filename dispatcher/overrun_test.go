package dispatcher

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-llm/switchyard/wire"
)

// An engine that keeps generating past max_tokens is cut off there: the client
// gets max_tokens tokens, the output that reaches it finishes with length, the
// request is aborted at the engine, and nothing beyond is delivered or counted.
func TestEngineOverrunCutAtMaxTokens(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	req := mkReq("a")
	req.Sampling.MaxTokens = wire.SomeInt(5)
	s, err := h.d.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	h.d.HandleOutputs(0, batch(0, tokOut("a", 11, 12, 13)))
	h.d.HandleOutputs(0, batch(0, tokOut("a", 14, 15, 16, 17)))
	h.d.HandleOutputs(0, batch(0, tokOut("a", 18), tokOut("a", 19)))
	outs, err := recvAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int64{{11, 12, 13}, {14, 15}}, tokens(outs)); diff != "" {
		t.Fatalf("tokens (-want +got):\n%s", diff)
	}
	if f := outs[len(outs)-1].Finish; f != wire.FinishLength {
		t.Errorf("finished with %v, want length", f)
	}
	if fr := h.s.next(t, wire.RequestAbort); fr.rank != 0 || !cmp.Equal(fr.ids, []string{"a"}) {
		t.Errorf("ABORT to rank %d with %v", fr.rank, fr.ids)
	}
	if v := testutil.ToFloat64(h.d.m.tokens.WithLabelValues("0")); v != 5 {
		t.Errorf("output tokens counted %v, want 5", v)
	}
	if v := testutil.ToFloat64(h.d.m.requests.WithLabelValues("0", "length")); v != 1 {
		t.Errorf("length outcomes %v, want 1", v)
	}
	if h.d.InFlight() != 0 {
		t.Errorf("%d in flight", h.d.InFlight())
	}
}

// An engine that finishes the request but in an output carrying too many tokens
// is trimmed; its finish stands and nothing is aborted (the engine holds nothing).
func TestEngineOverrunInFinalOutputTrimmed(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	var toks []int64
	var fin wire.FinishReason
	_, err := h.d.SubmitFunc(moving("cb", 3, 0), func(_ int, o *wire.EngineCoreOutput, err error) {
		if err != nil {
			t.Errorf("callback error %v", err)
			return
		}
		toks = append(toks, o.NewTokenIDs...)
		fin = o.FinishReason
	})
	if err != nil {
		t.Fatal(err)
	}
	h.d.HandleOutputs(0, batch(0, tokOut("cb", 7), finOut("cb", wire.FinishStop, 8, 9, 10, 11)))
	if !slices.Equal(toks, []int64{7, 8, 9}) || fin != wire.FinishStop {
		t.Fatalf("tokens %v finish %v; want [7 8 9] stop", toks, fin)
	}
	h.d.Abort() // flush whatever was queued
	if n := len(h.s.sent(wire.RequestAbort)); n != 0 {
		t.Errorf("%d ABORTs for a request the engine finished", n)
	}
}

// A moved request's budget counts what it delivered before the move: its new
// engine is cut at the rest, and aborted under the id it knows.
func TestEngineOverrunAfterMigration(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	var toks []int64
	var fin wire.FinishReason
	rank, err := h.d.SubmitFunc(moving("m", 5, 0), func(_ int, o *wire.EngineCoreOutput, err error) {
		if err != nil {
			t.Errorf("callback error %v", err)
			return
		}
		toks = append(toks, o.NewTokenIDs...)
		fin = o.FinishReason
	})
	if err != nil {
		t.Fatal(err)
	}
	h.s.next(t, wire.RequestAdd)
	h.d.HandleOutputs(rank, batch(rank, tokOut("m", 1, 2, 3)))
	h.d.EngineDown(rank, errors.New("EOF"))
	add := h.s.next(t, wire.RequestAdd)
	if add.add.Sampling.MaxTokens.Value != 2 {
		t.Fatalf("continuation max_tokens %v", add.add.Sampling.MaxTokens)
	}
	h.d.HandleOutputs(add.rank, batch(add.rank, tokOut(add.add.RequestID, 4, 5, 6, 7)))
	if !slices.Equal(toks, []int64{1, 2, 3, 4, 5}) || fin != wire.FinishLength {
		t.Fatalf("tokens %v finish %v; want [1 2 3 4 5] length", toks, fin)
	}
	if fr := h.s.next(t, wire.RequestAbort); fr.rank != add.rank || !cmp.Equal(fr.ids, []string{add.add.RequestID}) {
		t.Errorf("ABORT to rank %d with %v", fr.rank, fr.ids)
	}
}

// Scheduler stats no engine could mean are clamped before routing reads them,
// and each clamp is counted.
func TestSchedulerStatsClamped(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	o := batch(0)
	// Unclamped, waiting -5 would make rank 0 (3 running) look emptier than rank 1.
	o.SchedulerStats = &wire.SchedulerStats{NumWaitingReqs: -5, NumRunningReqs: 3, KVCacheUsage: math.NaN()}
	h.d.HandleOutputs(0, o)
	h.d.ObserveLoad(1, 0, 1, 0)
	s, err := h.d.Submit(context.Background(), mkReq("x"))
	if err != nil || s.Rank() != 1 {
		t.Fatalf("went to %v (%v); rank 0 has 3 running, rank 1 has 1", s, err)
	}
	st := h.d.Engines()[0]
	if st.Waiting != 0 || st.Running != 3 || st.KVCacheUsage != 0 {
		t.Errorf("rank 0 after bad stats: %+v", st)
	}
	for _, c := range []struct {
		running int64
		kv      float64
		want    float64
	}{{1 << 62, 1e308, 1}, {0, math.Inf(1), 1}, {0, math.Inf(-1), 0}, {0, -0.5, 0}, {0, 0.5, 0.5}} {
		h.d.ObserveLoad(1, 0, c.running, c.kv)
		if st := h.d.Engines()[1]; st.KVCacheUsage != c.want || st.Running > maxStatsCount {
			t.Errorf("kv %v running %d: kept as %v, %d", c.kv, c.running, st.KVCacheUsage, st.Running)
		}
	}
	for _, c := range []struct {
		rank, field string
		want        float64
	}{
		{"0", "num_waiting_reqs", 1}, {"0", "num_running_reqs", 0}, {"0", "kv_cache_usage", 1},
		{"1", "num_waiting_reqs", 0}, {"1", "num_running_reqs", 1}, {"1", "kv_cache_usage", 4},
	} {
		if v := testutil.ToFloat64(h.d.m.clamped.WithLabelValues(c.rank, c.field)); v != c.want {
			t.Errorf("clamped{rank=%s,field=%s} = %v, want %v", c.rank, c.field, v, c.want)
		}
	}
}

// The output that is cut keeps one logprobs row per token it still carries.
func TestEngineOverrunTrimsLogprobs(t *testing.T) {
	h := newHarness(t, Config{}, 0)
	req := mkReq("lp")
	req.Sampling.MaxTokens = wire.SomeInt(2)
	s, err := h.d.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	rows := func(k int64) wire.Tensor { // 4 rows of k float32s
		return wire.Tensor{DType: "float32", Shape: []int64{4, k}, Data: make([]byte, 4*k*4)}
	}
	o := tokOut("lp", 1, 2, 3, 4)
	o.NewLogprobs = &wire.LogprobsLists{LogprobTokenIDs: rows(3), Logprobs: rows(3), SampledTokenRanks: rows(1), CuNumGeneratedTokens: []int64{1, 3, 4}}
	h.d.HandleOutputs(0, batch(0, o))
	outs, err := recvAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	lp := outs[len(outs)-1].Logprobs
	if lp == nil {
		t.Fatal("no logprobs delivered")
	}
	for name, tt := range map[string]wire.Tensor{"ids": lp.LogprobTokenIDs, "logprobs": lp.Logprobs, "ranks": lp.SampledTokenRanks} {
		if tt.Shape[0] != 2 || int64(len(tt.Data)) != 2*tt.Shape[1]*4 {
			t.Errorf("%s: shape %v, %d bytes; want 2 rows", name, tt.Shape, len(tt.Data))
		}
	}
	if !slices.Equal(lp.CuNumGeneratedTokens, []int64{1, 2}) {
		t.Errorf("cu_num_generated_tokens %v, want [1 2]", lp.CuNumGeneratedTokens)
	}
}
