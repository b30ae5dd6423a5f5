package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// newTestAPI serves the API over a dispatcher with `ranks` fake engines.
func newTestAPI(t *testing.T, ranks int) (*fakeEngines, *httptest.Server) {
	t.Helper()
	f := newFakeCore(t, ranks)
	reg := prometheus.NewRegistry()
	api := NewAPI(APIConfig{
		Dispatcher: f.D,
		Engines:    func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model:      apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		Registerer: reg, Gatherer: reg,
	})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return f, ts
}

func post(t *testing.T, ts *httptest.Server, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	return postHeaders(t, ts, "/v1/completions", body, hdr...)
}

func TestCompletionNonStreaming(t *testing.T) {
	f, ts := newTestAPI(t, 2)
	resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2, 3], "max_tokens": 4}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got CompletionResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "cmpl-") || got.Object != "text_completion" || got.Model != "m" {
		t.Errorf("envelope %+v", got)
	}
	if len(got.Choices) != 1 {
		t.Fatalf("%d choices", len(got.Choices))
	}
	c := got.Choices[0]
	if diff := cmp.Diff([]int64{100, 101, 102, 103}, c.TokenIDs); diff != "" {
		t.Errorf("token_ids (-want +got):\n%s", diff)
	}
	if c.FinishReason == nil || *c.FinishReason != "length" || c.Text != "" {
		t.Errorf("choice %+v", c)
	}
	if diff := cmp.Diff(&Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if resp.Header.Get(RankHeader) == "" {
		t.Error("no X-data-parallel-rank in the answer")
	}
	req := testwait.Recv(t, f.Adds, "the ADD")
	if req.Sampling.EOSTokenID != wire.SomeInt(2) || req.Sampling.MaxTokens != wire.SomeInt(4) {
		t.Errorf("engine request sampling %+v", req.Sampling)
	}
}

func TestCompletionFanOut(t *testing.T) {
	f, ts := newTestAPI(t, 2)
	resp, body := post(t, ts, `{"prompt": [[1], [2, 3]], "n": 2, "max_tokens": 2}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var got CompletionResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 4 {
		t.Fatalf("%d choices, want 4", len(got.Choices))
	}
	for i, c := range got.Choices {
		if c.Index != i || len(c.TokenIDs) != 2 {
			t.Errorf("choice %d: %+v", i, c)
		}
	}
	if diff := cmp.Diff(&Usage{PromptTokens: 3, CompletionTokens: 8, TotalTokens: 11}, got.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	seen := map[string]bool{}
	for range 4 {
		req := testwait.Recv(t, f.Adds, "an ADD")
		if req.Sampling.N != 1 || seen[req.RequestID] {
			t.Errorf("engine request %s n=%d (duplicate=%v)", req.RequestID, req.Sampling.N, seen[req.RequestID])
		}
		seen[req.RequestID] = true
	}
}

// readSSE returns the data payloads of a server-sent event stream.
func readSSE(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, line)
		}
	}
	return out
}

func TestCompletionStreaming(t *testing.T) {
	_, ts := newTestAPI(t, 1)
	resp, err := testwait.HTTPClient.Post(ts.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt": [5], "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
	events := readSSE(t, resp.Body)
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q: want chunks ending in [DONE]", events)
	}
	var tokens []int64
	var finish string
	var usage *Usage
	for _, e := range events[:len(events)-1] {
		var chunk CompletionResponse
		if err := json.Unmarshal([]byte(e), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", e, err)
		}
		for _, c := range chunk.Choices {
			tokens = append(tokens, c.TokenIDs...)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
	}
	if diff := cmp.Diff([]int64{100, 101, 102}, tokens); diff != "" {
		t.Errorf("streamed tokens (-want +got):\n%s", diff)
	}
	if finish != "length" {
		t.Errorf("finish_reason %q", finish)
	}
	if diff := cmp.Diff(&Usage{PromptTokens: 1, CompletionTokens: 3, TotalTokens: 4}, usage); diff != "" {
		t.Errorf("usage chunk (-want +got):\n%s", diff)
	}
}

func TestCompletionErrors(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		hdr        []string
		wantStatus int
		wantType   string
		wantParam  any
		wantMsg    string
		wantRanks  []any
	}{
		{"malformed", `{"prompt": [1`, nil, 400, TypeBadRequest, nil, "invalid JSON", nil},
		{"missing prompt", `{}`, nil, 400, TypeBadRequest, "prompt", "prompt is required", nil},
		{"negative id", `{"prompt": [-1]}`, nil, 400, TypeBadRequest, "prompt", "negative", nil},
		{"top_p", `{"prompt": [1], "top_p": 2}`, nil, 400, TypeBadRequest, "top_p", "top_p", nil},
		{"bad header", `{"prompt": [1]}`, []string{RankHeader, "x"}, 400, TypeBadRequest, RankHeader, "non-negative integer", nil},
		{"rank not connected", `{"prompt": [1]}`, []string{RankHeader, "7"}, 400, apicore.TypeInvalidDataParallelRank, RankHeader,
			"data parallel rank 7 is not connected to this frontend; connected ranks: [0, 1]", []any{0.0, 1.0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ts := newTestAPI(t, 2)
			resp, body := post(t, ts, tt.body, tt.hdr...)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			var e struct {
				Error map[string]any `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if e.Error["type"] != tt.wantType || e.Error["param"] != tt.wantParam || e.Error["code"] != float64(tt.wantStatus) {
				t.Errorf("error %v", e.Error)
			}
			if msg, _ := e.Error["message"].(string); !strings.Contains(msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", msg, tt.wantMsg)
			}
			if tt.wantRanks != nil {
				if diff := cmp.Diff(tt.wantRanks, e.Error["connected_ranks"]); diff != "" {
					t.Errorf("connected_ranks (-want +got):\n%s", diff)
				}
			}
			f.NoAdds(t)
		})
	}
}

