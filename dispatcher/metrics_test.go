package dispatcher

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-llm/switchyard/wire"
)

func TestMetrics(t *testing.T) {
	now := time.Unix(1000, 0)
	h := newHarness(t, Config{Now: func() time.Time { return now }}, 0, 1)
	h.d.Submit(context.Background(), pinned("a", 0))
	h.d.Submit(context.Background(), pinned("b", 0))
	now = now.Add(30 * time.Millisecond)
	h.d.HandleOutputs(0, batch(0, tokOut("a", 1, 2), tokOut("b", 1)))
	now = now.Add(20 * time.Millisecond)
	h.d.HandleOutputs(0, batch(0, finOut("a", wire.FinishLength, 3)))

	want := `
# HELP switchyard_requests_in_flight Live requests this dispatcher has on the engine.
# TYPE switchyard_requests_in_flight gauge
switchyard_requests_in_flight{rank="0"} 1
switchyard_requests_in_flight{rank="1"} 0
# HELP switchyard_output_tokens_total Generated tokens received, by engine rank.
# TYPE switchyard_output_tokens_total counter
switchyard_output_tokens_total{rank="0"} 4
switchyard_output_tokens_total{rank="1"} 0
`
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want),
		"switchyard_requests_in_flight", "switchyard_output_tokens_total"); err != nil {
		t.Error(err)
	}
	if v := testutil.ToFloat64(h.d.m.requests.WithLabelValues("0", "length")); v != 1 {
		t.Errorf("requests_total{rank=0,outcome=length} = %v", v)
	}
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if hg := m.GetHistogram(); hg != nil && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "0" {
				counts[mf.GetName()] = hg.GetSampleCount()
			}
		}
	}
	if counts["switchyard_time_to_first_token_seconds"] != 2 || counts["switchyard_inter_token_latency_seconds"] != 1 {
		t.Errorf("histogram sample counts %v; want 2 first tokens and 1 inter-token gap", counts)
	}
	if n := testutil.CollectAndCount(h.d.m.dispatch); n != 1 {
		t.Errorf("dispatch histogram has %d series", n)
	}
}

// A request refused by one rank (its sender refused the ADD) and then served by
// another ended once: it counts as length on the rank that served it, and not also
// as send_failed on the rank that refused it. A request every rank refuses counts
// once, as send_failed.
func TestMetricsRetriedRequestCountedOnce(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyRoundRobin}, 0, 1)
	refusal := errors.New("queue full")
	h.s.setFail(0, refusal)
	for _, id := range []string{"a", "b"} {
		if _, err := h.d.Submit(context.Background(), mkReq(id)); err != nil {
			t.Fatal(err)
		}
		h.d.HandleOutputs(1, batch(1, finOut(id, wire.FinishLength, 7)))
	}
	count := func(rank, oc string) float64 {
		return testutil.ToFloat64(h.d.m.requests.WithLabelValues(rank, oc))
	}
	if got := count("1", "length"); got != 2 {
		t.Errorf("rank 1 length = %v, want 2", got)
	}
	if got := count("0", "send_failed"); got != 0 {
		t.Errorf("rank 0 send_failed = %v, want 0: the refused requests were served by rank 1", got)
	}
	h.s.setFail(1, refusal)
	if _, err := h.d.Submit(context.Background(), mkReq("c")); err == nil {
		t.Fatal("every rank refuses, yet Submit succeeded")
	}
	if got := count("0", "send_failed") + count("1", "send_failed"); got != 1 {
		t.Errorf("send_failed over both ranks = %v, want 1 for the one request no rank took", got)
	}
}
