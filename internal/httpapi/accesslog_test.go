package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// lines decodes the JSON log lines whose msg is msg.
func (l *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func newLoggedAPI(t *testing.T, logRequests bool) (*lockedBuffer, *httptest.Server) {
	t.Helper()
	f := newFakeCore(t, 2)
	buf := &lockedBuffer{}
	reg := prometheus.NewRegistry()
	api := NewAPI(APIConfig{
		Dispatcher: f.D,
		Engines:    func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model:      apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		Registerer: reg, Gatherer: reg,
		Logger:      slog.New(slog.NewJSONHandler(buf, nil)),
		LogRequests: logRequests,
	})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return buf, ts
}

// Every request gets one access-log line once its answer is complete: a
// completion (plain and streamed) with its id, tokens and rank, a refused one and a
// GET with method, path, status and duration.
func TestAccessLog(t *testing.T) {
	buf, ts := newLoggedAPI(t, true)
	if resp, body := post(t, ts, `{"prompt": [1, 2, 3], "max_tokens": 4}`, RankHeader, "1"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if resp, body := post(t, ts, `{"prompt": [[1], [2, 3]], "max_tokens": 2, "stream": true}`); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if resp, _ := post(t, ts, `{"prompt": "text"}`); resp.StatusCode != 400 {
		t.Fatalf("status %d for a text prompt", resp.StatusCode)
	}
	resp, err := testwait.HTTPClient.Get(ts.URL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ts.Close() // handlers done: every line is written

	lines := buf.lines(t, "request")
	if len(lines) != 4 {
		t.Fatalf("%d access-log lines, want 4:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if l["level"] != "INFO" || l["duration"] == nil || l["remote"] == nil {
			t.Errorf("line %v: want level INFO, a duration and the remote address", l)
		}
	}
	check := func(l map[string]any, want map[string]any) {
		t.Helper()
		for k, v := range want {
			if l[k] != v {
				t.Errorf("line %v: %s = %v, want %v", l, k, l[k], v)
			}
		}
	}
	check(lines[0], map[string]any{"method": "POST", "path": "/v1/completions", "status": 200.0,
		"prompt_tokens": 3.0, "completion_tokens": 4.0, "rank": 1.0})
	if id, _ := lines[0]["request_id"].(string); !strings.HasPrefix(id, "cmpl-") {
		t.Errorf("request_id %v", lines[0]["request_id"])
	}
	check(lines[1], map[string]any{"status": 200.0, "prompt_tokens": 3.0, "completion_tokens": 4.0})
	if _, ok := lines[1]["rank"]; !ok {
		t.Errorf("streamed line has no rank: %v", lines[1])
	}
	check(lines[2], map[string]any{"status": 400.0})
	if _, ok := lines[2]["rank"]; ok {
		t.Errorf("a refused request names a rank: %v", lines[2])
	}
	check(lines[3], map[string]any{"method": "GET", "path": "/version", "status": 200.0})
}

// --disable-log-requests: no access-log lines.
func TestAccessLogDisabled(t *testing.T) {
	buf, ts := newLoggedAPI(t, false)
	if resp, body := post(t, ts, `{"prompt": [1], "max_tokens": 1}`); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	ts.Close()
	if lines := buf.lines(t, "request"); len(lines) != 0 {
		t.Errorf("access log off, yet %d lines: %v", len(lines), lines)
	}
}

// A logger that discards Info (--log-level warn) turns the access log off at
// construction: its handler is not wrapped, so a request pays for no record.
func TestAccessLogOffBelowItsLevel(t *testing.T) {
	for _, c := range []struct {
		level slog.Level
		on    bool
	}{{slog.LevelInfo, true}, {slog.LevelDebug, true}, {slog.LevelWarn, false}} {
		h := slog.NewJSONHandler(&lockedBuffer{}, &slog.HandlerOptions{Level: c.level})
		a := NewAPI(APIConfig{Logger: slog.New(h), LogRequests: true})
		if a.logRequests != c.on {
			t.Errorf("logger at %v: access log %v, want %v", c.level, a.logRequests, c.on)
		}
	}
	if NewAPI(APIConfig{LogRequests: true}).logRequests {
		t.Error("no logger (discarded lines): access log on")
	}
}

// GET /version answers the build's identity with the vLLM layouts it speaks.
func TestVersionEndpoint(t *testing.T) {
	_, ts := newTestAPI(t, 1)
	resp, err := testwait.HTTPClient.Get(ts.URL + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Version   string `json:"version"`
		GoVersion string `json:"go_version"`
		Layouts   []struct {
			Name     string `json:"name"`
			Versions string `json:"vllm_versions"`
		} `json:"vllm_layouts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if v.Version == "" || !strings.HasPrefix(v.GoVersion, "go") || len(v.Layouts) == 0 || v.Layouts[len(v.Layouts)-1].Name != "newest" {
		t.Errorf("/version = %+v", v)
	}
	r2, err := testwait.HTTPClient.Post(ts.URL+"/version", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /version: %d, want 405", r2.StatusCode)
	}
}

// The client protocol logs one line per request when it ends: finished, refused
// at submission, or aborted by the client.
func TestClientAccessLog(t *testing.T) {
	buf := &lockedBuffer{}
	h := newClientHarness(t, clientapi.ClientConfig{LogRequests: true, Logger: slog.New(slog.NewJSONHandler(buf, nil))})
	h.add(t, "r1", 3, wire.OptInt{})
	for !h.nextOutputs(t).Outputs[0].Finished() {
	}
	h.add(t, "r2", 3, wire.SomeInt(7))
	if e := h.nextError(t); e["request_id"] != "r2" {
		t.Fatalf("error %v", e)
	}
	want := []map[string]any{
		{"request_id": "r1", "status": "length", "prompt_tokens": 2.0, "completion_tokens": 3.0},
		{"request_id": "r2", "status": apicore.TypeInvalidDataParallelRank, "prompt_tokens": 2.0, "completion_tokens": 0.0},
	}
	var lines []map[string]any
	deadline := time.Now().Add(5 * time.Second)
	for len(lines) < len(want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		lines = buf.lines(t, "request")
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d %v: %s = %v, want %v", i, lines[i], k, lines[i][k], v)
			}
		}
		if lines[i]["client"] != "636c69656e742d31" || lines[i]["duration"] == nil {
			t.Errorf("line %d %v: want the client and a duration", i, lines[i])
		}
	}
	if _, ok := lines[0]["rank"]; !ok {
		t.Errorf("finished request without a rank: %v", lines[0])
	}
	if _, ok := lines[1]["rank"]; ok {
		t.Errorf("refused request with a rank: %v", lines[1])
	}
}
