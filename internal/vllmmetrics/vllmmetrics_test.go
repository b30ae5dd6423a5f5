package vllmmetrics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/switchyard-llm/switchyard/wire"
)

func TestBuckets125(t *testing.T) {
	if got, want := Buckets125(4096), []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000}; !slices.Equal(got, want) {
		t.Errorf("Buckets125(4096) = %v, want %v", got, want)
	}
}

// One request through its life: the intervals come out as vLLM's frontend computes
// them (frontend clock for TTFT, ITL and e2e; engine timestamps for the phases).
func TestRequestLifecycle(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, "m", 4096)
	if err != nil {
		t.Fatal(err)
	}
	e := m.Engine(1, 0)
	e.Scheduler(&wire.SchedulerStats{NumRunningReqs: 3, NumWaitingReqs: 2, KVCacheUsage: 0.25})

	t0 := time.Unix(100, 0)
	var r Request
	r.Start(t0, 40, 16)
	e.Output(&r, &wire.EngineCoreOutput{NewTokenIDs: []int64{1},
		Events:       []wire.EngineCoreEvent{{Type: wire.EventQueued, Timestamp: 10}, {Type: wire.EventScheduled, Timestamp: 10.5}},
		PrefillStats: &wire.PrefillStats{NumCachedTokens: 32}}, t0.Add(2*time.Second), 11)
	e.Output(&r, &wire.EngineCoreOutput{NewTokenIDs: []int64{2, 3}, Events: []wire.EngineCoreEvent{{Type: wire.EventPreempted, Timestamp: 11.2}}},
		t0.Add(2500*time.Millisecond), 12)
	e.Finish(&r, wire.FinishLength, t0.Add(3*time.Second))
	e.Generated(3)

	lv := []string{"m", "1"}
	for name, want := range map[string]float64{
		"num_requests_running": 3, "num_requests_waiting": 2, "kv_cache_usage_perc": 0.25, "gpu_cache_usage_perc": 0.25,
	} {
		g, _ := map[string]*prometheus.GaugeVec{"num_requests_running": m.running, "num_requests_waiting": m.waiting,
			"kv_cache_usage_perc": m.kvUsage, "gpu_cache_usage_perc": m.gpuUsage}[name]
		if got := testutil.ToFloat64(g.WithLabelValues(lv...)); got != want {
			t.Errorf("vllm:%s = %v, want %v", name, got, want)
		}
	}
	for name, c := range map[string]struct {
		v    *prometheus.CounterVec
		want float64
	}{
		"prompt_tokens_total": {m.promptTokens, 40}, "generation_tokens_total": {m.genTokens, 3},
		"prefix_cache_queries_total": {m.prefixQueries, 40}, "prefix_cache_hits_total": {m.prefixHits, 32},
		"num_preemptions_total": {m.preemptions, 1},
	} {
		if got := testutil.ToFloat64(c.v.WithLabelValues(lv...)); got != c.want {
			t.Errorf("vllm:%s = %v, want %v", name, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.success.WithLabelValues("m", "1", "length")); got != 1 {
		t.Errorf(`request_success_total{finished_reason="length"} = %v`, got)
	}
	for name, c := range map[string]struct {
		h   *histVec
		sum float64
	}{
		"time_to_first_token_seconds": {m.ttft, 2}, "inter_token_latency_seconds": {m.itl, 0.5},
		"e2e_request_latency_seconds": {m.e2e, 3},
		"request_queue_time_seconds":  {m.queue, 0.5}, "request_prefill_time_seconds": {m.prefill, 0.5},
		"request_decode_time_seconds": {m.decode, 1}, "request_inference_time_seconds": {m.inference, 1.5},
		"request_time_per_output_token_seconds": {m.tpotReq, 0.5},
		"request_prompt_tokens":                 {m.promptLen, 40}, "request_generation_tokens": {m.genLen, 3},
		"request_params_max_tokens": {m.maxTokens, 16}, "request_max_num_generation_tokens": {m.maxGen, 3},
	} {
		if n, sum, _ := c.h.with(lv[0], lv[1]).Snapshot(); n != 1 || math.Abs(sum-c.sum) > 1e-9 {
			t.Errorf("vllm:%s: count %d sum %v, want 1 observation of %v", name, n, sum, c.sum)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds. (Deprecated name of inter_token_latency_seconds, kept for dashboards.)
# TYPE vllm:time_per_output_token_seconds histogram
`+tpotSeries()), "vllm:time_per_output_token_seconds"); err != nil {
		t.Errorf("the time_per_output_token_seconds alias: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg, "vllm:cache_config_info"); err != nil || n != 1 {
		t.Errorf("cache_config_info: %d series (%v)", n, err)
	}
	names, _ := reg.Gather()
	for _, f := range names {
		if !strings.HasPrefix(f.GetName(), "vllm:") {
			t.Errorf("series %s lacks the vllm: prefix", f.GetName())
		}
	}
}

// A moved request's phases span two engines' clocks: they are left out; the
// frontend-clock series are kept.
func TestMovedRequest(t *testing.T) {
	m, _ := New(prometheus.NewRegistry(), "m", 4096)
	e := m.Engine(0, 0)
	t0 := time.Unix(100, 0)
	var r Request
	r.Start(t0, 4, 8)
	e.Output(&r, &wire.EngineCoreOutput{NewTokenIDs: []int64{1}, Events: []wire.EngineCoreEvent{{Type: wire.EventQueued, Timestamp: 5}, {Type: wire.EventScheduled, Timestamp: 6}}}, t0.Add(time.Second), 7)
	r.Moved()
	e.Output(&r, &wire.EngineCoreOutput{NewTokenIDs: []int64{2}, Events: []wire.EngineCoreEvent{{Type: wire.EventQueued, Timestamp: 900}, {Type: wire.EventScheduled, Timestamp: 901}}}, t0.Add(2*time.Second), 902)
	e.Finish(&r, wire.FinishStop, t0.Add(2*time.Second))
	if n := observations(t, m.decode); n != 0 {
		t.Errorf("decode time recorded for a moved request (%d observations)", n)
	}
	if n := observations(t, m.e2e); n != 1 {
		t.Errorf("e2e latency: %d observations, want 1", n)
	}
}

// A nil *Metrics and *Engine record nothing and do not panic: the dispatcher runs
// without the vllm:* series.
func TestNil(t *testing.T) {
	var m *Metrics
	e := m.Engine(0, 0)
	var r Request
	e.Scheduler(&wire.SchedulerStats{})
	e.Output(&r, &wire.EngineCoreOutput{NewTokenIDs: []int64{1}}, time.Now(), 1)
	e.Finish(&r, wire.FinishStop, time.Now())
}

// The output path allocates nothing.
func TestOutputAllocs(t *testing.T) {
	m, _ := New(prometheus.NewRegistry(), "m", 4096)
	e := m.Engine(0, 0)
	o := &wire.EngineCoreOutput{NewTokenIDs: []int64{1}}
	now := time.Now()
	if n := testing.AllocsPerRun(100, func() {
		var r Request
		r.Start(now, 8, 16)
		e.Output(&r, o, now, 1)
		e.Output(&r, o, now, 2)
		e.Finish(&r, wire.FinishStop, now)
	}); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

// tpotSeries is the exposition of one 0.5 s observation in the ITL buckets.
func tpotSeries() string {
	var b strings.Builder
	for _, le := range itlBuckets {
		n := 0
		if le >= 0.5 {
			n = 1
		}
		fmt.Fprintf(&b, "vllm:time_per_output_token_seconds_bucket{engine=\"1\",model_name=\"m\",le=\"%v\"} %d\n", le, n)
	}
	b.WriteString(`vllm:time_per_output_token_seconds_bucket{engine="1",model_name="m",le="+Inf"} 1
vllm:time_per_output_token_seconds_sum{engine="1",model_name="m"} 0.5
vllm:time_per_output_token_seconds_count{engine="1",model_name="m"} 1
`)
	return b.String()
}

// observations is the sample count of h's engine 0 child of model m.
func observations(t *testing.T, h *histVec) uint64 {
	t.Helper()
	n, _, _ := h.with("m", "0").Snapshot()
	return n
}

// The histograms expose what a prometheus Histogram with the same buckets would,
// bucket edges ("le", +Inf, NaN) included.
func TestHistMatchesPrometheus(t *testing.T) {
	buckets := []float64{0.1, 0.5, 1}
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "x", Help: "h", Buckets: buckets})
	v := newHistVec("x", "h", buckets)
	h := v.with("m", "0")
	for _, x := range []float64{0, 0.1, 0.10001, 0.5, 0.7, 1, 2, -3, math.Inf(1)} {
		ref.Observe(x)
		h.Observe(x)
	}
	var want dto.Metric
	if err := ref.Write(&want); err != nil {
		t.Fatal(err)
	}
	n, sum, cum := h.Snapshot()
	if n != want.GetHistogram().GetSampleCount() || sum != want.GetHistogram().GetSampleSum() {
		t.Errorf("count %d sum %v, prometheus %d %v", n, sum, want.GetHistogram().GetSampleCount(), want.GetHistogram().GetSampleSum())
	}
	for _, b := range want.GetHistogram().GetBucket() {
		if cum[b.GetUpperBound()] != b.GetCumulativeCount() {
			t.Errorf("le=%v: %d, prometheus %d", b.GetUpperBound(), cum[b.GetUpperBound()], b.GetCumulativeCount())
		}
	}
}
