package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The README quickstart: `switchyard serve` alone, then curl, plain and streaming.
func TestEmbeddedDefaultHTTP(t *testing.T) {
	s := startServe(t, "--bootstrap-address", "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if line := s.waitLog("no --handshake-address: started built-in mock engines (the embedded default; point real engines at --handshake-address instead)", time.Second); line["mock_engines"] != 2.0 {
		t.Errorf("embedded default announced %v mock engines, want 2", line["mock_engines"])
	}
	if code, body := s.get(t, "/health"); code != 200 {
		t.Fatalf("/health %d %s", code, body)
	}

	resp, body, err := s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 4}`)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain completion: %v %s", err, body)
	}
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || len(c.Choices[0].TokenIDs) != 4 || *c.Choices[0].FinishReason != "length" {
		t.Errorf("plain completion: %s", body)
	}
	if c.Usage == nil || c.Usage.PromptTokens != 3 || c.Usage.CompletionTokens != 4 || c.Usage.TotalTokens != 7 {
		t.Errorf("usage: %s", body)
	}

	resp, body, err = s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 5, "n": 2, "stream": true}`)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %v %v %s", err, resp.Header, body)
	}
	r := foldStream(t, body)
	if !r.done || len(r.errors) > 0 || len(r.tokens[0]) != 5 || len(r.tokens[1]) != 5 || r.finish[0] != "length" || r.finish[1] != "length" {
		t.Errorf("stream folded to %+v from %s", r, body)
	}
	if ev := sse(body); ev[len(ev)-1] != "[DONE]" {
		t.Errorf("stream does not end with [DONE]: %q", ev[len(ev)-1])
	}

	// The same request pinned to each rank; then to one that is not there.
	for _, rank := range []string{"0", "1"} {
		resp, body, err := s.post(ctx, `{"prompt": [9], "max_tokens": 2}`, "X-data-parallel-rank", rank)
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-data-parallel-rank") != rank {
			t.Errorf("pinned to %s: %v %v %s", rank, err, resp.Header, body)
		}
	}
	resp, body, err = s.post(ctx, `{"prompt": [9]}`, "X-data-parallel-rank", "3")
	if err != nil || resp.StatusCode != 400 {
		t.Fatalf("rank 3: %v %s", err, body)
	}
	if err := json.Unmarshal(body, &c); err != nil || c.Error == nil || c.Error.Type != "InvalidDataParallelRank" ||
		c.Error.Message != "data parallel rank 3 is not connected to this frontend; connected ranks: [0, 1]" ||
		len(c.Error.ConnectedRanks) != 2 {
		t.Errorf("rank 3: %s", body)
	}
	for _, bad := range []struct{ body, param string }{
		{`{"prompt": [1, 2`, ""},
		{`{"max_tokens": 3}`, `"param":"prompt"`},
		{`{"prompt": [1, -5]}`, `"param":"prompt"`},
		{`{"prompt": [1], "temperature": 9}`, `"param":"temperature"`},
	} {
		resp, body, err := s.post(ctx, bad.body)
		if err != nil || resp.StatusCode != 400 || !strings.Contains(string(body), bad.param) {
			t.Errorf("%s: %v %d %s", bad.body, err, resp.StatusCode, body)
		}
	}

	engines := s.engines(t)
	if len(engines) != 2 || engines[0].Identity != "0000" || engines[1].Identity != "0100" || !engines[0].Ready || !engines[1].Ready {
		t.Errorf("/v1/engines: %+v", engines)
	}
	// The embedded bootstrap registry answers vLLM's query on its own port.
	boot := s.waitLog("bootstrap registry serving", time.Second)["address"].(string)
	resp, err = httpc.Get("http://" + boot + "/query")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("bootstrap /query: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}

	_, metrics := s.get(t, "/metrics")
	for _, name := range []string{
		"switchyard_requests_total", "switchyard_requests_in_flight", "switchyard_dispatch_latency_seconds",
		"switchyard_time_to_first_token_seconds", "switchyard_inter_token_latency_seconds",
		"switchyard_output_tokens_total", "switchyard_engine_up", "switchyard_coordinator_wave",
		"switchyard_frontend_engines", "switchyard_registry_", "switchyard_http_requests_total",
	} {
		if !strings.Contains(string(metrics), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
}

// --api-key also comes from VLLM_API_KEY, as vLLM's does: /v1/* needs the key,
// /health does not. --api-key needs --admin-token (here SWITCHYARD_ADMIN_TOKEN).
func TestAPIKeyFromEnv(t *testing.T) {
	p := startEnv(t, "serve", []string{"VLLM_API_KEY=env-key", "SWITCHYARD_ADMIN_TOKEN=env-admin"}, "serve", "--http-address", "127.0.0.1:0", "--client-address", "")
	s := &server{proc: p}
	s.http = strings.TrimPrefix(p.waitLog("serving", serveStartWait)["http"].(string), "http://")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, _, err := s.post(ctx, `{"prompt": [1], "max_tokens": 1}`); err != nil || resp.StatusCode != 401 {
		t.Errorf("without the key: %v %v", err, resp)
	}
	if resp, b, err := s.post(ctx, `{"prompt": [1], "max_tokens": 1}`, "Authorization", "Bearer env-key"); err != nil || resp.StatusCode != 200 {
		t.Errorf("with the key: %v %v %s", err, resp, b)
	}
	if code, _ := s.get(t, "/health"); code != 200 {
		t.Errorf("/health: %d", code)
	}
}
