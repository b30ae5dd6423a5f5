package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/reasoning"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/internal/toolcall"
)

// The fake engine answers tokens 100, 101, ... (finish "length" at max_tokens);
// the pieces below make those tokens a model's tool-call or reasoning answer.

const toolsField = `"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]`

var hermesPieces = map[int64]string{
	100: "Let me check.\n", 101: "<tool_call>", 102: "\n{\"name\": \"get_weather\", ", 103: "\"arguments\": {\"city\": ",
	104: "\"Paris\"}}\n", 105: "</tool_call>", 106: "<tool_call>", 107: "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n",
	108: "</tool_call>",
}

var thinkPieces = map[int64]string{100: "<think>", 101: "The user wants", 102: " a greeting.", 103: "</think>", 104: "Hello!"}

// newParsingAPI is newTextAPI with serve's parser flags.
func newParsingAPI(t *testing.T, pieces map[int64]string, auto bool, toolParser, reasoningParser string) (*fakeEngines, *httptest.Server) {
	t.Helper()
	f := newFakeCore(t, 1)
	reg := prometheus.NewRegistry()
	text := &Text{Name: "tiny", Root: "/models/tiny", MaxModelLen: 4096, Tokenizer: &fakeTextTok{pieces: pieces},
		Template: fakeTemplate{format: "string"}}
	if err := text.SetParsers(auto, toolParser, reasoningParser); err != nil {
		t.Fatal(err)
	}
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

type parsedAnswer struct {
	Choices []struct {
		Message struct {
			Content   *string    `json:"content"`
			Reasoning *string    `json:"reasoning"`
			ToolCalls []ToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// folded is a streamed answer put together: content, reasoning, each call's
// name and arguments, the finish_reason, and the raw chunks.
type folded struct {
	content, reasoning, finish string
	names, args                map[int]string
	ids                        map[int]string
}

func foldStream(t *testing.T, body []byte) folded {
	t.Helper()
	f := folded{names: map[int]string{}, args: map[int]string{}, ids: map[int]string{}}
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c ChatChunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if strings.Contains(data, `"reasoning_content"`) {
			t.Fatalf("reasoning_content is vLLM's old name: %s", data)
		}
		for _, ch := range c.Choices {
			d := ch.Delta
			if d.Content != nil {
				f.content += *d.Content
			}
			if d.Reasoning != nil {
				f.reasoning += *d.Reasoning
			}
			for _, tc := range d.ToolCalls {
				if tc.ID != "" {
					if _, dup := f.ids[tc.Index]; dup || tc.Type != "function" || tc.Function == nil || tc.Function.Name == "" {
						t.Fatalf("first delta of call %d: %s", tc.Index, data)
					}
					f.ids[tc.Index] = tc.ID
				}
				if tc.Function != nil {
					f.names[tc.Index] += tc.Function.Name
					if tc.Function.Arguments != nil {
						f.args[tc.Index] += *tc.Function.Arguments
					}
				}
			}
			if ch.FinishReason != nil {
				f.finish = *ch.FinishReason
			}
		}
	}
	return f
}

func chatBody(maxTokens string, fields ...string) string {
	b := `{"messages": [{"role": "user", "content": "weather?"}], "max_tokens": ` + maxTokens
	for _, f := range fields {
		b += ", " + f
	}
	return b + "}"
}

func TestChatToolCallsHermes(t *testing.T) {
	_, ts := newParsingAPI(t, hermesPieces, true, "hermes", "")
	code, body := postPath(t, ts, "/v1/chat/completions", chatBody("6", toolsField))
	var a parsedAnswer
	if err := json.Unmarshal(body, &a); err != nil || code != 200 || len(a.Choices) != 1 {
		t.Fatalf("%d %s", code, body)
	}
	m := a.Choices[0].Message
	if a.Choices[0].FinishReason != "tool_calls" || m.Content == nil || *m.Content != "Let me check.\n" || len(m.ToolCalls) != 1 ||
		m.ToolCalls[0].Function.Name != "get_weather" || m.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` ||
		m.ToolCalls[0].Type != "function" || !strings.HasPrefix(m.ToolCalls[0].ID, "chatcmpl-tool-") || m.Reasoning != nil {
		t.Fatalf("answer %s", body)
	}
	if bytes.Contains(body, []byte("reasoning_content")) {
		t.Fatalf("reasoning_content is vLLM's old name: %s", body)
	}
	code, body = postPath(t, ts, "/v1/chat/completions", chatBody("6", toolsField, `"stream": true`))
	f := foldStream(t, body)
	if code != 200 || f.finish != "tool_calls" || f.content != "Let me check.\n" || f.names[0] != "get_weather" || f.args[0] != `{"city": "Paris"}` {
		t.Fatalf("stream %+v\n%s", f, body)
	}
}

func TestChatToolCallsParallelFalse(t *testing.T) {
	_, ts := newParsingAPI(t, hermesPieces, true, "hermes", "")
	for _, parallel := range []string{"true", "false"} {
		want := 2
		if parallel == "false" {
			want = 1
		}
		code, body := postPath(t, ts, "/v1/chat/completions", chatBody("9", toolsField, `"parallel_tool_calls": `+parallel))
		var a parsedAnswer
		if json.Unmarshal(body, &a); code != 200 || len(a.Choices[0].Message.ToolCalls) != want {
			t.Fatalf("parallel %s: %d %s", parallel, code, body)
		}
		_, body = postPath(t, ts, "/v1/chat/completions", chatBody("9", toolsField, `"parallel_tool_calls": `+parallel, `"stream": true`))
		if f := foldStream(t, body); len(f.names) != want || f.args[want-1] == "" {
			t.Fatalf("parallel %s stream %+v\n%s", parallel, f, body)
		}
	}
}

// TestChatToolChoiceNone: "none" parses nothing, the answer is the text.
func TestChatToolChoiceNone(t *testing.T) {
	_, ts := newParsingAPI(t, hermesPieces, true, "hermes", "")
	code, body := postPath(t, ts, "/v1/chat/completions", chatBody("6", toolsField, `"tool_choice": "none"`))
	var a parsedAnswer
	if json.Unmarshal(body, &a); code != 200 || len(a.Choices[0].Message.ToolCalls) != 0 ||
		!strings.Contains(*a.Choices[0].Message.Content, "<tool_call>") || a.Choices[0].FinishReason != "length" {
		t.Fatalf("%d %s", code, body)
	}
}

func TestChatReasoningQwen3(t *testing.T) {
	_, ts := newParsingAPI(t, thinkPieces, false, "", "qwen3")
	code, body := postPath(t, ts, "/v1/chat/completions", chatBody("5", `"n": 2`))
	var a parsedAnswer
	if err := json.Unmarshal(body, &a); err != nil || code != 200 || len(a.Choices) != 2 {
		t.Fatalf("%d %s", code, body)
	}
	for _, c := range a.Choices {
		if c.Message.Reasoning == nil || *c.Message.Reasoning != "The user wants a greeting." || *c.Message.Content != "Hello!" || c.FinishReason != "length" {
			t.Fatalf("answer %s", body)
		}
	}
	code, body = postPath(t, ts, "/v1/chat/completions", chatBody("5", `"stream": true`))
	if f := foldStream(t, body); code != 200 || f.reasoning != "The user wants a greeting." || f.content != "Hello!" || f.finish != "length" {
		t.Fatalf("stream %+v\n%s", f, body)
	}
	// include_reasoning false drops the reasoning, whole and streamed.
	_, body = postPath(t, ts, "/v1/chat/completions", chatBody("5", `"include_reasoning": false`))
	if json.Unmarshal(body, &a); a.Choices[0].Message.Reasoning != nil || *a.Choices[0].Message.Content != "Hello!" {
		t.Fatalf("include_reasoning false: %s", body)
	}
	_, body = postPath(t, ts, "/v1/chat/completions", chatBody("5", `"include_reasoning": false`, `"stream": true`))
	if f := foldStream(t, body); f.reasoning != "" || f.content != "Hello!" {
		t.Fatalf("include_reasoning false stream %+v\n%s", f, body)
	}
}

// TestChatReasoningThenTools: the tool parser reads what follows the reasoning.
func TestChatReasoningThenTools(t *testing.T) {
	pieces := map[int64]string{100: "<think>", 101: "Need weather.", 102: "</think>", 103: "\n\n<tool_call>",
		104: "\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n", 105: "</tool_call>"}
	_, ts := newParsingAPI(t, pieces, true, "hermes", "qwen3")
	code, body := postPath(t, ts, "/v1/chat/completions", chatBody("6", toolsField))
	var a parsedAnswer
	if json.Unmarshal(body, &a); code != 200 || *a.Choices[0].Message.Reasoning != "Need weather." || len(a.Choices[0].Message.ToolCalls) != 1 ||
		a.Choices[0].Message.Content != nil || a.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("%d %s", code, body)
	}
	_, body = postPath(t, ts, "/v1/chat/completions", chatBody("6", toolsField, `"stream": true`))
	if f := foldStream(t, body); f.reasoning != "Need weather." || f.args[0] != `{"city": "Paris"}` || f.finish != "tool_calls" {
		t.Fatalf("stream %+v\n%s", f, body)
	}
}

// TestChatNamedToolChoice: the named function's parameters go to the engine as
// structured_outputs.json; the answer is read as its arguments.
func TestChatNamedToolChoice(t *testing.T) {
	f, ts := newParsingAPI(t, map[int64]string{100: `{"city": `, 101: `"Paris"}`}, true, "hermes", "")
	named := `"tool_choice": {"type": "function", "function": {"name": "get_weather"}}`
	code, body := postPath(t, ts, "/v1/chat/completions", chatBody("2", toolsField, named, `"response_format": {"type": "json_object"}`))
	var a parsedAnswer
	if json.Unmarshal(body, &a); code != 200 || *a.Choices[0].Message.Content != "" || len(a.Choices[0].Message.ToolCalls) != 1 ||
		a.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || a.Choices[0].FinishReason != "length" {
		t.Fatalf("%d %s", code, body)
	}
	add := testwait.Recv(t, f.Adds, "the ADD")
	var so map[string]any
	if err := msgpack.Unmarshal(add.Sampling.StructuredOutputs, &so); err != nil {
		t.Fatal(err)
	}
	schema, _ := so["json"].(map[string]any)
	if schema["type"] != "object" || so["json_object"] != nil || so["_backend"] != "xgrammar" {
		t.Fatalf("structured_outputs %v", so)
	}
	code, body = postPath(t, ts, "/v1/chat/completions", chatBody("2", toolsField, named, `"stream": true`))
	if st := foldStream(t, body); code != 200 || st.names[0] != "get_weather" || st.args[0] != `{"city": "Paris"}` || st.finish != "length" {
		t.Fatalf("stream %+v\n%s", st, body)
	}
}

func TestChatRequiredToolChoice(t *testing.T) {
	_, ts := newParsingAPI(t, map[int64]string{100: `[{"name": "get_weather", `, 101: `"parameters": {"city": "Paris"}}]`}, true, "hermes", "")
	code, body := postPath(t, ts, "/v1/chat/completions", chatBody("2", toolsField, `"tool_choice": "required"`))
	var a parsedAnswer
	if json.Unmarshal(body, &a); code != 200 || len(a.Choices[0].Message.ToolCalls) != 1 ||
		a.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || *a.Choices[0].Message.Content != "" {
		t.Fatalf("%d %s", code, body)
	}
	_, body = postPath(t, ts, "/v1/chat/completions", chatBody("2", toolsField, `"tool_choice": "required"`, `"stream": true`))
	if st := foldStream(t, body); st.names[0] != "get_weather" || st.finish != "tool_calls" {
		t.Fatalf("stream %+v\n%s", st, body)
	}
}

// TestChatToolChoiceErrors: vLLM's 400s for what the server cannot serve.
func TestChatToolChoiceErrors(t *testing.T) {
	_, plain := newTextAPI(t, nil)
	_, parsing := newParsingAPI(t, nil, true, "hermes", "")
	for _, tc := range []struct {
		ts   *httptest.Server
		body string
		want string
	}{
		{plain, chatBody("1", toolsField), `"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`},
		{plain, chatBody("1", toolsField, `"tool_choice": "required"`), `tool_choice=\"required\" requires --tool-call-parser to be set`},
		{parsing, chatBody("1", `"tool_choice": "required"`), "When using `tool_choice`, `tools` must be set."},
		{parsing, chatBody("1", `"tools": []`), "`tools` must not be an empty array."},
	} {
		code, body := postPath(t, tc.ts, "/v1/chat/completions", tc.body)
		if code != 400 || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %d %s", tc.body, code, body)
		}
	}
	// tool_choice "none" needs no parser.
	if code, body := postPath(t, plain, "/v1/chat/completions", chatBody("1", toolsField, `"tool_choice": "none"`)); code != 200 {
		t.Errorf("none: %d %s", code, body)
	}
}

func TestSetParsersRefusesUnknown(t *testing.T) {
	var none *Text
	if err := none.SetParsers(false, "x", ""); err == nil || !strings.Contains(err.Error(), "hermes, ") {
		t.Errorf("unknown tool parser: %v", err)
	}
	if err := none.SetParsers(false, "", "x"); err == nil || !strings.Contains(err.Error(), "qwen3") {
		t.Errorf("unknown reasoning parser: %v", err)
	}
	if err := none.SetParsers(true, "", ""); err == nil || !strings.Contains(err.Error(), "requires --tool-call-parser") {
		t.Errorf("auto without parser: %v", err)
	}
	if err := none.SetParsers(true, "llama3_json", "deepseek_r1"); err != nil {
		t.Error(err)
	}
}

// TestChatHarmony: with --tool-call-parser openai (gpt-oss) the analysis channel
// is the reasoning and a commentary call to functions.NAME a tool call, whole
// and streamed; without tools the answer is still read as harmony.
func TestChatHarmony(t *testing.T) {
	pieces := map[int64]string{100: "<|channel|>", 101: "analysis", 102: "<|message|>", 103: "Need weather.", 104: "<|end|>",
		105: "<|start|>", 106: "assistant", 107: "<|channel|>", 108: "commentary to=functions.get_weather", 109: " <|constrain|>", 110: "json",
		111: "<|message|>", 112: `{"city": "Paris"}`, 113: "<|call|>"}
	_, ts := newParsingAPI(t, pieces, true, "openai", "")
	code, body := postPath(t, ts, "/v1/chat/completions", chatBody("14", toolsField))
	var a parsedAnswer
	if json.Unmarshal(body, &a); code != 200 || a.Choices[0].Message.Reasoning == nil || *a.Choices[0].Message.Reasoning != "Need weather." ||
		len(a.Choices[0].Message.ToolCalls) != 1 || a.Choices[0].Message.ToolCalls[0].Function.Name != "get_weather" || a.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("%d %s", code, body)
	}
	_, body = postPath(t, ts, "/v1/chat/completions", chatBody("14", toolsField, `"stream": true`))
	if f := foldStream(t, body); f.reasoning != "Need weather." || f.names[0] != "get_weather" || f.args[0] != `{"city": "Paris"}` || f.finish != "tool_calls" {
		t.Fatalf("stream %+v\n%s", f, body)
	}
	final := map[int64]string{100: "<|channel|>", 101: "analysis", 102: "<|message|>", 103: "Hmm.", 104: "<|end|>", 105: "<|start|>",
		106: "assistant", 107: "<|channel|>", 108: "final", 109: "<|message|>", 110: "Hi!"}
	_, ts = newParsingAPI(t, final, false, "openai", "")
	_, body = postPath(t, ts, "/v1/chat/completions", chatBody("11"))
	if json.Unmarshal(body, &a); *a.Choices[0].Message.Reasoning != "Hmm." || *a.Choices[0].Message.Content != "Hi!" {
		t.Fatalf("no tools: %s", body)
	}
}

