package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// vLLM's instrumentator series: by route, method and grouped status; /health
// and /ping are left out as vLLM leaves them out.
func TestVLLMHTTPMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, ts := newParityAPI(t, 1, APIConfig{Registerer: reg, Gatherer: reg})
	post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`)
	post(t, ts, `{"model": "m", "prompt": "not ids", "max_tokens": 2}`)
	call(t, ts, http.MethodGet, "/health")
	call(t, ts, http.MethodGet, "/ping")
	call(t, ts, http.MethodGet, "/v1/models")
	want := `
# HELP http_requests_total Total number of requests by method, status and handler.
# TYPE http_requests_total counter
http_requests_total{handler="/v1/completions",method="POST",status="2xx"} 1
http_requests_total{handler="/v1/completions",method="POST",status="4xx"} 1
http_requests_total{handler="/v1/models",method="GET",status="2xx"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "http_requests_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "http_request_duration_seconds"); err != nil || n != 2 {
		t.Errorf("http_request_duration_seconds: %d series, %v", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "switchyard_http_requests_total"); err != nil || n < 3 {
		t.Errorf("switchyard_http_requests_total: %d series, %v", n, err)
	}
}
