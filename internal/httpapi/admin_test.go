package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

func newAdminAPI(t *testing.T, ranks int, dcfg dispatcher.Config, cfg APIConfig) (*fakeEngines, *httptest.Server) {
	t.Helper()
	f := newFakeCoreConfig(t, ranks, dcfg)
	reg := prometheus.NewRegistry()
	cfg.Dispatcher = f.D
	cfg.Engines = func() []EngineView { return MergeEngines(nil, f.D.Engines()) }
	cfg.Model = apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}
	cfg.Registerer, cfg.Gatherer = reg, reg
	ts := httptest.NewServer(NewAPI(cfg).Handler())
	t.Cleanup(ts.Close)
	return f, ts
}

func call(t *testing.T, ts *httptest.Server, method, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, ts.URL+path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := testwait.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func engineViews(t *testing.T, ts *httptest.Server, hdr ...string) []EngineView {
	t.Helper()
	_, body := call(t, ts, http.MethodGet, "/v1/engines", hdr...)
	var got struct{ Engines []EngineView }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	return got.Engines
}

func TestDrainEndpoints(t *testing.T) {
	_, ts := newAdminAPI(t, 2, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin},
		APIConfig{AdminToken: "s3cret", APIKeys: []string{"user-key"}})
	auth := []string{"Authorization", "Bearer s3cret"}
	tests := []struct {
		name  string
		path  string
		hdr   []string
		wCode int
		wBody string
	}{
		{"no token", "/v1/engines/1/drain", nil, 401, "Unauthorized"},
		{"the api key is not the admin token", "/v1/engines/1/drain", []string{"Authorization", "Bearer user-key"}, 401, "Unauthorized"},
		{"bad rank", "/v1/engines/x/drain", auth, 400, "non-negative integer"},
		{"unknown rank", "/v1/engines/7/drain", auth, 404, "never connected"},
		{"drain", "/v1/engines/1/drain", auth, 200, `"state":"draining"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := call(t, ts, http.MethodPost, tt.path, tt.hdr...)
			if resp.StatusCode != tt.wCode || !strings.Contains(body, tt.wBody) {
				t.Errorf("%d %s; want %d containing %q", resp.StatusCode, body, tt.wCode, tt.wBody)
			}
		})
	}
	v := engineViews(t, ts, "Authorization", "Bearer user-key")
	if v[1].State != "draining" || !v[1].Draining || v[1].Ready || v[0].State != "ready" {
		t.Errorf("/v1/engines = %+v", v)
	}
	for range 4 {
		resp, body := post(t, ts, `{"prompt": [1, 2], "max_tokens": 2}`, "Authorization", "Bearer user-key")
		if resp.StatusCode != 200 || resp.Header.Get(RankHeader) != "0" {
			t.Fatalf("while rank 1 drains: %d %s rank %q", resp.StatusCode, body, resp.Header.Get(RankHeader))
		}
	}
	resp, body := post(t, ts, `{"prompt": [1, 2], "max_tokens": 2}`, "Authorization", "Bearer user-key", RankHeader, "1")
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "draining") {
		t.Errorf("pinned to the draining rank: %d %s", resp.StatusCode, body)
	}
	if resp, body := call(t, ts, http.MethodPost, "/v1/engines/1/undrain", auth...); resp.StatusCode != 200 || !strings.Contains(body, `"state":"ready"`) {
		t.Errorf("undrain: %d %s", resp.StatusCode, body)
	}
}

func TestAdminNetworks(t *testing.T) {
	if _, err := newAdminGuard("", []string{"10.0.0.0/8"}); err == nil {
		t.Error("a non-loopback network without a token was accepted")
	}
	_, ts := newAdminAPI(t, 1, dispatcher.Config{}, APIConfig{AdminToken: "t", AdminNetworks: []string{"10.0.0.0/8"}})
	if resp, body := call(t, ts, http.MethodPost, "/v1/engines/0/drain", "Authorization", "Bearer t"); resp.StatusCode != 403 {
		t.Errorf("from loopback outside --admin-allow: %d %s", resp.StatusCode, body)
	}
	_, open := newAdminAPI(t, 1, dispatcher.Config{}, APIConfig{})
	if resp, body := call(t, open, http.MethodPost, "/v1/engines/0/drain"); resp.StatusCode != 200 {
		t.Errorf("loopback without a token configured: %d %s", resp.StatusCode, body)
	}
}

func TestGroupBrokenHTTP(t *testing.T) {
	f, ts := newAdminAPI(t, 3, dispatcher.Config{LockstepRanks: 3}, APIConfig{})
	if resp, _ := call(t, ts, http.MethodGet, "/health"); resp.StatusCode != 200 {
		t.Fatalf("health before: %d", resp.StatusCode)
	}
	f.D.EngineDown(1, errors.New("output EOF"))
	resp, body := post(t, ts, `{"prompt": [1, 2], "max_tokens": 2}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || !strings.Contains(string(body), "lockstep group of 3 ranks is broken: rank 1 died") {
		t.Errorf("new request: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	resp, hb := call(t, ts, http.MethodGet, "/health")
	if resp.StatusCode != 503 || !strings.Contains(hb, "rank 1 died") || !strings.Contains(hb, `"group_broken":true`) {
		t.Errorf("health: %d %s", resp.StatusCode, hb)
	}
	v := engineViews(t, ts)
	if v[0].State != "group_broken" || v[1].State != "dead" || v[2].State != "group_broken" || v[0].Ready || !strings.Contains(v[0].Cause, "rank 1 died") {
		t.Errorf("/v1/engines = %+v", v)
	}
	f.D.EngineUp(1)
	if resp, body := post(t, ts, `{"prompt": [1, 2], "max_tokens": 2}`); resp.StatusCode != 200 {
		t.Errorf("after the rank rejoined: %d %s", resp.StatusCode, body)
	}
	if resp, _ := call(t, ts, http.MethodGet, "/health"); resp.StatusCode != 200 {
		t.Errorf("health after: %d", resp.StatusCode)
	}
}

// The client protocol names a broken group and a draining rank by type.
func TestClientProtocolGroupBrokenAndDraining(t *testing.T) {
	f := newFakeCoreConfig(t, 3, dispatcher.Config{LockstepRanks: 3})
	h := newClientHarnessOn(t, f, clientapi.ClientConfig{})
	if err := f.D.DrainEngine(2); err != nil {
		t.Fatal(err)
	}
	h.add(t, "to-draining", 3, wire.SomeInt(2))
	if e := h.nextError(t); e["type"] != clientapi.ErrTypeEngineDraining || e["request_id"] != "to-draining" {
		t.Errorf("pinned to a draining rank: %v", e)
	}
	f.D.EngineDown(1, errors.New("output EOF"))
	h.add(t, "broken", 3, wire.OptInt{})
	e := h.nextError(t)
	if msg, _ := e["message"].(string); e["type"] != clientapi.ErrTypeGroupBroken || !strings.Contains(msg, "rank 1 died") {
		t.Errorf("while the group is broken: %v", e)
	}
	h.f.NoAdds(t)
}