// benchTokens cuts an answer into token-sized pieces, markers whole.
func benchTokens(text string) []string {
	var out []string
	for len(text) > 0 {
		n := min(4, len(text))
		for _, m := range []string{"<think>", "</think>", "<tool_call>", "</tool_call>"} {
			if strings.HasPrefix(text, m) {
				n = len(m)
			} else if i := strings.Index(text[:n], m[:1]); i > 0 {
				n = i
			}
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// benchParse is the serving layer's per-token cost of the parsers: one choice
// streamed token by token through chatParse.feed, the delta built as sent.
func benchParse(b *testing.B, p *chatParse, text string) {
	toks := benchTokens(text)
	b.ReportAllocs()
	for b.Loop() {
		st := p.newStream()
		for _, tok := range toks {
			p.feed(st, delta{text: tok, ids: []int64{1}})
		}
		fr := "stop"
		p.feed(st, delta{ids: []int64{2}, finish: &fr, finished: true})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(toks)+1)), "ns/token")
}

var benchAnswer = `Let me look.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "note": "` +
	strings.Repeat("lorem ipsum dolor sit amet ", 40) + `"}}</tool_call>`

func BenchmarkChatParseHermes(b *testing.B) {
	hermes, _ := toolcall.Lookup("hermes")
	benchParse(b, &chatParse{auto: hermes, tools: requestTools(json.RawMessage(`[` + toolsField[len(`"tools": [`):]))}, benchAnswer)
}

func BenchmarkChatParseQwen3ReasoningHermes(b *testing.B) {
	hermes, _ := toolcall.Lookup("hermes")
	r, _ := reasoning.Lookup("qwen3", reasoning.Options{})
	p := &chatParse{auto: hermes, reasoner: r, tools: requestTools(json.RawMessage(`[` + toolsField[len(`"tools": [`):]))}
	benchParse(b, p, "<think>"+strings.Repeat("The user wants the weather. ", 20)+"</think>\n\n"+benchAnswer)
}

func BenchmarkChatParseQwen3Reasoning(b *testing.B) {
	r, _ := reasoning.Lookup("qwen3", reasoning.Options{})
	benchParse(b, &chatParse{reasoner: r}, "<think>"+strings.Repeat("The user wants a greeting. ", 20)+"</think>\n\n"+strings.Repeat("Hello there! ", 40))
}

// BenchmarkHermesStreamBare is the parser alone on benchAnswer's tokens: the
// floor BenchmarkChatParseHermes adds the serving layer's delta building to.
func BenchmarkHermesStreamBare(b *testing.B) {
	hermes, _ := toolcall.Lookup("hermes")
	toks := benchTokens(benchAnswer)
	tools := requestTools(json.RawMessage(`[` + toolsField[len(`"tools": [`):]))
	for b.Loop() {
		st := hermes.NewStream(tools, nil)
		for _, tok := range toks {
			st.Feed(tok, 1)
		}
		st.Finish(st.Feed("", 1))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(toks)+1)), "ns/token")
}
