package vllmmetrics

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-llm/switchyard/wire"
)

// A pooling request's one output has no token but ends its prefill: vLLM's
// output processor records its stats before looking at the pooling output, so
// its prompt tokens, TTFT and phases count, it succeeds with its finish reason,
// and it generated nothing.
func TestPoolingRequest(t *testing.T) {
	m, _ := New(prometheus.NewRegistry(), "m", 4096)
	e := m.Engine(0, 0)
	t0 := time.Unix(100, 0)
	var r Request
	r.Start(t0, 12, 0)
	e.Output(&r, &wire.EngineCoreOutput{FinishReason: wire.FinishStop, PoolingOutput: &wire.Tensor{DType: "float32", Shape: []int64{1}, Data: make([]byte, 4)},
		Events: []wire.EngineCoreEvent{{Type: wire.EventQueued, Timestamp: 10}, {Type: wire.EventScheduled, Timestamp: 10.25}}},
		t0.Add(time.Second), 10.75)
	e.Finish(&r, wire.FinishStop, t0.Add(time.Second))
	lv := []string{"m", "0"}
	if got := testutil.ToFloat64(m.promptTokens.WithLabelValues(lv...)); got != 12 {
		t.Errorf("prompt_tokens_total = %v, want 12", got)
	}
	if got := testutil.ToFloat64(m.success.WithLabelValues("m", "0", "stop")); got != 1 {
		t.Errorf(`request_success_total{finished_reason="stop"} = %v`, got)
	}
	for name, c := range map[string]struct {
		h   *histVec
		sum float64
	}{
		"time_to_first_token_seconds": {m.ttft, 1}, "e2e_request_latency_seconds": {m.e2e, 1},
		"request_prefill_time_seconds": {m.prefill, 0.5}, "request_decode_time_seconds": {m.decode, 0},
		"request_prompt_tokens": {m.promptLen, 12}, "request_generation_tokens": {m.genLen, 0},
	} {
		if n, sum, _ := c.h.with(lv[0], lv[1]).Snapshot(); n != 1 || math.Abs(sum-c.sum) > 1e-9 {
			t.Errorf("vllm:%s: count %d sum %v, want 1 observation of %v", name, n, sum, c.sum)
		}
	}
	if n, _, _ := m.itl.with(lv[0], lv[1]).Snapshot(); n != 0 {
		t.Errorf("inter_token_latency observed %d times for a pooling request", n)
	}
}
