package bootstrap

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestHTTPRegisterAndQuery(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	h := s.Handler()
	if code, body := do(t, h, "GET", "/query", ""); code != 200 || body != `{}` {
		t.Fatalf("empty query: %d %s", code, body)
	}
	for _, b := range []string{
		regBody("e_dp1", 1, 0, 0, "tcp://10.0.3.17:45821"),
		regBody("e_dp1", 1, 1, 0, "tcp://10.0.3.17:45822"),
		regBody("e_dp0", 0, 0, 0, "tcp://[fd00::5]:40123"),
	} {
		if code, body := do(t, h, "POST", "/register", b); code != 200 || body != `{"status":"ok"}` {
			t.Fatalf("register: %d %s", code, body)
		}
	}
	want := `{"0":{"engine_id":"e_dp0","worker_addr":{"0":{"0":"tcp://[fd00::5]:40123"}}},` +
		`"1":{"engine_id":"e_dp1","worker_addr":{"0":{"0":"tcp://10.0.3.17:45821"},"1":{"0":"tcp://10.0.3.17:45822"}}}}`
	for _, path := range []string{"/query", "//query", "/query/", "///query"} {
		if code, body := do(t, h, "GET", path, ""); code != 200 || body != want {
			t.Errorf("%s: %d\n got %s\nwant %s", path, code, body, want)
		}
	}
	wantOne := `{"1":{"engine_id":"e_dp1","worker_addr":{"0":{"0":"tcp://10.0.3.17:45821"},"1":{"0":"tcp://10.0.3.17:45822"}}}}`
	for _, path := range []string{"/e/e_dp1/query", "/e/e_dp1//query"} {
		if code, body := do(t, h, "GET", path, ""); code != 200 || body != wantOne {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, body := do(t, h, "GET", "/e/nope/query", ""); code != 200 || body != `{}` {
		t.Errorf("unknown engine: %d %s", code, body)
	}
}

func TestHTTPSeedErrors(t *testing.T) {
	p := newFakeProber("10.0.0.1:5000")
	s, _ := newTestServer(t, testConfig(), p)
	h := s.Handler()
	do(t, h, "POST", "/register", regBody("OLD", 2, 1, 0, "tcp://10.0.0.1:5000"))
	tests := []struct {
		body, detail string
	}{
		{regBody("NEW", 2, 0, 0, "tcp://10.0.0.2:6000"), "Engine ID mismatch for dp_rank=2: expected OLD, got NEW"},
		{regBody("OLD", 2, 1, 0, "tcp://10.0.0.2:6000"), "Worker with dp_rank=2, tp_rank=1, pp_rank=0 is already registered at tcp://10.0.0.1:5000, but still want to register at tcp://10.0.0.2:6000"},
	}
	for _, tt := range tests {
		code, body := do(t, h, "POST", "/register", tt.body)
		if code != 400 {
			t.Fatalf("code %d %s", code, body)
		}
		// "detail" comes first and byte for byte as vLLM writes it.
		wantPrefix := `{"detail":"` + tt.detail + `","hint":"`
		if !strings.HasPrefix(body, wantPrefix) {
			t.Errorf("body\n got %s\nwant prefix %s", body, wantPrefix)
		}
	}
	if got := testutil.ToFloat64(s.metrics.registrations.WithLabelValues("engine_mismatch")); got != 1 {
		t.Errorf("engine_mismatch count %v", got)
	}
	if got := testutil.ToFloat64(s.metrics.registrations.WithLabelValues("worker_conflict")); got != 1 {
		t.Errorf("worker_conflict count %v", got)
	}
}

func TestHTTPValidation(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	h := s.Handler()
	tests := []struct {
		name, body string
		code       int
		wantType   string // first detail entry's type for 422
		wantLoc    string
	}{
		{"not json", `{"engine_id":`, 422, "json_invalid", "body,0"},
		{"a list", `[1,2]`, 422, "model_attributes_type", "body"},
		{"null", `null`, 422, "model_attributes_type", "body"},
		{"missing addr", `{"engine_id":"e","dp_rank":0,"tp_rank":0,"pp_rank":0}`, 422, "missing", "body,addr"},
		{"rank not a number", `{"engine_id":"e","dp_rank":"x","tp_rank":0,"pp_rank":0,"addr":"tcp://h:1"}`, 422, "int_parsing", "body,dp_rank"},
		{"fractional rank", `{"engine_id":"e","dp_rank":0.5,"tp_rank":0,"pp_rank":0,"addr":"tcp://h:1"}`, 422, "int_from_float", "body,dp_rank"},
		{"engine id not a string", `{"engine_id":7,"dp_rank":0,"tp_rank":0,"pp_rank":0,"addr":"tcp://h:1"}`, 422, "string_type", "body,engine_id"},
		{"bad addr", `{"engine_id":"e","dp_rank":0,"tp_rank":0,"pp_rank":0,"addr":"h:1"}`, 422, "value_error", "body,addr"},
		{"negative rank", `{"engine_id":"e","dp_rank":0,"tp_rank":-1,"pp_rank":0,"addr":"tcp://h:1"}`, 422, "greater_than_equal", "body,tp_rank"},
		{"numeric strings and floats are accepted (pydantic lax mode)", `{"engine_id":"s","dp_rank":"3","tp_rank":0.0,"pp_rank":" 0 ","addr":"tcp://h:1"}`, 200, "", ""},
		{"unknown fields are ignored", `{"engine_id":"u","dp_rank":4,"tp_rank":0,"pp_rank":0,"addr":"tcp://h:2","pcp_rank":0,"dcp_size":1,"x":{"y":[1]}}`, 200, "", ""},
		{"nonpositive tp_size", `{"engine_id":"z","dp_rank":5,"tp_rank":0,"pp_rank":0,"addr":"tcp://h:3","tp_size":0}`, 400, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, h, "POST", "/register", tt.body)
			if code != tt.code {
				t.Fatalf("code %d, want %d: %s", code, tt.code, body)
			}
			if tt.code != 422 {
				return
			}
			var got struct {
				Detail []struct {
					Type string `json:"type"`
					Loc  []any  `json:"loc"`
					Msg  string `json:"msg"`
				} `json:"detail"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Detail) == 0 {
				t.Fatalf("422 body %s: %v", body, err)
			}
			var loc []string
			for _, l := range got.Detail[0].Loc {
				b, _ := json.Marshal(l)
				loc = append(loc, strings.Trim(string(b), `"`))
			}
			if got.Detail[0].Type != tt.wantType || strings.Join(loc, ",") != tt.wantLoc || got.Detail[0].Msg == "" {
				t.Errorf("got %+v", got.Detail[0])
			}
		})
	}
	code, body := do(t, h, "POST", "/register", `{"engine_id":"z","dp_rank":5,"tp_rank":0,"pp_rank":0,"addr":"tcp://h:3","tp_size":0}`)
	if code != 400 || body != `{"detail":"TP, PP, PCP, and DCP sizes must be positive."}` {
		t.Errorf("tp_size 0: %d %s", code, body)
	}
	if code, body := do(t, h, "POST", "/register", strings.Repeat(" ", maxBody+1)); code != 413 {
		t.Errorf("huge body: %d %s", code, body)
	}
}

