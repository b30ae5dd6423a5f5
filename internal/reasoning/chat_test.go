package reasoning

import (
	"testing"

	"github.com/switchyard-llm/switchyard/internal/toolcall"
)

// TestWithToolParser runs a Qwen3 answer through toolcall.ChatStream with
// the real qwen3 reasoning parser and the hermes tool parser.
func TestWithToolParser(t *testing.T) {
	rp, _ := Lookup("qwen3", Options{})
	tp, _ := toolcall.Lookup("hermes")
	cs := toolcall.NewChatStream(rp.NewStream(), rp.PromptEndsReasoning("<|im_start|>assistant\n"), tp.NewStream(nil, nil))
	var reasoning, content, name, args string
	for _, tok := range tokens("<think>I should call f.</think>\n\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>") {
		d := cs.Feed(tok, 1)
		if d == nil {
			continue
		}
		if d.Reasoning != nil {
			reasoning += *d.Reasoning
		}
		if d.Content != nil {
			content += *d.Content
		}
		for _, c := range d.Calls {
			name += c.Name
			args += c.Args
		}
	}
	if reasoning != "I should call f." || content != "\n\n" || name != "f" || args != `{"x": 1}` {
		t.Fatalf("reasoning %q content %q name %q args %q", reasoning, content, name, args)
	}
}
