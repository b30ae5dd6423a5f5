package httpapi

// The HTTP series vLLM's API server exports through
// prometheus-fastapi-instrumentator, with its names, labels and buckets, so a
// dashboard built on them works unchanged: http_requests_total{handler, method,
// status} (status grouped: "2xx") and http_request_duration_seconds{handler,
// method}. The handler label is the route ("/v1/completions"), and the routes
// vLLM leaves out (/health, /ping, /version, /metrics) are left out here too.
// switchyard's own switchyard_http_* series are kept beside them. httplabels.go
// picks each request's series.

import "github.com/prometheus/client_golang/prometheus"

// vllmExcludedHandlers are the routes vLLM's instrumentator does not count.
var vllmExcludedHandlers = map[string]bool{"/health": true, "/ping": true, "/version": true, "/metrics": true}

type vllmHTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newVLLMHTTPMetrics(reg prometheus.Registerer) *vllmHTTPMetrics {
	m := &vllmHTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total",
			Help: "Total number of requests by method, status and handler.",
		}, []string{"handler", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important.",
			Buckets: []float64{0.1, 0.5, 1},
		}, []string{"handler", "method"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.duration)
	}
	return m
}
