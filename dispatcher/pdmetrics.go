package dispatcher

import "github.com/prometheus/client_golang/prometheus"

// pdMetrics are the P/D series; every one is on the cold path of a request (once
// per leg), none per token.
type pdMetrics struct {
	pairs      prometheus.Counter
	retries    prometheus.Counter
	local      [numPDReasons]prometheus.Counter
	legPrefill prometheus.Observer
	handoff    prometheus.Observer
	legDecode  prometheus.Observer
}

// handoffBuckets resolve the handoff (microseconds) as well as the legs (seconds).
var handoffBuckets = []float64{1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
	2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

func newPDMetrics(reg prometheus.Registerer, d *Dispatcher) (*pdMetrics, error) {
	pairs := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchyard_pd_pairs_total",
		Help: "Requests split into a prefill leg and a decode leg: the decode ADD went out with the prefill's kv_transfer_params.",
	})
	retries := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchyard_pd_prefill_retries_total",
		Help: "Prefill legs resent to another prefill engine after one died, refused or dropped the request.",
	})
	local := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_pd_local_prefills_total",
		Help: "Requests prefilled by their decode engine instead of a prefill engine, by reason.",
	}, []string{"reason"})
	legs := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "switchyard_pd_leg_seconds",
		Help: "P/D leg latency: prefill (leg submitted to its final output: queue + compute), " +
			"handoff (the prefill's final output received to the decode ADD written), decode_ttft (decode ADD to its first token).",
		Buckets: handoffBuckets,
	}, []string{"leg"})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "switchyard_pd_in_flight",
		Help:        "Requests in flight by role: prefill = in their prefill part, decode = on a decode engine.",
		ConstLabels: prometheus.Labels{"role": "prefill"},
	}, func() float64 { return float64(d.PDInFlight()) })
	decodeInFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "switchyard_pd_in_flight",
		Help:        "Requests in flight by role: prefill = in their prefill part, decode = on a decode engine.",
		ConstLabels: prometheus.Labels{"role": "decode"},
	}, func() float64 { return float64(int64(d.InFlight()) - d.PDInFlight()) })
	m := &pdMetrics{pairs: pairs, retries: retries,
		legPrefill: legs.WithLabelValues("prefill"), handoff: legs.WithLabelValues("handoff"),
		legDecode: legs.WithLabelValues("decode_ttft")}
	for r := range numPDReasons {
		if r != PDRemote {
			m.local[r] = local.WithLabelValues(r.String())
		}
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{pairs, retries, local, legs, inFlight, decodeInFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