func TestHTTPNotFoundAndMethod(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	h := s.Handler()
	if code, body := do(t, h, "GET", "/nope", ""); code != 404 || body != `{"detail":"Not Found"}` {
		t.Errorf("404: %d %s", code, body)
	}
	if code, body := do(t, h, "GET", "/register", ""); code != 405 || body != `{"detail":"Method Not Allowed"}` {
		t.Errorf("405: %d %s", code, body)
	}
	if code, body := do(t, h, "GET", "/healthz", ""); code != 200 || body != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", code, body)
	}
}

func TestHTTPTakeoverAndAdmin(t *testing.T) {
	cfg := testConfig()
	cfg.Token = "s3cret"
	p := newFakeProber("10.0.0.1:5000")
	s, clk := newTestServer(t, cfg, p)
	h := s.Handler()
	do(t, h, "POST", "/register", regBody("OLD", 0, 0, 0, "tcp://10.0.0.1:5000"))

	// The old engine's process dies and a new one registers: the conflict
	// probe finds the old port closed, so the newcomer takes over.
	p.set("10.0.0.1:5000", false)
	clk.Advance(time.Second)
	if code, body := do(t, h, "POST", "/register", regBody("NEW", 0, 0, 0, "tcp://10.0.0.2:5000")); code != 200 {
		t.Fatalf("takeover refused: %d %s", code, body)
	}
	if _, body := do(t, h, "GET", "/query", ""); !strings.Contains(body, `"engine_id":"NEW"`) {
		t.Fatalf("query %s", body)
	}
	if got := testutil.ToFloat64(s.metrics.takeovers.WithLabelValues("engine")); got != 1 {
		t.Errorf("takeovers %v", got)
	}
	var in EngineInfo
	_, body := do(t, h, "GET", "/v2/engines/OLD", "")
	if err := json.Unmarshal([]byte(body), &in); err != nil || in.State != StateRetired || in.Current {
		t.Fatalf("old engine %s", body)
	}
	if _, body := do(t, h, "GET", "/v2/generations", ""); body != `{"0":2}` {
		t.Errorf("generations %s", body)
	}
	var list struct{ Engines []EngineInfo }
	_, body = do(t, h, "GET", "/v2/engines", "")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Engines) != 2 {
		t.Fatalf("engines %s", body)
	}

	// Mutating endpoints need the token; /register does not.
	if code, _ := do(t, h, "DELETE", "/v2/engines/NEW", ""); code != 401 {
		t.Errorf("delete without token: %d", code)
	}
	if code, _ := do(t, h, "DELETE", "/v2/engines/NEW", "", "Authorization", "Bearer wrong"); code != 401 {
		t.Errorf("delete with wrong token: %d", code)
	}
	auth := []string{"Authorization", "Bearer s3cret"}
	if code, body := do(t, h, "POST", "/v2/engines/NEW/drain", "", auth...); code != 200 {
		t.Errorf("drain: %d %s", code, body)
	}
	_, body = do(t, h, "GET", "/v2/engines/NEW", "")
	if !strings.Contains(body, `"state":"draining"`) || !strings.Contains(body, `"routable":false`) {
		t.Errorf("drained engine %s", body)
	}
	if code, _ := do(t, h, "POST", "/v2/engines/NEW/undrain", "", auth...); code != 200 {
		t.Errorf("undrain: %d", code)
	}
	if code, body := do(t, h, "DELETE", "/v2/engines/NEW/workers/0/0", "", auth...); code != 200 {
		t.Errorf("delete worker: %d %s", code, body)
	}
	if code, _ := do(t, h, "DELETE", "/v2/engines/NEW/workers/x/0", "", auth...); code != 422 {
		t.Errorf("delete worker bad rank: %d", code)
	}
	if code, _ := do(t, h, "DELETE", "/v2/engines/NEW", "", auth...); code != 200 {
		t.Errorf("delete: %d", code)
	}
	if code, _ := do(t, h, "DELETE", "/v2/engines/NEW", "", auth...); code != 404 {
		t.Errorf("second delete: %d", code)
	}
	if code, _ := do(t, h, "GET", "/v2/engines/nope", ""); code != 404 {
		t.Errorf("unknown engine: %d", code)
	}
	if _, body := do(t, h, "GET", "/query", ""); body != `{}` {
		t.Errorf("query after delete %s", body)
	}
}