func TestPinnedRank(t *testing.T) {
	f, ts := newTestAPI(t, 2)
	resp, body := post(t, ts, `{"prompt": [1], "max_tokens": 1}`, RankHeader, "1")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Header.Get(RankHeader); got != "1" {
		t.Errorf("answered by rank %q, want 1", got)
	}
	if req := testwait.Recv(t, f.Adds, "the ADD"); req.DataParallelRank != wire.SomeInt(1) {
		t.Errorf("data_parallel_rank %+v", req.DataParallelRank)
	}
}

// A client that goes away mid-stream has its request aborted at the engine.
func TestDisconnectAborts(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "stream", false: "plain"}[stream]
		t.Run(name, func(t *testing.T) {
			f, ts := newTestAPI(t, 1)
			f.Hold.Store(true)
			ctx, cancel := context.WithCancel(context.Background())
			body := `{"prompt": [1], "max_tokens": 50, "stream": ` + map[bool]string{true: "true", false: "false"}[stream] + `}`
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/completions", strings.NewReader(body))
			errc := make(chan error, 1)
			go func() {
				resp, err := testwait.HTTPClient.Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			added := testwait.Recv(t, f.Adds, "the ADD")
			cancel()
			testwait.Recv(t, errc, "the cancelled call to return")
			f.ExpectAbort(t, added.RequestID)
		})
	}
}

func TestHealthEnginesMetrics(t *testing.T) {
	f, ts := newTestAPI(t, 2)
	get := func(path string) (int, string) {
		resp, err := testwait.HTTPClient.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/health"); code != 200 {
		t.Errorf("/health %d %s", code, body)
	}
	code, body := get("/v1/engines")
	var engines struct {
		Engines []EngineView `json:"engines"`
	}
	if err := json.Unmarshal([]byte(body), &engines); code != 200 || err != nil || len(engines.Engines) != 2 {
		t.Fatalf("/v1/engines %d %s (%v)", code, body, err)
	}
	if e := engines.Engines[1]; e.Rank != 1 || e.Identity != "0100" || e.State != "ready" {
		t.Errorf("engine 1: %+v", e)
	}
	post(t, ts, `{"prompt": [1], "max_tokens": 1}`)
	_, metrics := get("/metrics")
	for _, name := range []string{"switchyard_http_requests_total", "switchyard_http_request_duration_seconds", "switchyard_http_requests_in_flight"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	f.D.EngineDown(0, nil)
	f.D.EngineDown(1, nil)
	if code, body := get("/health"); code != 503 {
		t.Errorf("/health with no engine: %d %s", code, body)
	}
	if code, _ := get("/nope"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
}

func TestBodyLimit(t *testing.T) {
	f := newFakeCore(t, 1)
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return nil }, MaxBodyBytes: 64})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"prompt": [`+strings.Repeat("1,", 100)+`1]}`))
	api.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("status %d: %s", rec.Code, rec.Body)
	}
	f.NoAdds(t)
}

// An engine that dies fails only its requests: 500 for a plain request, an error
// chunk and event (then [DONE]) for a stream.
func TestEngineDownFailsRequest(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			f, ts := newTestAPI(t, 1)
			f.Hold.Store(true)
			body := `{"prompt": [1], "max_tokens": 50}`
			if stream {
				body = `{"prompt": [1], "max_tokens": 50, "stream": true}`
			}
			type answer struct {
				code int
				body []byte
			}
			res := make(chan answer, 1)
			go func() {
				resp, b := post(t, ts, body)
				res <- answer{resp.StatusCode, b}
			}()
			testwait.Recv(t, f.Adds, "the ADD")
			f.D.EngineDown(0, errors.New("killed"))
			a := testwait.Recv(t, res, "the answer")
			if !stream {
				if a.code != 500 || !strings.Contains(string(a.body), "engine rank 0 is down") {
					t.Errorf("plain: %d %s", a.code, a.body)
				}
				return
			}
			events := readSSE(t, bytes.NewReader(a.body))
			if a.code != 200 || len(events) < 3 || events[len(events)-1] != "[DONE]" ||
				!strings.Contains(events[len(events)-3], `"finish_reason":"error"`) ||
				!strings.Contains(events[len(events)-2], `"error":{`) {
				t.Errorf("stream: %d %q", a.code, events)
			}
		})
	}
}
