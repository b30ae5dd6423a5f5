package toolcall

// Reasoner is a streamed reasoning split, as package reasoning's streams
// provide it: the reasoning and content parts of a delta (ok false where
// vLLM's parser returns None), and whether the delta ends reasoning.
type Reasoner interface {
	FeedSplit(delta string) (reasoning, content *string, ok, ends bool)
}

// ChatStream is vLLM's Parser.parse_delta: it runs one choice's deltas
// through the reasoning parser, then, once reasoning has ended, through
// the tool parser. Either may be nil.
type ChatStream struct {
	reasoner Reasoner
	tools    Stream
	ended    bool // reasoning_ended
}

// NewChatStream starts one choice. promptEndsReasoning is the reasoning
// parser's verdict on the prompt (true when thinking is off); without a
// reasoning parser, reasoning counts as ended from the start.
func NewChatStream(r Reasoner, promptEndsReasoning bool, tools Stream) *ChatStream {
	return &ChatStream{reasoner: r, tools: tools, ended: r == nil || promptEndsReasoning}
}

// Feed returns the delta to send for the next engine output, or nil.
// As in vLLM, when reasoning ends inside a delta and a tool parser is
// active, the tool parser receives the content part of that delta, and
// its result replaces the reasoning part.
func (c *ChatStream) Feed(text string, tokens int) *Delta {
	var d *Delta
	if c.reasoner != nil && !c.ended {
		r, content, ok, ends := c.reasoner.FeedSplit(text)
		if ok {
			d = &Delta{Reasoning: r, Content: content}
		}
		if c.tools == nil || !ends {
			return d
		}
		c.ended = true
		text = ""
		if d != nil && d.Content != nil {
			text, d.Content = *d.Content, nil
		}
		// vLLM counts the content token ids after the end marker; the
		// parsers only ask whether there are several.
		tokens = max(tokens-1, 0)
	}
	if c.tools != nil {
		return c.tools.Feed(text, tokens)
	}
	if d == nil {
		return &Delta{Content: &text}
	}
	return d
}

// Finish is the tool parser's Finish (see Stream), or the last delta
// unchanged when there is no tool parser.
func (c *ChatStream) Finish(last *Delta) (*Delta, bool) {
	if c.tools == nil {
		return last, false
	}
	return c.tools.Finish(last)
}

// ParseContent is vLLM's auto tool-choice step for a complete answer: the
// tool parser reads content (the reasoning parser's content; nil reads as
// ""). When the parser reports tools called, its content replaces the
// input, and content that is only whitespace becomes nil; otherwise the
// input content is kept and calls is nil. finish_reason is "tool_calls"
// when calls is not empty.
func ParseContent(p Parser, content *string, tools []Tool, newID func() string) (calls []Call, out *string) {
	text := ""
	if content != nil {
		text = *content
	}
	r := p.Parse(text, tools, newID)
	if !r.Called {
		return nil, content
	}
	out = r.Content
	if out != nil && *out != "" && pyStrip(*out) == "" {
		out = nil
	}
	if r.Calls == nil {
		r.Calls = []Call{}
	}
	return r.Calls, out
}
