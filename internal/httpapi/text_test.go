package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/chattemplate"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/internal/textgen"
)

// fakeTextTok is a stand-in tokenizer: prompt text is one token per byte (id = the
// byte), and the fake engines' tokens 100, 101, ... decode to the pieces below.
type fakeTextTok struct{ pieces map[int64]string }

func (f *fakeTextTok) piece(id int64) string {
	if p, ok := f.pieces[id]; ok {
		return p
	}
	if id < 100 {
		return string(rune(id))
	}
	return fmt.Sprintf(" w%d", id)
}

func (f *fakeTextTok) Encode(text string, addSpecial bool) []int64 {
	var ids []int64
	if addSpecial {
		ids = append(ids, 1) // "BOS"
	}
	for i := range len(text) {
		ids = append(ids, int64(text[i]%100))
	}
	return ids
}

func (f *fakeTextTok) Decode(ids []int64, skip bool) string {
	var b strings.Builder
	for _, id := range ids {
		if id == 1 && skip {
			continue
		}
		b.WriteString(f.piece(id))
	}
	return b.String()
}

func (f *fakeTextTok) NewStream(skip bool) textgen.Stream { return &fakeTextStream{t: f, skip: skip} }
func (f *fakeTextTok) AddedToken(id int64) (string, bool) {
	if id == 1 {
		return "<s>", true
	}
	return "", false
}
func (f *fakeTextTok) HasAddedTokens() bool      { return true }
func (f *fakeTextTok) IDToToken(id int64) string { return "tok" + fmt.Sprint(id) }

type fakeTextStream struct {
	t    *fakeTextTok
	skip bool
}

func (s *fakeTextStream) AppendStep(dst []byte, id int64) []byte {
	if id == 1 && s.skip {
		return dst
	}
	return append(dst, s.t.piece(id)...)
}
func (s *fakeTextStream) Prime([]int64) {}

// fakeTemplate renders "<|role|>content\n" per message and "<|assistant|>" as the
// generation prompt.
type fakeTemplate struct{ format string }

func (f fakeTemplate) ContentFormat() string { return f.format }
func (f fakeTemplate) RenderContext(_ context.Context, in ChatInput) (string, error) {
	var b strings.Builder
	for _, m := range in.Messages {
		c, ok := m["content"].(string)
		if !ok {
			parts, _ := m["content"].([]any)
			for _, p := range parts {
				v, _ := p.(*chattemplate.Object).Get("text")
				c += v.(string)
			}
		}
		fmt.Fprintf(&b, "<|%s|>%s\n", m["role"], c)
	}
	if in.AddGenerationPrompt {
		b.WriteString("<|assistant|>")
	}
	if v, ok := in.Kwargs["suffix"].(string); ok {
		b.WriteString(v)
	}
	return b.String(), nil
}

func newTextAPI(t *testing.T, pieces map[int64]string) (*fakeEngines, *httptest.Server) {
	t.Helper()
	f := newFakeCore(t, 1)
	reg := prometheus.NewRegistry()
	api := NewAPI(APIConfig{
		Dispatcher: f.D,
		Engines:    func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model:      apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		Registerer: reg, Gatherer: reg,
		Text: &Text{Name: "tiny", Root: "/models/tiny", MaxModelLen: 4096, Tokenizer: &fakeTextTok{pieces: pieces},
			Template: fakeTemplate{format: "string"}},
	})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return f, ts
}

