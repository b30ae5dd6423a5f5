package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/internal/apicore"
)

// newHardenTextAPI is newTextAPI with text changed by edit first.
func newHardenTextAPI(t *testing.T, edit func(*Text)) (*fakeEngines, *httptest.Server) {
	t.Helper()
	f := newFakeCore(t, 1)
	reg := prometheus.NewRegistry()
	text := &Text{Name: "tiny", Root: "/models/tiny", MaxModelLen: 4096, Tokenizer: &fakeTextTok{},
		Template: fakeTemplate{format: "string"},
		Parse:    func(string) (ChatTemplate, error) { return fakeTemplate{format: "string"}, nil }}
	edit(text)
	api := NewAPI(APIConfig{
		Dispatcher: f.D,
		Engines:    func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model:      apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		Registerer: reg, Gatherer: reg, Text: text,
	})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return f, ts
}

const untrustedTemplateMsg = "Chat template is passed with request, but --trust-request-chat-template is not set. " +
	"Refused request with untrusted chat template."

// TestRequestChatTemplateNeedsTrust: a template a request brings is code; without
// --trust-request-chat-template it is refused with vLLM's 400 and message, on
// every path that renders one.
func TestRequestChatTemplateNeedsTrust(t *testing.T) {
	_, ts := newHardenTextAPI(t, func(*Text) {})
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{` + msgs + `, "max_tokens": 1, "chat_template": "{{ messages }}"}`},
		{"/v1/chat/completions", `{` + msgs + `, "max_tokens": 1, "chat_template": ""}`},
		{"/v1/chat/completions", `{` + msgs + `, "max_tokens": 1, "chat_template_kwargs": {"chat_template": "{{ messages }}"}}`},
		{"/tokenize", `{` + msgs + `, "chat_template": "{{ messages }}"}`},
		{"/tokenize", `{` + msgs + `, "chat_template_kwargs": {"chat_template": "x"}}`},
	} {
		code, body := postPath(t, ts, c.path, c.body)
		var got struct {
			Error struct{ Message, Type string }
		}
		_ = json.Unmarshal(body, &got)
		if code != 400 || got.Error.Message != untrustedTemplateMsg || got.Error.Type != TypeBadRequest {
			t.Errorf("%s %s: %d %s", c.path, c.body, code, body)
		}
	}
	// Without a template of its own a request is served; a null one is none.
	for _, c := range []struct{ path, body string }{
		{"/tokenize", `{` + msgs + `, "chat_template": null, "chat_template_kwargs": {"chat_template": null, "x": 1}}`},
		{"/v1/chat/completions", `{` + msgs + `, "max_tokens": 1, "chat_template_kwargs": {"suffix": "!"}}`},
	} {
		if code, body := postPath(t, ts, c.path, c.body); code != 200 {
			t.Errorf("%s %s: %d %s", c.path, c.body, code, body)
		}
	}
}

// TestRequestChatTemplateTrusted: with the flag a request's template is used.
func TestRequestChatTemplateTrusted(t *testing.T) {
	_, ts := newHardenTextAPI(t, func(x *Text) { x.TrustRequestChatTemplate = true })
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	for _, c := range []struct{ path, body string }{
		{"/tokenize", `{` + msgs + `, "chat_template": "{{ messages }}"}`},
		{"/v1/chat/completions", `{` + msgs + `, "max_tokens": 1, "chat_template": "{{ messages }}"}`},
	} {
		if code, body := postPath(t, ts, c.path, c.body); code != 200 {
			t.Errorf("%s %s: %d %s", c.path, c.body, code, body)
		}
	}
}

// TestTokenizeExactKeys: /tokenize and /detokenize match field names exactly, as
// vLLM's pydantic models do: "PROMPT" is an unknown field, not the prompt.
func TestTokenizeExactKeys(t *testing.T) {
	_, ts := newHardenTextAPI(t, func(*Text) {})
	if code, body := postPath(t, ts, "/tokenize", `{"PROMPT": "abc"}`); code != 400 || !strings.Contains(string(body), "prompt or messages is required") {
		t.Errorf("PROMPT: %d %s", code, body)
	}
	code, body := postPath(t, ts, "/tokenize", `{"prompt": "abc", "Return_Token_Strs": true, "unknown": {"a": [1]}}`)
	var tok struct {
		Count     int       `json:"count"`
		TokenStrs *[]string `json:"token_strs"`
	}
	if err := json.Unmarshal(body, &tok); code != 200 || err != nil || tok.Count == 0 || tok.TokenStrs != nil {
		t.Errorf("Return_Token_Strs: %d %s", code, body)
	}
	if code, body := postPath(t, ts, "/detokenize", `{"TOKENS": [100]}`); code != 400 || !strings.Contains(string(body), "tokens") {
		t.Errorf("TOKENS: %d %s", code, body)
	}
	if code, body := postPath(t, ts, "/detokenize", `{"tokens": [], "Model": "other"}`); code != 200 {
		t.Errorf("Model: %d %s", code, body)
	}
	if code, body := postPath(t, ts, "/detokenize", `{"tokens": ["a"]}`); code != 400 || strings.Contains(string(body), "int64") {
		t.Errorf("tokens of strings: %d %s", code, body)
	}
}

// TestTokenCompatShapeWithLogprobs: under TokenCompat (the embedded default) a
// token-id completion without logprobs is answered by the token path, whose
// choices carry token_ids; the same request with logprobs (the text path) carries
// them too, streamed or not.
func TestTokenCompatShapeWithLogprobs(t *testing.T) {
	_, ts := newHardenTextAPI(t, func(x *Text) { x.TokenCompat = true })
	keys := func(body string) []string {
		t.Helper()
		code, b := postPath(t, ts, "/v1/completions", body)
		if code != 200 {
			t.Fatalf("%s: %d %s", body, code, b)
		}
		var got struct{ Choices []map[string]json.RawMessage }
		if err := json.Unmarshal(b, &got); err != nil || len(got.Choices) != 1 {
			t.Fatalf("%s: %s", body, b)
		}
		var ks []string
		for k := range got.Choices[0] {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		if ids := string(got.Choices[0]["token_ids"]); ids == "" || ids == "null" {
			t.Errorf("%s: no token_ids: %s", body, b)
		}
		return ks
	}
	plain := keys(`{"prompt": [5, 6], "max_tokens": 2}`)
	withLP := keys(`{"prompt": [5, 6], "max_tokens": 2, "logprobs": 1}`)
	if strings.Join(plain, ",") != strings.Join(withLP, ",") {
		t.Errorf("choice keys without logprobs %v, with %v", plain, withLP)
	}
	// Streamed: every chunk of the logprobs answer carries its token ids.
	code, b := postPath(t, ts, "/v1/completions", `{"prompt": [5, 6], "max_tokens": 2, "logprobs": 1, "stream": true}`)
	if code != 200 {
		t.Fatalf("stream: %d %s", code, b)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		n++
		if !strings.Contains(data, `"token_ids":[`) {
			t.Errorf("chunk without token_ids: %s", data)
		}
	}
	if n == 0 {
		t.Errorf("no chunks: %s", b)
	}
}
