package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// httpMetrics are the HTTP-level series; the request, token and latency series per
// rank belong to the dispatcher, which registers them itself. Labels are bounded: the
// handler is one of a fixed set and the code is an HTTP status.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	vllm     *vllmHTTPMetrics // vLLM's instrumentator series (vllmhttpmetrics.go)
	labels   labelCache       // the labelled series of each label set (httplabels.go)
}

func newHTTPMetrics(reg prometheus.Registerer, sl *slots) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchyard_http_requests_total",
			Help: "HTTP requests answered, by handler and status code.",
		}, []string{"handler", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "switchyard_http_request_duration_seconds",
			Help:    "Time from an HTTP request's arrival to the end of its answer (the whole stream for stream: true).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"handler"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchyard_http_requests_in_flight",
			Help: "HTTP requests being answered now.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration, m.inFlight)
	}
	m.vllm = newVLLMHTTPMetrics(reg)
	m.labels.sets.Store(&map[labelKey]*labelSet{})
	if reg != nil && sl != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "switchyard_http_request_slots_in_use",
			Help: "Choices (engine requests) of the completions requests being served; --max-concurrent-requests caps them.",
		}, func() float64 { return float64(sl.inUse()) }))
	}
	return m
}

// wrap counts and times every request of one handler.
func (m *httpMetrics) wrap(handler string, next http.Handler) http.Handler {
	obs := m.duration.WithLabelValues(handler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			m.inFlight.Dec()
			took := time.Since(start).Seconds()
			obs.Observe(took)
			s := m.series(handler, r, sw.code)
			s.requests.Inc()
			if s.vllm {
				s.vRequest.Inc()
				s.vSeconds.Observe(took)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status code. Unwrap lets http.NewResponseController
// reach the real writer's Flush.
type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
