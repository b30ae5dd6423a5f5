package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/switchyard-llm/switchyard/internal/server"
)

// readKVMetrics adds switchyard's own view of the cache-aware routing to p: the hit
// ratio its index predicted for the requests it routed (against the engines'
// counts, how well the index tracked the caches), its rank choices by reason, and
// how often it cleared a rank's index. Policies without an index leave them unset.
func readKVMetrics(reg *prometheus.Registry, p *KVPolicy) error {
	fams, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("bench: kv metrics: %w", err)
	}
	var prompt, cached float64
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue()
			switch f.GetName() {
			case "switchyard_kv_routed_prompt_tokens_total":
				prompt += v
			case "switchyard_kv_routed_cached_tokens_total":
				cached += v
			case "switchyard_kv_index_clears_total":
				if labelOf(m, "reason") != "engine_up" { // every engine's first join clears an empty index
					p.IndexClears += int64(v)
				}
			case "switchyard_kv_route_decisions_total":
				if v == 0 {
					continue
				}
				if p.Decisions == nil {
					p.Decisions = map[string]int64{}
				}
				p.Decisions[labelOf(m, "reason")] += int64(v)
			}
		}
	}
	p.PredictedHitRatio = ratio(cached, prompt)
	return nil
}

// labelOf is m's value of label name, "" when it has none.
func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// waitKVSubscribed waits until switchyard follows every engine's KV-event
// publisher, so the first requests' events are not published before anyone
// listens (a kv run would otherwise start with a gap and a replay).
func waitKVSubscribed(ctx context.Context, srv *server.Server, n int) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		up := 0
		for _, e := range srv.Engines() {
			if e.KVEvents != nil && e.KVEvents.Connected {
				up++
			}
		}
		if up >= n {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("bench: switchyard follows %d of %d engines' KV events: %w", up, n, ctx.Err())
		}
	}
}

// lagProbe measures how late a 1 ms sleep wakes while a workload runs. The mock
// engines step on the same kind of timer, so on a busy machine every TTFT carries
// this lag, whatever the routing: a large one says the TTFT comparison is noise.
type lagProbe struct {
	h    *Hist
	stop chan struct{}
	done chan struct{}
}

func startLagProbe() *lagProbe {
	p := &lagProbe{h: NewHist(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		const tick = time.Millisecond
		t := time.NewTimer(tick)
		defer t.Stop()
		for {
			at := time.Now()
			t.Reset(tick)
			select {
			case <-p.stop:
				return
			case now := <-t.C:
				p.h.Record(now.Sub(at) - tick)
			}
		}
	}()
	return p
}

// finish stops the probe and returns the lag's p99 in milliseconds.
func (p *lagProbe) finish() float64 {
	close(p.stop)
	<-p.done
	return float64(p.h.Quantile(0.99)) / 1e6
}

// kvLagWarning says when the timer lag makes a policy's TTFT figures unreliable.
func kvLagWarning(p *KVPolicy) string {
	if p.TimerLagP99MS*1e3 <= LagWarnP99US {
		return ""
	}
	return fmt.Sprintf("%s: a 1 ms timer woke %s ms late at p99 while the workload ran (the machine was busy): "+
		"every TTFT carries that lag, so compare hit ratios and judge TTFT on a quieter machine", p.Policy, FormatFigure(p.TimerLagP99MS))
}
