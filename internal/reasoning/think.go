package reasoning

import "strings"

// think is vLLM's BaseThinkingReasoningParser with <think> and </think>,
// and with DeepSeek R1's streaming override (r1): R1's template puts
// <think> in the prompt, so output before </think> is reasoning even
// though no <think> was generated.
type think struct {
	start, end string
	r1         bool
}

const (
	thinkStart = "<think>"
	thinkEnd   = "</think>"
)

func init() {
	register(func(Options) Parser { return think{thinkStart, thinkEnd, true} }, "deepseek_r1")
	register(newDeepSeekV3, "deepseek_v3", "deepseek_v4")
	register(newDeepSeekV3Thinking, "glm45", "holo2")
}

func (p think) Split(text string) (*string, *string) {
	if _, after, ok := strings.Cut(text, p.start); ok {
		text = after
	}
	reasoning, content, ok := strings.Cut(text, p.end)
	if !ok {
		return &text, nil
	}
	return &reasoning, orNil(content)
}

func (p think) PromptEndsReasoning(prompt string) bool {
	return endsAfterLastStart(prompt, p.start, p.end)
}

func (p think) NewStream() Stream { return &thinkStream{p: p} }

type thinkStream struct {
	p                  think
	prevStart, prevEnd bool
}

func (s *thinkStream) Feed(delta string) (*Delta, bool) {
	d := s.base(delta)
	if s.p.r1 && d != nil && !s.prevStart && !strings.Contains(delta, s.p.start) {
		d = s.r1(delta)
	}
	ends := endsAfterLastStart(delta, s.p.start, s.p.end)
	s.prevStart = s.prevStart || strings.Contains(delta, s.p.start)
	s.prevEnd = s.prevEnd || strings.Contains(delta, s.p.end)
	return d, ends
}

// base is BaseThinkingReasoningParser.extract_reasoning_streaming.
func (s *thinkStream) base(delta string) *Delta {
	start, end := s.p.start, s.p.end
	if delta == start || delta == end {
		return nil // the marker token alone
	}
	hasEnd := strings.Contains(delta, end)
	switch {
	case s.prevStart && hasEnd:
		r, c, _ := strings.Cut(delta, end)
		return &Delta{Reasoning: &r, Content: orNil(c)}
	case s.prevStart && s.prevEnd:
		return &Delta{Content: &delta}
	case s.prevStart:
		return &Delta{Reasoning: &delta}
	case strings.Contains(delta, start) && hasEnd:
		si := strings.Index(delta, start) + len(start)
		ei := strings.Index(delta, end)
		return &Delta{Reasoning: ptr(pySlice(delta, si, ei)), Content: orNil(delta[ei+len(end):])}
	case strings.Contains(delta, start):
		return &Delta{Reasoning: &delta}
	}
	return &Delta{Content: &delta}
}

// r1 is DeepSeekR1ReasoningParser's override when no <think> was seen.
func (s *thinkStream) r1(delta string) *Delta {
	if r, c, ok := strings.Cut(delta, s.p.end); ok {
		return &Delta{Reasoning: &r, Content: orNil(c)}
	}
	if s.prevEnd {
		return &Delta{Content: &delta}
	}
	return &Delta{Reasoning: &delta}
}

// pySlice is Python's s[i:j] on byte offsets, empty when j < i.
func pySlice(s string, i, j int) string {
	if j < i {
		return ""
	}
	return s[i:j]
}

// identity is vLLM's IdentityReasoningParser: everything is content.
type identity struct{}

func (identity) Split(text string) (*string, *string) { return nil, &text }
func (identity) PromptEndsReasoning(string) bool      { return true }
func (identity) NewStream() Stream                    { return identityStream{} }

type identityStream struct{}

func (identityStream) Feed(delta string) (*Delta, bool) {
	if delta == "" {
		return nil, true
	}
	return &Delta{Content: &delta}, true
}

// newDeepSeekV3 is DeepSeekV3ReasoningParser: R1's parser when the
// request turns thinking on ("thinking" or "enable_thinking"), else
// identity.
func newDeepSeekV3(o Options) Parser {
	a, _ := o.kwarg("thinking")
	b, _ := o.kwarg("enable_thinking")
	if a || b {
		return think{thinkStart, thinkEnd, true}
	}
	return identity{}
}

// newDeepSeekV3Thinking is DeepSeekV3ReasoningWithThinkingParser: as
// deepseek_v3, but thinking defaults on when the request says nothing.
func newDeepSeekV3Thinking(o Options) Parser {
	_, a := o.kwarg("thinking")
	_, b := o.kwarg("enable_thinking")
	if !a && !b {
		return think{thinkStart, thinkEnd, true}
	}
	return newDeepSeekV3(o)
}

func (s *thinkStream) FeedSplit(delta string) (*string, *string, bool, bool) {
	return feedSplit(s.Feed(delta))
}

func (s identityStream) FeedSplit(delta string) (*string, *string, bool, bool) {
	return feedSplit(s.Feed(delta))
}
