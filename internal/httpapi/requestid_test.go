package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// X-Request-Id names the request as vLLM names it ("cmpl-<X-Request-Id>") in the
// answer and the access log; with RequestIDHeaders the header comes back, and a
// request without one gets a random one. The engine ids stay unique, so two
// requests with one header value are both served.
func TestRequestIDHeader(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	_, ts := newParityAPI(t, 1, APIConfig{RequestIDHeaders: true, LogRequests: true, Logger: log})
	for range 2 {
		resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`, "X-Request-Id", "trace-42")
		var got CompletionResponse
		if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if got.ID != "cmpl-trace-42" || resp.Header.Get("X-Request-Id") != "trace-42" {
			t.Errorf("id %q, header %q", got.ID, resp.Header.Get("X-Request-Id"))
		}
	}
	if !strings.Contains(logs.String(), "request_id=cmpl-trace-42") {
		t.Errorf("access log without the id:\n%s", logs.String())
	}
	resp, _ := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`)
	if len(resp.Header.Get("X-Request-Id")) != 32 {
		t.Errorf("no random X-Request-Id: %q", resp.Header.Get("X-Request-Id"))
	}
	resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`, "X-Request-Id", string(bytes.Repeat([]byte("x"), 300)))
	if resp.StatusCode != 400 || !strings.Contains(string(body), "X-Request-Id") {
		t.Errorf("overlong X-Request-Id: %d %s", resp.StatusCode, body)
	}
}

// Without --enable-request-id-headers no X-Request-Id is added.
func TestRequestIDHeaderOff(t *testing.T) {
	_, ts := newParityAPI(t, 1, APIConfig{})
	resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`, "X-Request-Id", "abc")
	if resp.Header.Get("X-Request-Id") != "" || !strings.Contains(string(body), `"cmpl-abc"`) {
		t.Errorf("header %q body %s", resp.Header.Get("X-Request-Id"), body)
	}
}
