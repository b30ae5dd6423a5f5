package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/server"
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
				p.IndexClears += int64(v)
			case "switchyard_kv_route_decisions_total":
				if v == 0 {
					continue
				}
				if p.Decisions == nil {
					p.Decisions = map[string]int64{}
				}
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" {
						p.Decisions[l.GetValue()] += int64(v)
					}
				}
			}
		}
	}
	p.PredictedHitRatio = ratio(cached, prompt)
	return nil
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
