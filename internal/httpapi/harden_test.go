package httpapi

// Regression tests for the HTTP API's hardening: each failed on the code before the
// fix (named in its comment).

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/servertest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// Field names match exactly, as vLLM's pydantic models do; Go's encoding/json let
// "MAX_TOKENS" set max_tokens (and the last of both won).
func TestReadCompletionExactFieldNames(t *testing.T) {
	req, err := ParseCompletion([]byte(`{"prompt": [1], "max_tokens": 4, "MAX_TOKENS": 99, "Stream": true, "stream_options": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.MaxTokens == nil || *req.MaxTokens != 4 || req.Stream {
		t.Errorf("max_tokens %v stream %v; MAX_TOKENS and Stream must be unknown fields", req.MaxTokens, req.Stream)
	}
	req, err = ParseCompletion([]byte(`{"prompt": [1], "Max_Tokens": 9, "stream": true, "stream_options": {"INCLUDE_USAGE": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if req.MaxTokens != nil || req.StreamOptions == nil || req.StreamOptions.IncludeUsage {
		t.Errorf("max_tokens %v stream_options %+v", req.MaxTokens, req.StreamOptions)
	}
	// An escaped name is the name it spells (Python's json decodes it first).
	req, err = ParseCompletion([]byte(`{"prompt": [1], "max\u005ftokens": 3}`))
	if err != nil || req.MaxTokens == nil || *req.MaxTokens != 3 {
		t.Errorf("escaped name: %v %v", req, err)
	}
}

// Errors name JSON types, never Go's ("json: cannot unmarshal array into Go value
// of type server.CompletionRequest").
func TestParseCompletionNoGoTypeNames(t *testing.T) {
	for _, body := range []string{
		`[]`, `"x"`, `{"prompt": [1], "stream_options": [1]}`, `{"prompt": [1], "stop_token_ids": {"a": 1}}`,
		`{"prompt": [1], "n": 1.5}`, `{"prompt": [1], "temperature": "hot"}`, `{"prompt": [1], "stream": 1}`,
	} {
		_, err := ParseCompletion([]byte(body))
		if err == nil {
			t.Errorf("%s accepted", body)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "Go ") || strings.Contains(msg, "server.") ||
			strings.Contains(msg, "int64") || strings.Contains(msg, "float64") || strings.Contains(msg, "[]") {
			t.Errorf("%s: message names a Go type: %q", body, msg)
		}
	}
}

// Nesting is bounded, wherever it is.
func TestReadCompletionDepthBound(t *testing.T) {
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	_, err := ParseCompletion([]byte(`{"prompt": [1], "extra": ` + deep + `}`))
	if err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("10,000 levels: %v", err)
	}
}

// endlessPrompt is a body that never ends: `{"prompt": [1,1,1,...`. It counts
// what was read.
type endlessPrompt struct {
	n    int64
	head bool
}

func (e *endlessPrompt) Read(p []byte) (int, error) {
	if !e.head {
		e.head = true
		n := copy(p, `{"prompt": [`)
		e.n += int64(n)
		return n, nil
	}
	for i := range p {
		p[i] = "1,"[i%2]
	}
	if len(p)%2 == 1 {
		p = p[:len(p)-1]
	}
	e.n += int64(len(p))
	return len(p), nil
}

// The prompt is parsed as it arrives and the read stops at the token limit: a
// body of endless token ids costs apicore.MaxPromptTokens ids, not the whole body (the
// old decoder read everything, 32 MiB, into memory before looking).
func TestReadCompletionStopsAtPromptLimit(t *testing.T) {
	r := &endlessPrompt{}
	_, err := readCompletion(r, apicore.MaxPromptTokens)
	var ae *APIError
	if !errorsAs(err, &ae) || ae.Param != "prompt" || !strings.Contains(ae.Message, "more than") {
		t.Fatalf("err %v", err)
	}
	if limit := int64(2*apicore.MaxPromptTokens + 64<<10); r.n > limit {
		t.Errorf("read %d bytes of an endless prompt; want at most %d (the limit's worth)", r.n, limit)
	}
}

func errorsAs(err error, ae **APIError) bool {
	e, ok := err.(*APIError)
	if ok {
		*ae = e
	}
	return ok
}

// vLLM refuses an empty cache_salt; bounded ids and model names.
func TestCompletionFieldBounds(t *testing.T) {
	for _, tt := range []struct{ body, param, msg string }{
		{`{"prompt": [1], "cache_salt": ""}`, "cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided."},
		{`{"prompt": [1], "request_id": "` + strings.Repeat("x", apicore.MaxRequestIDLen+1) + `"}`, "request_id", "more than the limit"},
		{`{"prompt": [1], "model": "` + strings.Repeat("m", apicore.MaxModelNameLen+1) + `"}`, "model", "more than the limit"},
	} {
		_, _, err := parse(tt.body)
		ae, ok := err.(*APIError)
		if !ok || ae.Param != tt.param || !strings.Contains(ae.Message, tt.msg) {
			t.Errorf("%.60s: %v", tt.body, err)
		}
	}
}

// newLimitedAPI serves the API over one fake engine with cfg's limits.
func newLimitedAPI(t *testing.T, cfg APIConfig) (*fakeEngines, *httptest.Server) {
	t.Helper()
	f := newFakeCore(t, 1)
	cfg.Dispatcher = f.D
	cfg.Engines = func() []EngineView { return MergeEngines(nil, f.D.Engines()) }
	reg := prometheus.NewRegistry()
	cfg.Registerer, cfg.Gatherer = reg, reg
	ts := httptest.NewServer(NewAPI(cfg).Handler())
	t.Cleanup(ts.Close)
	return f, ts
}

// GET on /v1/completions was a 404 (the catch-all); it is a 405 naming POST.
func TestMethodNotAllowed(t *testing.T) {
	_, ts := newLimitedAPI(t, APIConfig{})
	for _, tt := range []struct{ method, path, allow string }{
		{"GET", "/v1/completions", "POST"}, {"POST", "/health", "GET"}, {"DELETE", "/v1/engines", "GET"},
	} {
		req, _ := http.NewRequest(tt.method, ts.URL+tt.path, nil)
		resp, err := testwait.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != tt.allow || !strings.Contains(string(b), `"code":405`) {
			t.Errorf("%s %s: %d Allow=%q %s", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"), b)
		}
	}
}

// --api-key guards /v1/* as vLLM does (Bearer, any case of the scheme); /health
// and /metrics stay open.
func TestAPIKey(t *testing.T) {
	_, ts := newLimitedAPI(t, APIConfig{APIKeys: []string{"k1", "k2"}})
	do := func(method, path, auth string) int {
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{"prompt": [1], "max_tokens": 1}`)
		}
		req, _ := http.NewRequest(method, ts.URL+path, body)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := testwait.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tt := range []struct {
		method, path, auth string
		want               int
	}{
		{"POST", "/v1/completions", "", 401},
		{"POST", "/v1/completions", "Bearer nope", 401},
		{"POST", "/v1/completions", "Basic k1", 401},
		{"POST", "/v1/completions", "Bearer k1", 200},
		{"POST", "/v1/completions", "bearer k2", 200},
		{"GET", "/v1/engines", "", 401},
		{"GET", "/v1/nothing", "", 401},
		{"GET", "//v1/engines", "", 401},
		{"GET", "/health", "", 200},
		{"GET", "/metrics", "", 200},
	} {
		if got := do(tt.method, tt.path, tt.auth); got != tt.want {
			t.Errorf("%s %s %q: %d, want %d", tt.method, tt.path, tt.auth, got, tt.want)
		}
	}
}

// Beyond --max-concurrent-requests a request is a 503 with Retry-After at once.
func TestMaxConcurrentRequests(t *testing.T) {
	f, ts := newLimitedAPI(t, APIConfig{MaxConcurrentRequests: 1})
	f.Hold.Store(true)
	first := make(chan int, 1)
	go func() {
		resp, err := testwait.HTTPClient.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [1], "max_tokens": 5}`))
		if err != nil {
			first <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	testwait.Recv(t, f.Adds, "the first request's ADD") // it holds the only slot
	resp, body := post(t, ts, `{"prompt": [1]}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "--max-concurrent-requests") {
		t.Errorf("second request: %d Retry-After=%q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	f.Hold.Store(false)
	f.D.Close() // ends the held request
	testwait.Recv(t, first, "the first request's answer")
}

// An absurd Content-Length with Expect: 100-continue is refused with a 413, not
// answered with 100 Continue (the old handler read through MaxBytesReader, which
// made net/http send 100 Continue first).
func TestExpectContinueAbsurdLength(t *testing.T) {
	f, ts := newLimitedAPI(t, APIConfig{MaxBodyBytes: 1 << 20})
	ans := servertest.RawRequest(t, ts.Listener.Addr().String(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Content-Length: 100000000000\r\nExpect: 100-continue\r\n\r\n", false)
	if strings.Contains(ans, "100 Continue") || !strings.HasPrefix(ans, "HTTP/1.1 413") || !strings.Contains(ans, `"code":413`) {
		t.Errorf("answer %q", ans)
	}
	f.NoAdds(t)
}

// A chunked body that trickles for ever gets a 408 once --http-body-timeout passes
// (there was no body timeout: 1,000 drip-fed bodies were held for 45 s).
func TestBodyTimeout(t *testing.T) {
	f, ts := newLimitedAPI(t, APIConfig{BodyTimeout: 300 * time.Millisecond})
	ans := servertest.RawRequest(t, ts.Listener.Addr().String(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n", true)
	if !strings.HasPrefix(ans, "HTTP/1.1 408") || !strings.Contains(ans, "--http-body-timeout") {
		t.Errorf("answer %q", ans)
	}
	f.NoAdds(t)
}

// A dead rank shows no running requests or KV usage: they are its last live
// figures, not what it holds.
func TestMergeEnginesDeadRankHasNoLoad(t *testing.T) {
	f := newFakeCore(t, 2)
	f.D.ObserveLoad(1, 3, 4, 0.5)
	f.D.EngineDown(1, fmt.Errorf("gone"))
	views := MergeEngines(nil, f.D.Engines())
	v := views[1]
	if v.Ready || v.Running != 0 || v.Waiting != 0 || v.KVCacheUsage != 0 {
		t.Errorf("dead rank: %+v", v)
	}
}

// A chunked body (no Content-Length) is cut at --max-body-bytes as it streams:
// a 413, however the bytes are spent (here on a field nobody reads).
func TestChunkedBodyLimit(t *testing.T) {
	f, ts := newLimitedAPI(t, APIConfig{MaxBodyBytes: 4096})
	body := `{"prompt": [1], "pad": "` + strings.Repeat("x", 1<<20) + `"}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/completions", io.NopCloser(strings.NewReader(body)))
	req.ContentLength = -1
	resp, err := testwait.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 413 || !strings.Contains(string(b), "--max-body-bytes") {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	f.NoAdds(t)
}
