package httpapi

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The cached series are the vectors' own: what the cache counts is what
// WithLabelValues would have counted, vLLM's excluded routes stay uncounted in
// its series, and a hit allocates nothing.
func TestLabelCacheSeries(t *testing.T) {
	m := newHTTPMetrics(prometheus.NewRegistry(), nil)
	r := httptest.NewRequest("POST", "/v1/completions", nil)
	r.Pattern = "POST /v1/completions"
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				s := m.series("completions", r, 200)
				s.requests.Inc()
				if s.vllm {
					s.vRequest.Inc()
					s.vSeconds.Observe(0.01)
				}
			}
		})
	}
	wg.Wait()
	if got := testutil.ToFloat64(m.requests.WithLabelValues("completions", "200")); got != 800 {
		t.Fatalf("switchyard_http_requests_total = %v, want 800", got)
	}
	if got := testutil.ToFloat64(m.vllm.requests.WithLabelValues("/v1/completions", "POST", "2xx")); got != 800 {
		t.Fatalf("http_requests_total = %v, want 800", got)
	}
	h := httptest.NewRequest("GET", "/health", nil)
	h.Pattern = "GET /health"
	if m.series("health", h, 200).vllm {
		t.Fatal("/health is counted in vLLM's series")
	}
	if n := testing.AllocsPerRun(100, func() { m.series("completions", r, 200).requests.Inc() }); n != 0 {
		t.Fatalf("a cached series costs %v allocations", n)
	}
}

// Label sets past the bound are counted but not kept.
func TestLabelCacheBounded(t *testing.T) {
	m := newHTTPMetrics(prometheus.NewRegistry(), nil)
	r := httptest.NewRequest("POST", "/v1/completions", nil)
	for i := range maxLabelSets + 50 {
		r.Method = fmt.Sprintf("M%d", i)
		m.series("completions", r, 200).requests.Inc()
	}
	if n := len(*m.labels.sets.Load()); n != maxLabelSets {
		t.Fatalf("%d label sets kept, want %d", n, maxLabelSets)
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues("completions", "200")); got != maxLabelSets+50 {
		t.Fatalf("switchyard_http_requests_total = %v, want %d", got, maxLabelSets+50)
	}
}
