package dispatcher

import (
	"github.com/switchyard-llm/switchyard/internal/fasthist"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/wire"
)

// outcome is how a request ended: the bounded `outcome` label of
// switchyard_requests_total.
type outcome uint8

const (
	outcomeStop          outcome = iota // finish_reason stop
	outcomeLength                       // finish_reason length
	outcomeAbort                        // finish_reason abort (engine-initiated)
	outcomeError                        // finish_reason error
	outcomeRepetition                   // finish_reason repetition
	outcomeCancelled                    // client abort: Abort, Stream.Close, context
	outcomeEngineDown                   // EngineDown failed it
	outcomeSlowConsumer                 // stream buffer overflowed
	outcomeNoFinalOutput                // finished_requests without a final output
	outcomeSendFailed                   // the Sender refused the ADD
	outcomeClosed                       // Close
	outcomeStalled                      // its engine stalled (CheckStalls)
	numOutcomes
	// noOutcome: not counted (yet); see rollbackLocked.
	noOutcome = numOutcomes
)

var outcomeNames = [numOutcomes]string{
	"stop", "length", "abort", "error", "repetition", "cancelled", "engine_down",
	"slow_consumer", "no_final_output", "send_failed", "closed", "engine_stalled",
}

func finishOutcome(f wire.FinishReason) outcome {
	switch f {
	case wire.FinishStop:
		return outcomeStop
	case wire.FinishLength:
		return outcomeLength
	case wire.FinishAbort:
		return outcomeAbort
	case wire.FinishRepetition:
		return outcomeRepetition
	}
	return outcomeError
}

// metrics are the dispatcher's collectors. Per-engine children are looked up once,
// when the engine first comes up, and kept in engineMetrics.
type metrics struct {
	requests   *prometheus.CounterVec
	dispatch   *fasthist.Series // on every submitter's path: no prometheus Histogram there
	tokens     *prometheus.CounterVec
	engineLoad *engineCollector
	stalls     prometheus.Counter
	migrations *prometheus.CounterVec // by cause and outcome; cold path
	saved      prometheus.Counter
	moveDelay  prometheus.Histogram
	clamped    *prometheus.CounterVec // scheduler-stats fields clamped, by rank and field
}

type engineMetrics struct {
	outcomes [numOutcomes]prometheus.Counter
	ttft     *fasthist.Hist
	itl      *fasthist.Hist
	tokens   prometheus.Counter
	// statsClamped counts sanitizeStats' clamps, by field.
	statsClamped [numStatsFields]prometheus.Counter
}

// latencyBuckets spans 5 µs (dispatch) to 60 s (a slow first token). Never modified.
var latencyBuckets = [numLatencyBuckets]float64{
	5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

const numLatencyBuckets = 22

func newMetrics(reg prometheus.Registerer, d *Dispatcher) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_requests_total",
			Help: "Requests that ended, by engine rank and outcome.",
		}, []string{"rank", "outcome"}),
		dispatch: fasthist.NewSeries("switchyard_dispatch_latency_seconds",
			"Time from Submit entry until the ADD was handed to the engine's writer.", latencyBuckets[:]),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_output_tokens_total",
			Help: "Generated tokens received, by engine rank.",
		}, []string{"rank"}),
		engineLoad: newEngineCollector(d),
		stalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_engine_stalls_total",
			Help: "Engines marked stalled: requests in flight and no output or scheduler stats for the stall timeout.",
		}),
		migrations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_migrations_total",
			Help: "Requests moved off an engine, by cause (engine_down, engine_stalled, drain) and outcome (moved, limit, unmovable, no_engine).",
		}, []string{"cause", "outcome"}),
		saved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_migrated_requests_finished_total",
			Help: "Requests that finished normally after moving off a lost engine at least once.",
		}),
		moveDelay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "switchyard_migration_delay_seconds",
			Help:    "Time from a request's move until the first token from its new engine: the delay a move added.",
			Buckets: latencyBuckets[:],
		}),
		clamped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_engine_stats_clamped_total",
			Help: "Scheduler-stats values out of range (a negative or absurd request count, a KV-cache usage outside 0..1 or NaN) clamped before routing read them, by engine rank and field.",
		}, []string{"rank", "field"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.dispatch, m.tokens, m.engineLoad, m.stalls, m.migrations, m.saved, m.moveDelay, m.clamped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// forEngine caches the per-rank children so the hot path never formats a label.
func (m *metrics) forEngine(rank int) engineMetrics {
	r := strconv.Itoa(rank)
	var em engineMetrics
	for o := range numOutcomes {
		em.outcomes[o] = m.requests.WithLabelValues(r, outcomeNames[o])
	}
	em.ttft = fasthist.New(latencyBuckets[:])
	em.itl = fasthist.New(latencyBuckets[:])
	em.tokens = m.tokens.WithLabelValues(r)
	for f := range numStatsFields {
		em.statsClamped[f] = m.clamped.WithLabelValues(r, statsFieldNames[f])
	}
	return em
}

// engineCollector reads the per-engine atomics at scrape time, so gauges cost the hot
// path nothing.
type engineCollector struct {
	d                                             *Dispatcher
	inFlight, waiting, running, kv, up, ttft, itl *prometheus.Desc
}

func newEngineCollector(d *Dispatcher) *engineCollector {
	rank := []string{"rank"}
	return &engineCollector{
		d: d,
		inFlight: prometheus.NewDesc("switchyard_requests_in_flight",
			"Live requests this dispatcher has on the engine.", rank, nil),
		waiting: prometheus.NewDesc("switchyard_engine_waiting_requests",
			"Waiting requests in the engine's last scheduler stats.", rank, nil),
		running: prometheus.NewDesc("switchyard_engine_running_requests",
			"Running requests in the engine's last scheduler stats.", rank, nil),
		kv: prometheus.NewDesc("switchyard_engine_kv_cache_usage",
			"KV-cache usage (0..1) in the engine's last scheduler stats.", rank, nil),
		up: prometheus.NewDesc("switchyard_engine_up",
			"1 while the engine is connected and ready, 0 after it went down.", rank, nil),
		ttft: prometheus.NewDesc("switchyard_time_to_first_token_seconds",
			"Time from Submit entry until the first token arrived from the engine.", rank, nil),
		itl: prometheus.NewDesc("switchyard_inter_token_latency_seconds",
			"Time between consecutive outputs carrying tokens for one request.", rank, nil),
	}
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.inFlight
	ch <- c.waiting
	ch <- c.running
	ch <- c.kv
	ch <- c.up
	ch <- c.ttft
	ch <- c.itl
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.d.engines.Load().list {
		st := e.status()
		r := strconv.Itoa(e.rank)
		up := 0.0
		if st.State == EngineStateUp {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(st.InFlight), r)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(st.Waiting), r)
		ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(st.Running), r)
		ch <- prometheus.MustNewConstMetric(c.kv, prometheus.GaugeValue, st.KVCacheUsage, r)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, r)
		ch <- e.m.ttft.Metric(c.ttft, r)
		ch <- e.m.itl.Metric(c.itl, r)
	}
}