func postPath(t *testing.T, ts *httptest.Server, path, body string) (int, []byte) {
	t.Helper()
	resp, err := testwait.HTTPClient.Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestTextCompletion(t *testing.T) {
	f, ts := newTextAPI(t, map[int64]string{100: "Hello", 101: ",", 102: " world", 103: "!"})
	code, body := postPath(t, ts, "/v1/completions", `{"model": "tiny", "prompt": "Say hi", "max_tokens": 4, "return_token_ids": true}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got TextCompletionResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.Text != "Hello, world!" || *c.FinishReason != "length" || got.Model != "tiny" || !strings.HasPrefix(got.ID, "cmpl-") ||
		len(c.PromptTokenIDs) != 7 || len(c.TokenIDs) != 4 || got.Usage.PromptTokens != 7 || got.Usage.CompletionTokens != 4 {
		t.Fatalf("got %s", body)
	}
	add := testwait.Recv(t, f.Adds, "the ADD")
	if !add.Sampling.Detokenize || add.Sampling.IgnoreEOS {
		t.Errorf("sampling params %+v", add.Sampling)
	}
}

func TestTextStopStringAbortsEngine(t *testing.T) {
	f, ts := newTextAPI(t, map[int64]string{100: "Hello STOP there"})
	f.Hold.Store(true) // one token, then the request stays live until aborted
	code, body := postPath(t, ts, "/v1/completions", `{"prompt": "x", "max_tokens": 50, "stop": ["STOP"]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got TextCompletionResponse
	json.Unmarshal(body, &got)
	c := got.Choices[0]
	if c.Text != "Hello " || *c.FinishReason != "stop" || c.StopReason != "STOP" {
		t.Fatalf("got %s", body)
	}
	f.ExpectAbort(t, "cmpl-")
}

func TestTextStreamStopSplitAcrossSteps(t *testing.T) {
	_, ts := newTextAPI(t, map[int64]string{100: "Hel", 101: "lo S", 102: "TO", 103: "P and", 104: " more"})
	code, body := postPath(t, ts, "/v1/completions", `{"prompt": "x", "max_tokens": 5, "stop": "STOP", "stream": true, "stream_options": {"include_usage": true}}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	events := readSSE(t, strings.NewReader(string(body)))
	var text []string
	var finish, stop any
	for _, e := range events[:len(events)-1] {
		var ch TextCompletionResponse
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			text = append(text, c.Text)
			if c.FinishReason != nil {
				finish, stop = *c.FinishReason, c.StopReason
			}
		}
	}
	if strings.Join(text, "") != "Hello " || finish != "stop" || stop != "STOP" || events[len(events)-1] != "[DONE]" {
		t.Fatalf("chunks %q finish %v stop %v", text, finish, stop)
	}
	for _, c := range text {
		if strings.Contains(c, "S") {
			t.Fatalf("a chunk %q sent part of the stop string", text)
		}
	}
}

func TestTextChat(t *testing.T) {
	f, ts := newTextAPI(t, map[int64]string{100: "Hi", 101: " there", 102: "."})
	code, body := postPath(t, ts, "/v1/chat/completions", `{"model": "tiny", "messages": [{"role": "user", "content": [{"type": "text", "text": "hey"}]}], "max_completion_tokens": 3, "n": 2}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var got ChatResponse
	json.Unmarshal(body, &got)
	if len(got.Choices) != 2 || *got.Choices[0].Message.Content != "Hi there." || got.Choices[1].Message.Role != "assistant" ||
		got.Object != "chat.completion" || !strings.HasPrefix(got.ID, "chatcmpl-") {
		t.Fatalf("got %s", body)
	}
	add := testwait.Recv(t, f.Adds, "the ADD")
	if want := "<|user|>hey\n<|assistant|>"; string(textOf(add.PromptTokenIDs)) != textOf([]int64((&fakeTextTok{}).Encode(want, false))) {
		t.Errorf("prompt %v", add.PromptTokenIDs)
	}

	// Streaming: the role chunk first, content deltas, the finish chunk, usage, [DONE].
	code, body = postPath(t, ts, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hey"}], "max_tokens": 3, "stream": true, "stream_options": {"include_usage": true}}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	events := readSSE(t, strings.NewReader(string(body)))
	var first ChatChunk
	json.Unmarshal([]byte(events[0]), &first)
	if first.Choices[0].Delta.Role != "assistant" || *first.Choices[0].Delta.Content != "" || first.Object != "chat.completion.chunk" {
		t.Fatalf("first chunk %s", events[0])
	}
	var content string
	var usage *Usage
	var finish string
	for _, e := range events[1 : len(events)-1] {
		var ch ChatChunk
		json.Unmarshal([]byte(e), &ch)
		for _, c := range ch.Choices {
			if c.Delta.Content != nil {
				content += *c.Delta.Content
			}
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ch.Usage != nil {
			usage = ch.Usage
		}
	}
	if content != "Hi there." || finish != "length" || usage == nil || usage.CompletionTokens != 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream %q", events)
	}
}

func textOf(ids []int64) string { return fmt.Sprint(ids) }

func TestTextModelsAndErrors(t *testing.T) {
	_, ts := newTextAPI(t, nil)
	code, body := postPath(t, ts, "/v1/chat/completions", `{"model": "other", "messages": [{"role": "user", "content": "x"}]}`)
	if code != 404 || !strings.Contains(string(body), "The model `other` does not exist.") || !strings.Contains(string(body), "NotFoundError") {
		t.Fatalf("model 404: %d %s", code, body)
	}
	code, body = postPath(t, ts, "/v1/completions", `{"model": "other", "prompt": "x"}`)
	if code != 404 {
		t.Fatalf("completions model 404: %d %s", code, body)
	}
	resp, err := testwait.HTTPClient.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var models struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}
	json.Unmarshal(b, &models)
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "tiny" || models.Data[0].OwnedBy != "vllm" ||
		models.Data[0].Root != "/models/tiny" || models.Data[0].MaxModelLen == nil || len(models.Data[0].Permission) != 1 {
		t.Fatalf("models %s", b)
	}
	code, body = postPath(t, ts, "/v1/completions", `{"prompt": "x", "suffix": "y"}`)
	if code != 400 || !strings.Contains(string(body), "suffix") {
		t.Fatalf("suffix: %d %s", code, body)
	}
	many := `[` + strings.Repeat(`"x",`, MaxStopStrings) + `"y"]`
	long := `"` + strings.Repeat("x", MaxStopBytes+1) + `"`
	for _, tc := range []struct{ stop, want string }{{many, "more than the limit of 256"}, {long, "more than the limit of 16384"}} {
		code, body = postPath(t, ts, "/v1/completions", `{"prompt": "x", "stop": `+tc.stop+`}`)
		if code != 400 || !strings.Contains(string(body), tc.want) {
			t.Fatalf("stop bound: %d %.200s", code, body)
		}
	}
	for _, stop := range []string{`""`, `["done", ""]`} {
		code, body = postPath(t, ts, "/v1/completions", `{"prompt": "x", "stop": `+stop+`}`)
		if code != 400 || !strings.Contains(string(body), "stop cannot contain an empty string.") {
			t.Fatalf("stop %s: %d %s", stop, code, body)
		}
	}
}

func TestTokenizeDetokenize(t *testing.T) {
	_, ts := newTextAPI(t, nil)
	code, body := postPath(t, ts, "/tokenize", `{"prompt": "ab", "return_token_strs": true}`)
	if code != 200 || string(body) != `{"count":3,"max_model_len":4096,"token_strs":["tok1","tok97","tok98"],"tokens":[1,97,98]}`+"\n" {
		t.Fatalf("tokenize: %d %s", code, body)
	}
	code, body = postPath(t, ts, "/tokenize", `{"messages": [{"role": "user", "content": "a"}], "add_generation_prompt": false}`)
	if code != 200 || !strings.Contains(string(body), `"count":10`) {
		t.Fatalf("tokenize messages: %d %s", code, body)
	}
	code, body = postPath(t, ts, "/detokenize", `{"tokens": [97, 98]}`)
	if code != 200 || string(body) != `{"prompt":"ab"}`+"\n" {
		t.Fatalf("detokenize: %d %s", code, body)
	}
}

func TestNoTokenizer(t *testing.T) {
	_, ts := newTestAPI(t, 1)
	for _, path := range []string{"/v1/chat/completions", "/tokenize", "/detokenize"} {
		code, body := postPath(t, ts, path, `{"messages": [{"role": "user", "content": "x"}], "prompt": "x"}`)
		if code != 400 || !strings.Contains(string(body), "--tokenizer") {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	resp, err := testwait.HTTPClient.Get(ts.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"id":"switchyard"`) {
		t.Fatalf("models without a tokenizer: %s", b)
	}
}

// TestAppendChunk: the hand-written chunks decode to what encoding/json writes.
func TestAppendChunk(t *testing.T) {
	for _, chat := range []bool{false, true} {
		req := &CompletionRequest{Stream: true}
		var c *ChatRequest
		if chat {
			c = &ChatRequest{}
		}
		run := newTextRun(&Text{Tokenizer: &fakeTextTok{}}, req, c, "id-\"x\"", "m\u2028<>&", 7, [][]int64{{1, 2}})
		prefix := run.chunkPrefix()
		stop, length := "stop", "length"
		for _, d := range []delta{
			{text: "plain"},
			{text: "quote\" back\\ nl\n tab\t ctl\x01 bad\xff ok é 世界 👩‍👧"},
			{text: "", finish: &stop, stop: "</s>", finished: true},
			{text: "x", finish: &stop, stop: int64(7), finished: true},
			{text: "y", finish: &length, finished: true},
		} {
			got := run.appendChunk(nil, prefix, 0, d)
			want, _ := json.Marshal(run.chunk(0, d))
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			json.Unmarshal(want, &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) {
				t.Errorf("chat %v:\n got %s\nwant %s", chat, got, want)
			}
		}
	}
}

// TestTextStructuredOutputs: response_format, structured_outputs and guided_* reach
// the engine as vLLM fills SamplingParams.structured_outputs, in key order, with the
// backend chosen up front; the engine's own decode rules accept them.
func TestTextStructuredOutputs(t *testing.T) {
	f, ts := newTextAPI(t, nil)
	for _, tc := range []struct {
		name, fields string
		want         []any // key, value pairs in order
	}{
		{"json_schema", `"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"b": {"type": "integer", "minimum": 1}, "a": {"type": "string"}}}}}`,
			[]any{"json", map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "integer", "minimum": int64(1)}, "a": map[string]any{"type": "string"}}}, "_backend", "xgrammar", "_backend_was_auto", true}},
		{"json_object", `"response_format": {"type": "json_object"}`, []any{"json_object", true, "_backend", "xgrammar", "_backend_was_auto", true}},
		{"structured_outputs", `"structured_outputs": {"regex": "[a-z]+"}`, []any{"regex", "[a-z]+", "_backend", "xgrammar", "_backend_was_auto", true}},
		{"guided_choice", `"guided_choice": ["yes", "no"]`, []any{"choice", []any{"yes", "no"}, "_backend", "xgrammar", "_backend_was_auto", true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := postPath(t, ts, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1, `+tc.fields+`}`)
			if code != 200 {
				t.Fatalf("%d %s", code, body)
			}
			add := testwait.Recv(t, f.Adds, "the ADD")
			dec := msgpack.NewDecoder(bytes.NewReader(add.Sampling.StructuredOutputs))
			n, err := dec.DecodeMapLen()
			if err != nil || n*2 != len(tc.want) {
				t.Fatalf("map of %d (%v), want %d keys", n, err, len(tc.want)/2)
			}
			for i := range n {
				k, _ := dec.DecodeString()
				v, err := dec.DecodeInterface()
				if err != nil || k != tc.want[2*i] || fmt.Sprint(normalise(v)) != fmt.Sprint(tc.want[2*i+1]) {
					t.Errorf("entry %d: %q = %#v, want %q = %#v", i, k, v, tc.want[2*i], tc.want[2*i+1])
				}
			}
			if tc.name == "json_schema" {
				// The schema's properties keep the client's order (b before a).
				if !bytes.Contains(add.Sampling.StructuredOutputs, []byte("\xa1b")) ||
					bytes.Index(add.Sampling.StructuredOutputs, []byte("\xa1b")) > bytes.Index(add.Sampling.StructuredOutputs, []byte("\xa1a\x81")) {
					t.Errorf("properties out of order: %q", add.Sampling.StructuredOutputs)
				}
			}
		})
	}
	code, body := postPath(t, ts, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}}`)
	if code != 400 || !strings.Contains(string(body), "response_format") {
		t.Fatalf("bad response_format: %d %s", code, body)
	}
}

// normalise turns msgpack's decoded ints into int64 for comparison.
func normalise(v any) any {
	switch x := v.(type) {
	case int8:
		return int64(x)
	case uint8:
		return int64(x)
	case map[string]any:
		for k, e := range x {
			x[k] = normalise(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalise(e)
		}
	}
	return v
}

func TestContinueFinal(t *testing.T) {
	for _, tc := range []struct {
		rendered, final, want string
		ok                    bool
	}{
		{"<|user|>hi\n<|assistant|>The answer is<|end|>\n", "The answer is", "<|user|>hi\n<|assistant|>The answer is", true},
		{"<|assistant|>Sure. <|end|>", "Sure. ", "<|assistant|>Sure. ", true},
		{"<|assistant|>Sure.<|end|>", "Sure.  ", "<|assistant|>Sure.", true}, // trailing space trimmed by the template
		{"<|assistant|>other<|end|>", "missing", "", false},
	} {
		got, err := continueFinal(tc.rendered, []map[string]any{{"role": "assistant", "content": tc.final}})
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: got %q %v, want %q", tc.final, got, err, tc.want)
		}
	}
}

func TestChatContentFormats(t *testing.T) {
	c := &ChatRequest{Messages: json.RawMessage(`[{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}, {"role": "assistant", "content": "c", "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}]`)}
	in, err := c.chatInput("string")
	if err != nil || in.Messages[0]["content"] != "a\nb" || in.Messages[1]["content"] != "c" {
		t.Fatalf("string format: %v %+v", err, in.Messages)
	}
	call := in.Messages[1]["tool_calls"].([]any)[0].(*chattemplate.Object)
	fn, _ := call.Get("function")
	args, _ := fn.(*chattemplate.Object).Get("arguments")
	if x, _ := args.(*chattemplate.Object).Get("x"); x != int64(1) {
		t.Errorf("tool call arguments not parsed: %#v", args)
	}
	in, err = c.chatInput("openai")
	if err != nil {
		t.Fatal(err)
	}
	if parts := in.Messages[1]["content"].([]any); len(parts) != 1 {
		t.Fatalf("openai format: %+v", in.Messages[1])
	}
	c = &ChatRequest{Messages: json.RawMessage(`[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]`)}
	if _, err := c.chatInput("string"); err == nil || !strings.Contains(err.Error(), "multimodal") || !strings.Contains(err.Error(), "image_url") {
		t.Errorf("image part: %v", err)
	}
}

// TestTextGenerationDefaults: generation_config.json's defaults fill what a request
// leaves out; what it sets wins.
func TestTextGenerationDefaults(t *testing.T) {
	f := newFakeCore(t, 1)
	reg := prometheus.NewRegistry()
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}, Registerer: reg,
		Text: &Text{Name: "tiny", MaxModelLen: 4096, Tokenizer: &fakeTextTok{}, Template: fakeTemplate{format: "string"},
			DefaultSampling: map[string]float64{"temperature": 0.6, "top_k": 20, "max_tokens": 8}}})
	ts := httptest.NewServer(api.Handler())
	defer ts.Close()
	if code, body := postPath(t, ts, "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "top_k": 5}`); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	add := testwait.Recv(t, f.Adds, "the ADD")
	if sp := add.Sampling; sp.Temperature != 0.6 || sp.TopK != 5 || sp.MaxTokens.Value != 8 {
		t.Fatalf("temperature %v top_k %d max_tokens %d", sp.Temperature, sp.TopK, sp.MaxTokens.Value)
	}
	if code, body := postPath(t, ts, "/v1/completions", `{"prompt": "x", "temperature": 0}`); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	add = testwait.Recv(t, f.Adds, "the second ADD")
	if sp := add.Sampling; sp.Temperature != 0 || sp.MaxTokens.Value != 8 {
		t.Fatalf("completions: temperature %v max_tokens %d", sp.Temperature, sp.MaxTokens.Value)
	}
}
