package frontend

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/wire"
)

// metrics are registered on Config.Registerer; with a nil Registerer they are still
// updated but never exported.
type metrics struct {
	f          *Frontend
	engines    *prometheus.GaugeVec
	failures   *prometheus.CounterVec
	queueFull  prometheus.Counter
	queueWaits prometheus.Counter
	outputs    prometheus.Counter
	refused    prometheus.Counter
	// outputDrops: output connections that ended by an error, not a clean close.
	outputDrops prometheus.Counter
	byState     [4]prometheus.Gauge
	byReason    map[string]prometheus.Counter
	// engineLayout is 1 for each rank's current layout and reported vLLM version.
	engineLayout  *prometheus.GaugeVec
	layoutRefused prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, f *Frontend) (*metrics, error) {
	m := &metrics{
		f: f,
		engines: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_frontend_engines", Help: "Engines by state.",
		}, []string{"state"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_frontend_engine_failures_total", Help: "Engines taken out of service, by cause.",
		}, []string{"cause"}),
		queueFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_frontend_send_queue_full_total", Help: "Sends refused because an engine's queue stayed full (an ADD past its wait, other messages past the reserve).",
		}),
		queueWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_frontend_send_queue_waits_total", Help: "ADDs that waited for room in a full send queue or for their client's fair share (backpressure).",
		}),
		outputs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_frontend_output_messages_total", Help: "Output messages received from engines.",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_frontend_handshakes_refused_total", Help: "HELLOs refused (rank live already, or outside the data parallel size).",
		}),
		outputDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_frontend_output_connection_errors_total",
			Help: "Engine output connections dropped by an error (oversized frame or message, protocol error, reset) rather than closed; the outputs on them are lost.",
		}),
		byReason: map[string]prometheus.Counter{},
		engineLayout: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchyard_frontend_engine_layout",
			Help: "1 for the vLLM wire layout each engine rank was placed on, with the vLLM version it reported (empty when none).",
		}, []string{"rank", "layout", "vllm_version"}),
		layoutRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_frontend_layout_refused_total",
			Help: "Engines refused because their vLLM wire layout could not be placed (see the log and /v1/engines for why).",
		}),
	}
	for s := Connecting; s <= Stuck; s++ {
		m.byState[s] = m.engines.WithLabelValues(s.String())
	}
	for _, r := range []string{"sentinel", "disconnect", "output_lost", "decode", "stuck", "handshake", "layout", "closed", "other"} {
		m.byReason[r] = m.failures.WithLabelValues(r)
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.engines, m.failures, m.queueFull, m.queueWaits, m.outputs, m.refused, m.outputDrops, m.engineLayout, m.layoutRefused} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) refresh() {
	var n [4]float64
	for _, e := range m.f.table.Load().byRank {
		n[e.state()]++
	}
	for s, g := range m.byState {
		g.Set(n[s])
	}
}

func (m *metrics) failure(cause error) {
	var de *wire.DecodeError
	var ht *PhaseTimeoutError
	var he *HandshakeError
	var st *EngineStuckError
	var lr *LayoutRefusedError
	var lm *wire.LayoutMismatchError
	r := "other"
	switch {
	case errors.Is(cause, ErrClosed):
		r = "closed"
	case errors.As(cause, &lr), errors.As(cause, &lm):
		r = "layout"
	case errors.Is(cause, ErrEngineCoreDead):
		r = "sentinel"
	case errors.As(cause, &st):
		r = "stuck"
	case errors.Is(cause, ErrOutputLost):
		r = "output_lost"
	case errors.Is(cause, ErrEngineLeft):
		r = "disconnect"
	case errors.As(cause, &de):
		r = "decode"
	case errors.As(cause, &ht), errors.As(cause, &he):
		r = "handshake"
	}
	m.byReason[r].Inc()
}

// placed records rank's layout, replacing what an earlier generation had.
func (m *metrics) placed(rank int, l *wire.Layout, version string) {
	r := strconv.Itoa(rank)
	m.engineLayout.DeletePartialMatch(prometheus.Labels{"rank": r})
	m.engineLayout.WithLabelValues(r, l.Name, version).Set(1)
}
