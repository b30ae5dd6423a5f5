package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// A frontend that lost its engine configuration falls back to the built-in mock
// engines and would then answer every request 200 with made-up words. So while
// mock engines serve, every HTTP answer says so: a header on each response, an
// "engines" field in /health and the owner of the /v1/models entry. Probes and
// clients that look can tell; a deployment that must never serve mocks sets
// --mock-engines 0, which refuses to start without an engine configuration.
const (
	// EnginesHeader names the engines behind an answer; set only to EnginesMock.
	EnginesHeader = "X-Switchyard-Engines"
	// EnginesMock is EnginesHeader's value and /health's "engines" field with
	// the built-in mock engines.
	EnginesMock = "mock"
	// MockModelOwner is /v1/models' owned_by with the built-in mock engines
	// (vLLM's own is "vllm").
	MockModelOwner = "switchyard-mock"
)

// markEngines wraps the HTTP handler so that every answer is marked as coming
// from mock engines when cfg has no engine configuration; h itself otherwise.
func markEngines(cfg Config, h http.Handler) http.Handler {
	if !cfg.Embedded() {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(EnginesHeader, EnginesMock)
		if r.Method != http.MethodGet || (r.URL.Path != "/health" && r.URL.Path != "/v1/models") {
			h.ServeHTTP(w, r)
			return
		}
		// Both answers are one small JSON object: buffer it and add the mark.
		b := &bufferedAnswer{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(b, r)
		body := b.buf.Bytes()
		if marked, ok := markBody(r.URL.Path, body); ok {
			body = marked
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		}
		w.WriteHeader(b.status)
		_, _ = w.Write(body)
	})
}

// markBody adds the mock mark to a /health or /v1/models answer; false leaves
// an answer it cannot read (an auth error, say) as it is.
func markBody(path string, body []byte) ([]byte, bool) {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return nil, false
	}
	switch path {
	case "/health":
		v["engines"] = EnginesMock
	default:
		data, _ := v["data"].([]any)
		if len(data) == 0 {
			return nil, false
		}
		for _, m := range data {
			if card, ok := m.(map[string]any); ok {
				card["owned_by"] = MockModelOwner
			}
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return append(out, '\n'), true
}

// bufferedAnswer holds a small answer back until it is marked.
type bufferedAnswer struct {
	http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (b *bufferedAnswer) WriteHeader(status int)      { b.status = status }
func (b *bufferedAnswer) Write(p []byte) (int, error) { return b.buf.Write(p) }
