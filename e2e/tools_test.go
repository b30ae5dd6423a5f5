package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/internal/tokenizer"
)

// Tool calls and reasoning end to end: the mock engine is scripted (serve
// --mock-engine-script) to "write" a real model's answer, tokenized with that
// model's tokenizer, when the user message holds a scenario's trigger word; the
// frontend must then parse it as vLLM's OpenAI server does.
//
// Without the parser flags the scripted answer arrives verbatim (the
// scaffolding test); with them it is parsed (TestToolCallsParsed).

// wantCall is one expected tool call: the name and the arguments text.
type wantCall struct{ Name, Args string }

// toolScenario is one scripted model answer and what vLLM's server makes of it.
type toolScenario struct {
	name      string
	model     string // tokenizer directory under the models cache
	parser    string // --tool-call-parser
	reasoning string // --reasoning-parser
	trigger   string // a word of the user message that selects the answer
	answer    string // the text the "model" writes
	// toolChoice is the request's tool_choice; empty leaves it out.
	toolChoice string
	// What the non-streamed answer holds.
	calls []wantCall
	// streamedArgs, when set, is what the last call's streamed arguments
	// fold to in vLLM where that is not the whole answer's arguments.
	streamedArgs string
	content      *string // nil: null
	reasoned     *string // nil: absent or null
	finish       string
}

func strPtr(s string) *string { return &s }

// weatherTool is the tools list every scenario offers.
const weatherTool = `[{"type": "function", "function": {"name": "get_weather", "description": "Current weather of a city",` +
	` "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`

var toolScenarios = []toolScenario{
	{
		name: "hermes", model: "qwen3", parser: "hermes", trigger: "zqxhermes",
		answer: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		calls:  []wantCall{{"get_weather", `{"city": "Paris"}`}}, finish: "tool_calls",
	},
	{
		name: "hermes with text before", model: "qwen3", parser: "hermes", trigger: "zqxhermestext",
		answer:  "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		calls:   []wantCall{{"get_weather", `{"city": "Paris"}`}},
		content: strPtr("Let me check.\n"), finish: "tool_calls",
	},
	{
		name: "llama3_json", model: "llama3_1", parser: "llama3_json", trigger: "zqxllama",
		answer: `{"name": "get_weather", "parameters": {"city": "Paris"}}`,
		calls:  []wantCall{{"get_weather", `{"city": "Paris"}`}}, finish: "tool_calls",
	},
	{
		name: "deepseek_v3", model: "deepseek_v3", parser: "deepseek_v3", trigger: "zqxdeepseek",
		answer: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		calls:  []wantCall{{"get_weather", `{"city": "Paris"}`}}, finish: "tool_calls",
	},
	{
		name: "deepseek_v31", model: "deepseek_v3", parser: "deepseek_v31", trigger: "zqxvthreeone",
		answer: "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		calls:  []wantCall{{"get_weather", `{"city": "Paris"}`}}, finish: "tool_calls",
	},
	{
		name: "pythonic", model: "llama3_1", parser: "pythonic", trigger: "zqxpython",
		answer: `[get_weather(city="Paris")]`,
		calls:  []wantCall{{"get_weather", `{"city": "Paris"}`}}, finish: "tool_calls",
		// `")]` is one token, so the last delta carries argument text and
		// vLLM's end-of-stream repair replaces it with pythonic's
		// placeholder "{}" (internal/toolcall/README.md).
		streamedArgs: `{"city": "Paris{}`,
	},
	{
		name: "qwen3_coder", model: "qwen3", parser: "qwen3_coder", trigger: "zqxcoder",
		answer: "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
		calls:  []wantCall{{"get_weather", `{"city": "Paris"}`}}, finish: "tool_calls",
	},
	{
		// gpt-oss: harmony, the analysis channel is the reasoning.
		name: "gpt-oss", model: "gptoss", parser: "openai", trigger: "zqxharmony",
		answer: "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather" +
			" <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>",
		calls: []wantCall{{"get_weather", `{"city": "Paris"}`}}, reasoned: strPtr("Need the weather."), finish: "tool_calls",
	},
	{
		name: "qwen3 reasoning", model: "qwen3", reasoning: "qwen3", trigger: "zqxthink",
		answer:   "<think>The user wants a greeting.</think>Hello!",
		reasoned: strPtr("The user wants a greeting."), content: strPtr("Hello!"), finish: "stop",
	},
	{
		// A named function: the whole answer is the arguments, content is
		// "" and finish_reason stays the engine's.
		name: "named tool_choice", model: "qwen3", parser: "hermes", trigger: "zqxnamed",
		toolChoice: `{"type": "function", "function": {"name": "get_weather"}}`,
		answer:     `{"city": "Paris"}`,
		calls:      []wantCall{{"get_weather", `{"city": "Paris"}`}}, content: strPtr(""), finish: "stop",
	},
	{
		name: "required tool_choice", model: "qwen3", parser: "hermes", trigger: "zqxrequired",
		toolChoice: `"required"`,
		answer:     `[{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_weather", "parameters": {"city": "Rome"}}]`,
		calls:      []wantCall{{"get_weather", `{"city": "Paris"}`}, {"get_weather", `{"city": "Rome"}`}}, content: strPtr(""), finish: "tool_calls",
	},
}

