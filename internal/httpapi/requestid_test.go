package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
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

// A chat completion is named chatcmpl-<X-Request-Id>, ahead of a body's request_id.
func TestRequestIDHeaderChat(t *testing.T) {
	_, ts := newParityAPI(t, 1, APIConfig{Text: &Text{Name: "tiny", Root: "/models/tiny", MaxModelLen: 4096,
		Tokenizer: &fakeTextTok{pieces: map[int64]string{100: "Hi"}}, Template: fakeTemplate{format: "string"}}})
	resp, body := postHeaders(t, ts, "/v1/chat/completions",
		`{"model": "tiny", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1, "request_id": "body-id"}`, "X-Request-Id", "chat-7")
	var got struct{ ID string }
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || got.ID != "chatcmpl-chat-7" {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func postHeaders(t *testing.T, ts *httptest.Server, path, body string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, ts.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := testwait.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}
