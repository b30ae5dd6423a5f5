package reasoning

import "strings"

// qwen3 is vLLM's Qwen3ReasoningParser (also "mimo"). Qwen3.5 templates
// put <think> in the prompt; older ones let the model write it, and it is
// skipped. A <tool_call> inside reasoning ends it implicitly.
type qwen3 struct {
	thinking bool // false only when enable_thinking is explicitly off
}

const (
	toolCallStart = "<tool_call>"
	toolCallEnd   = "</tool_call>"
)

func init() {
	register(func(o Options) Parser {
		// vLLM: chat_template_kwargs.get("enable_thinking", True), so an
		// explicit null turns thinking off.
		v, present := o.ChatTemplateKwargs["enable_thinking"]
		return qwen3{thinking: !present || truthy(v)}
	}, "qwen3", "mimo")
}

func (p qwen3) Split(text string) (*string, *string) {
	if _, after, ok := strings.Cut(text, thinkStart); ok {
		text = after
	}
	if r, c, ok := strings.Cut(text, thinkEnd); ok {
		return &r, orNil(c)
	}
	if !p.thinking {
		return nil, &text
	}
	if i := strings.Index(text, toolCallStart); i >= 0 {
		return orNil(text[:i]), orNil(text[i:])
	}
	return &text, nil
}

// PromptEndsReasoning scans markers backwards: <think> means open,
// </think> closed, and an unpaired <tool_call> closed too (a paired one
// is an example in the template).
func (p qwen3) PromptEndsReasoning(prompt string) bool {
	return qwen3Ends(prompt)
}

func qwen3Ends(s string) bool {
	st := strings.LastIndex(s, thinkStart)
	en := strings.LastIndex(s, thinkEnd)
	// The last <tool_call> after which no </tool_call> follows.
	tc := strings.LastIndex(s, toolCallStart)
	if tc >= 0 && strings.Contains(s[tc:], toolCallEnd) {
		// Earlier unpaired ones are followed by this pair's end too.
		tc = -1
	}
	last := max(st, en, tc)
	return last >= 0 && last != st
}

func (p qwen3) NewStream() Stream { return &qwen3Stream{} }

type qwen3Stream struct {
	prevEnd, prevTool bool
}

func (s *qwen3Stream) Feed(delta string) (*Delta, bool) {
	d := s.split(delta)
	ends := qwen3Ends(delta)
	s.prevEnd = s.prevEnd || strings.Contains(delta, thinkEnd)
	s.prevTool = s.prevTool || strings.Contains(delta, toolCallStart)
	return d, ends
}

func (s *qwen3Stream) split(delta string) *Delta {
	hasEnd := strings.Contains(delta, thinkEnd)
	if i := strings.Index(delta, thinkStart); i >= 0 {
		delta = delta[i+len(thinkStart):]
	}
	if hasEnd {
		r, c, ok := strings.Cut(delta, thinkEnd)
		if !ok || (r == "" && c == "") {
			return nil // the end was before <think>, or alone
		}
		return &Delta{Reasoning: orNil(r), Content: orNil(c)}
	}
	if i := strings.Index(delta, toolCallStart); i >= 0 {
		return &Delta{Reasoning: orNil(delta[:i]), Content: orNil(delta[i:])}
	}
	switch {
	case delta == "":
		return nil
	case s.prevEnd || s.prevTool:
		return &Delta{Content: &delta}
	}
	return &Delta{Reasoning: &delta}
}

func (s *qwen3Stream) FeedSplit(delta string) (*string, *string, bool, bool) {
	return feedSplit(s.Feed(delta))
}
