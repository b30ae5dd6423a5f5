package reasoning

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func sp(s string) *string { return &s }

func show(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return "\"" + *p + "\""
}

// tokens splits like a tokenizer: markers whole, words with a leading
// space, other characters alone.
func tokens(s string) []string {
	var out []string
	for len(s) > 0 {
		n := 0
		for _, m := range []string{thinkStart, thinkEnd, toolCallStart, toolCallEnd} {
			if strings.HasPrefix(s, m) {
				n = len(m)
			}
		}
		if n == 0 {
			r, k := utf8.DecodeRuneInString(s)
			n = k
			if r == ' ' || unicode.IsLetter(r) {
				for n < len(s) {
					r2, m := utf8.DecodeRuneInString(s[n:])
					if !unicode.IsLetter(r2) {
						break
					}
					n += m
				}
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// reconstruct joins stream deltas as vLLM's test reconstructor does.
func reconstruct(t *testing.T, st Stream, deltas []string) (reasoning, content *string) {
	t.Helper()
	for _, d := range deltas {
		m, _ := st.Feed(d)
		if m == nil {
			continue
		}
		if m.Content != nil && m.Reasoning != nil {
			t.Fatalf("delta %q has both reasoning and content", d)
		}
		if m.Content != nil {
			content = join(content, *m.Content)
		} else {
			reasoning = join(reasoning, *m.Reasoning)
		}
	}
	if content != nil && *content == "" {
		content = nil
	}
	return reasoning, content
}

func join(p *string, s string) *string {
	if p == nil {
		return &s
	}
	v := *p + s
	return &v
}

type splitCase struct {
	name      string
	stream    bool
	in        string
	wReason   *string
	wContent  *string
	wPromptOK bool
}

func runCases(t *testing.T, p Parser, cases []splitCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var r, c *string
			if tt.stream {
				r, c = reconstruct(t, p.NewStream(), tokens(tt.in))
			} else {
				r, c = p.Split(tt.in)
			}
			if show(r) != show(tt.wReason) || show(c) != show(tt.wContent) {
				t.Fatalf("got (%s, %s), want (%s, %s)", show(r), show(c), show(tt.wReason), show(tt.wContent))
			}
		})
	}
}

func TestDeepSeekR1(t *testing.T) {
	p, _ := Lookup("deepseek_r1", Options{})
	runCases(t, p, []splitCase{
		{"simple", false, "This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"simple stream", true, "This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"complete", false, "This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"complete stream", true, "This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"no content", false, "This is content", sp("This is content"), nil, false},
		{"no reasoning token stream", true, "This is a reasoning section", sp("This is a reasoning section"), nil, false},
		{"multiple lines", false, "This\nThat</think>This is the rest\nThat", sp("This\nThat"), sp("This is the rest\nThat"), true},
		{"multiple lines stream", true, "This\nThat</think>This is the rest\nThat", sp("This\nThat"), sp("This is the rest\nThat"), true},
		{"shortest stream", true, "</think>This is the rest", nil, sp("This is the rest"), true},
		{"shortest", false, "</think>This is the rest", sp(""), sp("This is the rest"), true},
		{"with think", false, "<think>This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"with think stream", true, "<think>This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"complete with think", false, "<think>This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"complete with think stream", true, "<think>This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"multiple lines with think", false, "<think>This\nThat</think>This is the rest\nThat", sp("This\nThat"), sp("This is the rest\nThat"), true},
		{"multiple lines with think stream", true, "<think>This\nThat</think>This is the rest\nThat", sp("This\nThat"), sp("This is the rest\nThat"), true},
		{"think no end", false, "<think>This is a reasoning section", sp("This is a reasoning section"), nil, false},
		{"think no end stream", true, "<think>This is a reasoning section", sp("This is a reasoning section"), nil, false},
		{"empty", false, "", sp(""), nil, false},
		{"empty stream", true, "", nil, nil, false},
		{"new line", false, "\n<think>This is a reasoning section</think>\nThis is the rest", sp("This is a reasoning section"), sp("\nThis is the rest"), true},
		{"new line stream", true, "\n<think>This is a reasoning section</think>\nThis is the rest", sp("\nThis is a reasoning section"), sp("\nThis is the rest"), true},
	})
}

func TestQwen3(t *testing.T) {
	const body = "<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n</function>\n</tool_call>"
	p, _ := Lookup("qwen3", Options{})
	runCases(t, p, []splitCase{
		{"without start", false, "This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"without start stream", true, "This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"complete reasoning", false, "This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"complete reasoning stream", true, "This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"with think", false, "<think>This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"with think stream", true, "<think>This is a reasoning section</think>This is the rest", sp("This is a reasoning section"), sp("This is the rest"), true},
		{"without think", false, "This is the rest", sp("This is the rest"), nil, false},
		{"without think stream", true, "This is the rest", sp("This is the rest"), nil, false},
		{"complete", false, "<think>This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"complete stream", true, "<think>This is a reasoning section</think>", sp("This is a reasoning section"), nil, true},
		{"multiline", false, "<think>This is a reasoning\nsection</think>This is the rest\nThat", sp("This is a reasoning\nsection"), sp("This is the rest\nThat"), true},
		{"multiline stream", true, "<think>This is a reasoning\nsection</think>This is the rest\nThat", sp("This is a reasoning\nsection"), sp("This is the rest\nThat"), true},
		{"only open tag", false, "<think>This is a reasoning section", sp("This is a reasoning section"), nil, false},
		{"only open tag stream", true, "<think>This is a reasoning section", sp("This is a reasoning section"), nil, false},
		{"tool call no think end", false, "I need to read the file.\n\n" + body, sp("I need to read the file.\n\n"), sp(body), true},
		{"tool call no think end stream", true, "I need to read the file.\n\n" + body, sp("I need to read the file.\n\n"), sp(body), true},
		{"tool call with think no end", false, "<think>I need to read the file.\n\n" + body, sp("I need to read the file.\n\n"), sp(body), true},
		{"tool call with think no end stream", true, "<think>I need to read the file.\n\n" + body, sp("I need to read the file.\n\n"), sp(body), true},
	})
	multi := []struct {
		name     string
		deltas   []string
		wReason  *string
		wContent *string
	}{
		{"start grouped with text", []string{"<think>This is a reasoning section", "</think>", "This is the rest"}, sp("This is a reasoning section"), sp("This is the rest")},
		{"end grouped with content", []string{"reasoning section", "</think>This is the rest"}, sp("reasoning section"), sp("This is the rest")},
		{"start and end in one delta", []string{"<think>reasoning</think>"}, sp("reasoning"), nil},
		{"no start, end with content", []string{"reasoning section", "</think>content"}, sp("reasoning section"), sp("content")},
		{"tool call implicit end", []string{"I need to read the file.\n\n", "<tool_call>\n<function=bash>"}, sp("I need to read the file.\n\n"), sp("<tool_call>\n<function=bash>")},
	}
	for _, tt := range multi {
		t.Run(tt.name, func(t *testing.T) {
			r, c := reconstruct(t, p.NewStream(), tt.deltas)
			if show(r) != show(tt.wReason) || show(c) != show(tt.wContent) {
				t.Fatalf("got (%s, %s)", show(r), show(c))
			}
		})
	}
	off, _ := Lookup("qwen3", Options{ChatTemplateKwargs: map[string]any{"enable_thinking": false}})
	runCases(t, off, []splitCase{
		{"disabled plain", false, "This is plain content", nil, sp("This is plain content"), false},
		{"disabled with tool call", false, "I need to read the file.\n\n" + body, nil, sp("I need to read the file.\n\n" + body), false},
		{"disabled still splits at end", false, "a</think>b", sp("a"), sp("b"), false},
	})
	null, _ := Lookup("qwen3", Options{ChatTemplateKwargs: map[string]any{"enable_thinking": nil}})
	runCases(t, null, []splitCase{{"null disables", false, "x", nil, sp("x"), false}})
}

func TestPromptEndsReasoning(t *testing.T) {
	tests := []struct {
		parser, prompt string
		kw             map[string]any
		want           bool
	}{
		{"qwen3", "<|im_start|>assistant\n<think>\n\n</think>\n\n", nil, true},
		{"qwen3", "<|im_start|>assistant\n<think>\n", nil, false},
		{"qwen3", "<|im_start|>assistant\n", nil, false},
		{"qwen3", "example <tool_call>x</tool_call> then <|im_start|>assistant\n", nil, false},
		{"qwen3", "</think> old turn <tool_call>{", nil, true},
		{"deepseek_r1", "<｜Assistant｜><think>\n", nil, false},
		{"deepseek_r1", "<think>a</think><｜Assistant｜>", nil, true},
		{"deepseek_v3", "<｜Assistant｜><think>", nil, true},
		{"deepseek_v3", "<｜Assistant｜><think>", map[string]any{"thinking": true}, false},
		{"glm45", "<think>", nil, false},
		{"glm45", "<think>", map[string]any{"enable_thinking": false}, true},
	}
	for _, tt := range tests {
		p, ok := Lookup(tt.parser, Options{ChatTemplateKwargs: tt.kw})
		if !ok {
			t.Fatalf("no parser %s", tt.parser)
		}
		if got := p.PromptEndsReasoning(tt.prompt); got != tt.want {
			t.Errorf("%s %q %v: got %v", tt.parser, tt.prompt, tt.kw, got)
		}
	}
}

func TestDeepSeekV3(t *testing.T) {
	p, _ := Lookup("deepseek_v3", Options{})
	r, c := p.Split("<think>a</think>b")
	if r != nil || show(c) != `"<think>a</think>b"` {
		t.Fatalf("identity split: %s %s", show(r), show(c))
	}
	r, c = reconstruct(t, p.NewStream(), tokens("<think>a</think>b"))
	if r != nil || show(c) != `"<think>a</think>b"` {
		t.Fatalf("identity stream: %s %s", show(r), show(c))
	}
	on, _ := Lookup("deepseek_v3", Options{ChatTemplateKwargs: map[string]any{"thinking": true}})
	r, c = on.Split("a</think>b")
	if show(r) != `"a"` || show(c) != `"b"` {
		t.Fatalf("thinking split: %s %s", show(r), show(c))
	}
}

// TestStreamEnds: ends reports the delta that closes reasoning.
func TestStreamEnds(t *testing.T) {
	for _, name := range []string{"qwen3", "deepseek_r1"} {
		p, _ := Lookup(name, Options{})
		st := p.NewStream()
		var got []bool
		for _, d := range []string{"<think>", "a", "</think>", "b"} {
			_, e := st.Feed(d)
			got = append(got, e)
		}
		if got[0] || got[1] || !got[2] || got[3] {
			t.Errorf("%s: ends %v", name, got)
		}
	}
}