// message is the user message that triggers sc: the trigger word with a
// space before it, so it is the same tokens wherever the template puts it.
func (sc toolScenario) message() string { return "Please answer " + sc.trigger + " now." }

// scenarioRule tokenizes sc with its model's tokenizer: the trigger as it
// appears inside message(), the answer as the model would write it.
func scenarioRule(t *testing.T, tok *tokenizer.Tokenizer, sc toolScenario) mockengine.ScriptRule {
	t.Helper()
	trigger := tok.Encode(" "+sc.trigger, false)
	if msg := tok.Encode(sc.message(), false); !containsIDs(msg, trigger) {
		t.Fatalf("%s: trigger %v is not in the message's tokens %v", sc.name, trigger, msg)
	}
	answer := tok.Encode(sc.answer, false)
	if got := tok.Decode(answer, false); got != sc.answer {
		t.Fatalf("%s: answer does not round-trip: %q", sc.name, got)
	}
	return mockengine.ScriptRule{Trigger: trigger, Tokens: answer, Finish: "stop"}
}

func containsIDs(s, sub []int64) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if slicesEqual(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// writeScript writes the script of every scenario of model and returns its
// path and the model's tokenizer directory.
func writeScript(t *testing.T, model string) (path, dir string) {
	t.Helper()
	dir = modelDir(t, model)
	tok, err := tokenizer.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var s mockengine.Script
	for _, sc := range toolScenarios {
		if sc.model == model {
			s.Rules = append(s.Rules, scenarioRule(t, tok, sc))
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), model+"-script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

// scriptedServer is serve --tokenizer MODEL with one built-in mock engine
// scripted for the model's scenarios, 3 tokens per step so deltas hold
// several tokens; extra are more serve flags (the parsers).
func scriptedServer(t *testing.T, model string, extra ...string) *server {
	t.Helper()
	path, dir := writeScript(t, model)
	args := append([]string{"--tokenizer", dir, "--mock-engines", "1", "--mock-engine-script", path,
		"--tokens-per-step", "3"}, extra...)
	return startServe(t, args...)
}

// serveHasFlags reports whether serve knows every flag (the integration of
// the parsers adds them).
func serveHasFlags(t *testing.T, flags ...string) bool {
	t.Helper()
	out, _ := testwait.Command(t, 30*time.Second, binary, "serve", "--help").CombinedOutput()
	for _, f := range flags {
		if !strings.Contains(string(out), f) {
			return false
		}
	}
	return true
}

func (sc toolScenario) request(stream bool) string {
	body := `{"messages": [{"role": "user", "content": ` + jsonString(sc.message()) + `}], "max_tokens": 200`
	if sc.parser != "" {
		body += `, "tools": ` + weatherTool
	}
	if sc.toolChoice != "" {
		body += `, "tool_choice": ` + sc.toolChoice
	}
	if stream {
		body += `, "stream": true`
	}
	return body + "}"
}

// TestToolScriptScaffold runs now: without parsers the scripted answer comes
// back verbatim, whole and streamed, so the script, the serve flag and the
// tokenizers agree.
func TestToolScriptScaffold(t *testing.T) {
	if !serveHasFlags(t, "--mock-engine-script") {
		t.Fatal("serve lacks --mock-engine-script")
	}
	for _, model := range []string{"qwen3", "llama3_1", "deepseek_v3"} {
		t.Run(model, func(t *testing.T) {
			s := scriptedServer(t, model)
			for _, sc := range toolScenarios {
				if sc.model != model || sc.toolChoice != "" {
					continue
				}
				body := `{"messages": [{"role": "user", "content": ` + jsonString(sc.message()) + `}], "max_tokens": 200, "skip_special_tokens": false}`
				code, b := s.postJSON(t, "/v1/chat/completions", body)
				a := decodeAnswer(t, b)
				if code != 200 || len(a.Choices) != 1 || a.Choices[0].Message == nil ||
					!strings.HasPrefix(a.Choices[0].Message.Content, sc.answer) || *a.Choices[0].FinishReason != "stop" {
					t.Fatalf("%s: %d %s", sc.name, code, b)
				}
				code, b = s.postJSON(t, "/v1/chat/completions", strings.TrimSuffix(body, "}")+`, "stream": true}`)
				text, finish, _, _, _, done := streamText(t, b, true)
				if code != 200 || !strings.HasPrefix(text[0], sc.answer) || finish[0] != "stop" || !done || len(sse(b)) < 4 {
					t.Fatalf("%s stream: %d %q %v\n%s", sc.name, code, text[0], finish, b)
				}
			}
		})
	}
}

// toolAnswer is the part of a chat answer the parsers fill.
type toolAnswer struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// TestToolCallsParsed checks every scenario's complete answer against what
// vLLM's server returns for it.
func TestToolCallsParsed(t *testing.T) {
	if !serveHasFlags(t, "--tool-call-parser", "--reasoning-parser", "--enable-auto-tool-choice") {
		t.Fatal("serve lacks --tool-call-parser/--reasoning-parser/--enable-auto-tool-choice")
	}
	for _, sc := range toolScenarios {
		t.Run(sc.name, func(t *testing.T) {
			var flags []string
			if sc.parser != "" {
				flags = append(flags, "--tool-call-parser", sc.parser, "--enable-auto-tool-choice")
			}
			if sc.reasoning != "" {
				flags = append(flags, "--reasoning-parser", sc.reasoning)
			}
			if sc.model == "gptoss" {
				// One token per step: with several, vLLM's harmony streaming can
				// give a call's last fragment the next call's index (reproduced,
				// internal/toolcall/README.md).
				flags = append(flags, "--chat-template", harmonyTemplate(t), "--tokens-per-step", "1")
			}
			s := scriptedServer(t, sc.model, flags...)
			code, b := s.postJSON(t, "/v1/chat/completions", sc.request(false))
			var a toolAnswer
			if err := json.Unmarshal(b, &a); err != nil || code != 200 || len(a.Choices) != 1 {
				t.Fatalf("%d %s", code, b)
			}
			checkToolAnswer(t, sc, a, b)
			code, b = s.postJSON(t, "/v1/chat/completions", sc.request(true))
			if code != 200 {
				t.Fatalf("stream: %d %s", code, b)
			}
			checkToolStream(t, sc, b)
		})
	}
}

// harmonyTemplate writes a small harmony chat template: the cached gpt-oss
// tokenizer files carry none, and the parsing only needs the prompt to hold
// the trigger.
func harmonyTemplate(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "harmony.jinja")
	src := "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}<|start|>assistant"
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func checkToolAnswer(t *testing.T, sc toolScenario, a toolAnswer, raw []byte) {
	t.Helper()
	c := a.Choices[0]
	m := c.Message
	if c.FinishReason != sc.finish || len(m.ToolCalls) != len(sc.calls) || !sameStrPtr(m.Content, sc.content) {
		t.Fatalf("answer %s", raw)
	}
	for i, w := range sc.calls {
		tc := m.ToolCalls[i]
		if tc.Type != "function" || !strings.HasPrefix(tc.ID, "chatcmpl-tool-") || tc.Function.Name != w.Name || tc.Function.Arguments != w.Args {
			t.Fatalf("call %d: %s", i, raw)
		}
	}
	if sc.reasoned != nil {
		r := m.Reasoning
		if r == nil {
			r = m.ReasoningContent
		}
		if !sameStrPtr(r, sc.reasoned) {
			t.Fatalf("reasoning: %s", raw)
		}
	}
}

func sameStrPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// checkToolStream folds the streamed deltas: each call's name once, its
// arguments the concatenated fragments, and the finish_reason.
func checkToolStream(t *testing.T, sc toolScenario, body []byte) {
	t.Helper()
	names := map[int]string{}
	args := map[int]string{}
	var content, reasoning, finish string
	for _, e := range sse(body) {
		if e == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					Reasoning *string `json:"reasoning"`
					RC        *string `json:"reasoning_content"`
					ToolCalls []struct {
						Index    int `json:"index"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &ch); err != nil || len(ch.Choices) == 0 {
			continue // the usage chunk
		}
		d := ch.Choices[0].Delta
		if d.Content != nil {
			content += *d.Content
		}
		if d.Reasoning != nil {
			reasoning += *d.Reasoning
		} else if d.RC != nil {
			reasoning += *d.RC
		}
		for _, tc := range d.ToolCalls {
			names[tc.Index] += tc.Function.Name
			args[tc.Index] += tc.Function.Arguments
		}
		if f := ch.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	if finish != sc.finish || len(names) != len(sc.calls) {
		t.Fatalf("stream: finish %q, calls %v\n%s", finish, names, body)
	}
	for i, w := range sc.calls {
		if sc.streamedArgs != "" && i == len(sc.calls)-1 {
			w.Args = sc.streamedArgs
			if names[i] != w.Name || args[i] != w.Args {
				t.Fatalf("stream call %d: %q %q\n%s", i, names[i], args[i], body)
			}
			continue
		}
		var got, want any
		if names[i] != w.Name || json.Unmarshal([]byte(args[i]), &got) != nil || json.Unmarshal([]byte(w.Args), &want) != nil || !jsonEqual(got, want) {
			t.Fatalf("stream call %d: %q %q\n%s", i, names[i], args[i], body)
		}
	}
	if sc.reasoned != nil && reasoning != *sc.reasoned {
		t.Fatalf("stream reasoning %q\n%s", reasoning, body)
	}
	if len(sc.calls) == 0 && sc.content != nil && content != *sc.content {
		t.Fatalf("stream content %q\n%s", content, body)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestToolParserFlagsRefused: an unknown parser name, or auto tool choice
// without a parser, stops serve at start, naming what it knows.
func TestToolParserFlagsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tool-call-parser", "nope"}, "hermes, llama3_json"},
		{[]string{"--reasoning-parser", "nope"}, "deepseek_r1"},
		{[]string{"--enable-auto-tool-choice"}, "--enable-auto-tool-choice requires --tool-call-parser"},
	} {
		args := append([]string{"serve", "--http-address", "127.0.0.1:0", "--client-address", "tcp://127.0.0.1:0"}, tc.args...)
		out, err := testwait.Command(t, testwait.Deadline, binary, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: %v\n%s", tc.args, err, out)
		}
	}
}