func TestHTTPETag(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	h := s.Handler()
	do(t, h, "POST", "/register", regBody("E", 0, 0, 0, "tcp://10.0.0.1:5000"))
	req, _ := http.NewRequest("GET", "/query", nil)
	rec := newRecorder(h, req)
	etag := rec.Header().Get("ETag")
	req.Header.Set("If-None-Match", etag)
	if rec := newRecorder(h, req); etag == "" || rec.Code != http.StatusNotModified {
		t.Fatalf("etag %q, second code %d", etag, rec.Code)
	}
}

func TestMetricsEndpointAndGauges(t *testing.T) {
	cfg := testConfig()
	preg := prometheus.NewRegistry()
	cfg.Registerer = preg
	cfg.TPSize, cfg.PPSize = 2, 1
	s, _ := newTestServer(t, cfg, newFakeProber())
	h := s.Handler()
	do(t, h, "POST", "/register", regBody("A", 0, 0, 0, "tcp://10.0.0.1:5000"))
	do(t, h, "POST", "/register", regBody("A", 0, 0, 0, "tcp://10.0.0.1:5000"))
	do(t, h, "POST", "/register", regBody("B", 1, 0, 0, "tcp://10.0.0.2:5000"))
	do(t, h, "POST", "/register", regBody("B", 1, 1, 0, "tcp://10.0.0.2:5001"))
	do(t, h, "GET", "/query", "")
	code, body := do(t, h, "GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		`switchyard_registry_register_requests_total{result="ok"} 3`,
		`switchyard_registry_register_requests_total{result="idempotent"} 1`,
		`switchyard_registry_engines{state="registering"} 1`,
		`switchyard_registry_engines{state="ready"} 1`,
		`switchyard_registry_workers{state="live"} 3`,
		`switchyard_registry_query_requests_total{path="root"} 1`,
		`switchyard_registry_takeovers_total{kind="engine"} 0`,
		`switchyard_registry_probe_failures_total{mode="periodic"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	// A second server on the same Registerer is refused, not a panic.
	if _, err := newServer(cfg, NewRegistry(cfg.Policy()), newFakeProber(), time.Now); err == nil {
		t.Error("duplicate metrics registration accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"address", func(c *Config) { c.Address = "nohostport" }, "Config.Address"},
		{"interval", func(c *Config) { c.ProbeInterval = 0 }, "Config.ProbeInterval"},
		{"timeout", func(c *Config) { c.ProbeTimeout = 0 }, "Config.ProbeTimeout"},
		{"budget", func(c *Config) { c.ConflictProbeBudget = time.Minute }, "Config.ConflictProbeBudget"},
		{"threshold", func(c *Config) { c.FailureThreshold = 0 }, "Config.FailureThreshold"},
		{"retention", func(c *Config) { c.Retention = -1 }, "Config.Retention"},
		{"settle", func(c *Config) { c.Settle = -1 }, "Config.Settle"},
		{"tp", func(c *Config) { c.TPSize = -1 }, "Config.TPSize"},
	}
	for _, tt := range tests {
		c := DefaultConfig()
		tt.mod(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.HasPrefix(err.Error(), "bootstrap: ") {
			t.Errorf("%s: %v", tt.name, err)
		}
		if _, err := NewServer(c); err == nil {
			t.Errorf("%s: NewServer accepted a bad config", tt.name)
		}
	}
}
