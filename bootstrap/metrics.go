package bootstrap

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registry's collectors. Engine ids are never labels: they
// change on every prefill restart.
type metrics struct {
	registrations  *prometheus.CounterVec // result
	takeovers      *prometheus.CounterVec // kind: engine, worker
	probeFailures  *prometheus.CounterVec // mode: periodic, conflict
	queries        *prometheus.CounterVec // path: root, engine
	evictions      *prometheus.CounterVec // reason: deleted, expired
	snapshotWrites *prometheus.CounterVec // result: ok, error
	snapshotBytes  prometheus.Counter
	storeConflicts prometheus.Counter // commits lost to another frontend
	states         *stateCollector
}

var registerResults = []string{
	"ok", "idempotent", "engine_takeover", "worker_takeover",
	"engine_mismatch", "worker_conflict", "engine_elsewhere", "topology", "limit", "invalid",
}

func newMetrics(reg prometheus.Registerer, states *stateCollector) (*metrics, error) {
	m := &metrics{
		registrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_registry_register_requests_total",
			Help: "POST /register requests by result.",
		}, []string{"result"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_registry_takeovers_total",
			Help: "Dead engines (kind=engine) or dead worker addresses (kind=worker) replaced by a new registration.",
		}, []string{"kind"}),
		probeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_registry_probe_failures_total",
			Help: "Failed worker liveness probes, periodic or synchronous on a conflict.",
		}, []string{"mode"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_registry_query_requests_total",
			Help: "GET /query (path=root) and /e/{engine_id}/query (path=engine) requests.",
		}, []string{"path"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_registry_evictions_total",
			Help: "Engines or workers removed by an admin DELETE (reason=deleted) or after Retention (reason=expired).",
		}, []string{"reason"}),
		snapshotWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_registry_snapshot_writes_total",
			Help: "Snapshot file writes by result.",
		}, []string{"result"}),
		snapshotBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_registry_snapshot_bytes_total",
			Help: "Bytes written to the snapshot file and its change log.",
		}),
		storeConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_registry_store_conflicts_total",
			Help: "Registry changes decided again because another frontend committed to the shared store (etcd) first.",
		}),
		states: states,
	}
	// Pre-create the children so dashboards see zeros, not gaps.
	for _, r := range registerResults {
		m.registrations.WithLabelValues(r)
	}
	for _, k := range []string{"engine", "worker"} {
		m.takeovers.WithLabelValues(k)
	}
	for _, k := range []string{"periodic", "conflict"} {
		m.probeFailures.WithLabelValues(k)
	}
	for _, k := range []string{"root", "engine"} {
		m.queries.WithLabelValues(k)
	}
	for _, k := range []string{"deleted", "expired"} {
		m.evictions.WithLabelValues(k)
	}
	for _, k := range []string{"ok", "error"} {
		m.snapshotWrites.WithLabelValues(k)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.registrations, m.takeovers, m.probeFailures, m.queries, m.evictions, m.snapshotWrites, m.snapshotBytes, m.storeConflicts, states} {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); errors.As(err, &are) {
				return nil, fmt.Errorf("bootstrap: metrics already registered (one registry per Registerer): %w", err)
			}
			return nil, fmt.Errorf("bootstrap: register metrics: %w", err)
		}
	}
	return m, nil
}

// stateCollector reports the engines and workers per state at scrape time,
// straight from the registry, so the gauges can never drift from it.
type stateCollector struct {
	mu      *sync.Mutex
	reg     *Registry
	now     func() time.Time
	engines *prometheus.Desc
	workers *prometheus.Desc
}

func newStateCollector(mu *sync.Mutex, reg *Registry, now func() time.Time) *stateCollector {
	return &stateCollector{
		mu: mu, reg: reg, now: now,
		engines: prometheus.NewDesc("switchyard_registry_engines",
			"Engines by state (retired ones while retained).", []string{"state"}, nil),
		workers: prometheus.NewDesc("switchyard_registry_workers",
			"Workers of current engines by state.", []string{"state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.engines
	ch <- c.workers
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	engines, workers := c.reg.Counts(c.now())
	c.mu.Unlock()
	for _, s := range []EngineState{StateRegistering, StateReady, StateSuspect, StateDraining, StateUnverified, StateDead, StateRetired} {
		ch <- prometheus.MustNewConstMetric(c.engines, prometheus.GaugeValue, float64(engines[s]), string(s))
	}
	for _, s := range []WorkerState{workerUnverified, workerLive, workerSuspect, workerDead} {
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(workers[s]), string(s))
	}
}
