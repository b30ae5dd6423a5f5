package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/apicore"
)

// newParityAPI serves the API over `ranks` fake engines with cfg's other fields.
func newParityAPI(t *testing.T, ranks int, cfg APIConfig) (*fakeEngines, *httptest.Server) {
	t.Helper()
	f := newFakeCore(t, ranks)
	cfg.Dispatcher = f.D
	cfg.Engines = func() []EngineView { return MergeEngines(nil, f.D.Engines()) }
	cfg.Model = apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}
	api := NewAPI(cfg)
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return f, ts
}

// vLLM's /ping (GET and POST) answers as /health; both turn 503 once shutdown
// began, though the engines are still up, so a load balancer stops sending.
func TestPingAndHealthWhileShuttingDown(t *testing.T) {
	var down atomic.Bool
	_, ts := newParityAPI(t, 1, APIConfig{ShutdownReason: func() error {
		if down.Load() {
			return errors.New("switchyard is shutting down")
		}
		return nil
	}})
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if resp, body := call(t, ts, m, "/ping"); resp.StatusCode != 200 {
			t.Errorf("%s /ping: %d %s", m, resp.StatusCode, body)
		}
	}
	if resp, _ := call(t, ts, http.MethodPut, "/ping"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, POST" {
		t.Errorf("PUT /ping: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	down.Store(true)
	for _, c := range []struct{ method, path string }{{"GET", "/health"}, {"GET", "/ping"}, {"POST", "/ping"}} {
		resp, body := call(t, ts, c.method, c.path)
		if resp.StatusCode != 503 || !strings.Contains(body, "shutting down") {
			t.Errorf("%s %s while shutting down: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
}
