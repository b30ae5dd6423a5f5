package kvroute

import (
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/kvindex"
)

// metrics are the switchyard_kv_* series of the spec. Without a Registerer they are
// kept but not exported.
type metrics struct {
	events       *prometheus.CounterVec // {rank, event}
	clears       *prometheus.CounterVec // {rank, reason}
	promptTokens prometheus.Counter
	cachedTokens prometheus.Counter
	decisions    [kvindex.ReasonLoad + 1]prometheus.Counter

	mu    sync.Mutex
	ranks map[int]*rankMetrics
}

// rankMetrics are one rank's event counters, resolved once.
type rankMetrics struct {
	byEvent map[string]prometheus.Counter
}

func (rm *rankMetrics) add(event string, n int) {
	if n > 0 {
		rm.byEvent[event].Add(float64(n))
	}
}

var eventLabels = []string{evStored, evRemoved, evCleared, evMedium, evGroup, evSkipped, evUnparent, evInvalid}

func newMetrics(reg prometheus.Registerer, r *Router) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_kv_events_total",
			Help: "KV events received per engine rank, by vLLM event tag, and those not applied (ignored medium or group, skipped, unknown parent, invalid)."},
			[]string{"rank", "event"}),
		clears: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_kv_index_clears_total",
			Help: "Times a rank's index was cleared, by reason (gap, restart, engine_down, engine_up, AllBlocksCleared is counted in switchyard_kv_events_total)."},
			[]string{"rank", "reason"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_kv_routed_prompt_tokens_total",
			Help: "Prompt tokens of the requests the cache-aware policy routed."}),
		cachedTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "switchyard_kv_routed_cached_tokens_total",
			Help: "Of those, the tokens the index predicted cached on the chosen rank; the ratio is the predicted hit rate."}),
		ranks: map[int]*rankMetrics{},
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "switchyard_kv_route_decisions_total",
		Help: "Cache-aware rank choices by reason: cache_hit, tie, load (a longer prefix lost on load), balance_guard (the best cache rank was too loaded), no_hit (least-loaded), none_ready."},
		[]string{"reason"})
	for i := range m.decisions {
		m.decisions[i] = decisions.WithLabelValues(kvindex.Reason(i).String())
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.events, m.clears, m.promptTokens, m.cachedTokens, decisions, blocksCollector{r}} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}

// rank returns rank's counters, creating them on first use.
func (m *metrics) rank(rank int) *rankMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rm := m.ranks[rank]; rm != nil {
		return rm
	}
	rm := &rankMetrics{byEvent: make(map[string]prometheus.Counter, len(eventLabels))}
	l := rankLabel(rank)
	for _, ev := range eventLabels {
		rm.byEvent[ev] = m.events.WithLabelValues(l, ev)
	}
	m.ranks[rank] = rm
	return rm
}

func (m *metrics) knownRanks() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int, 0, len(m.ranks))
	for r := range m.ranks {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func rankLabel(rank int) string { return strconv.Itoa(rank) }

var blocksDesc = prometheus.NewDesc("switchyard_kv_index_blocks",
	"Blocks the prefix index holds per engine rank.", []string{"rank"}, nil)

// blocksCollector reads the index's per-rank counts at scrape time.
type blocksCollector struct{ r *Router }

func (c blocksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- blocksDesc }

func (c blocksCollector) Collect(ch chan<- prometheus.Metric) {
	for _, rank := range c.r.m.knownRanks() {
		ch <- prometheus.MustNewConstMetric(blocksDesc, prometheus.GaugeValue, float64(c.r.Blocks(rank)), rankLabel(rank))
	}
}
