package coordinator

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the coordinator's collectors. They exist (and are updated)
// even when no Registerer was given, so the code paths never branch on it.
type metrics struct {
	wave        prometheus.Gauge
	running     prometheus.Gauge
	startWaves  prometheus.Counter
	completions prometheus.Counter
	firstReqs   prometheus.Counter
}

// newMetrics builds the collectors and registers the ones the mode uses:
// the in-process node all but first_requests, the external client the
// gauges and first_requests.
func newMetrics(reg prometheus.Registerer, external bool) (*metrics, error) {
	m := &metrics{
		wave: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_coordinator_wave",
			Help: "Current DP request wave (current_wave): how many times the MoE data-parallel engines went from running to paused.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_coordinator_engines_running",
			Help: "1 while the data-parallel engines are in a running wave, 0 while paused.",
		}),
		startWaves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_coordinator_start_dp_wave_broadcasts_total",
			Help: "START_DP_WAVE messages broadcast to the engines.",
		}),
		completions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_coordinator_wave_completions_total",
			Help: "wave_complete notifications that ended a wave.",
		}),
		firstReqs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchyard_coordinator_first_requests_total",
			Help: "FIRST_REQ wake-ups sent to an external coordinator.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	cs := []prometheus.Collector{m.wave, m.running, m.startWaves, m.completions}
	if external {
		cs = []prometheus.Collector{m.wave, m.running, m.firstReqs}
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("coordinator: registering metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) setWave(wave int64, running bool) {
	m.wave.Set(float64(wave))
	if running {
		m.running.Set(1)
	} else {
		m.running.Set(0)
	}
}
