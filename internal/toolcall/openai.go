package toolcall

import "strings"

// openAI is vLLM's OpenAIToolParser ("openai") for gpt-oss, together with
// the harmony handling of vLLM's chat serving: calls are messages whose
// recipient is a function (to=functions.NAME), usually in the commentary
// channel; the final channel is the content (commentary without a
// recipient, the preamble, stands in when there is no final text), and
// the analysis channel is the reasoning.
type openAI struct{}

func init() { register(openAI{}, "openai") }

func (openAI) Name() string { return "openai" }

func (openAI) Parse(text string, _ []Tool, newID func() string) Result {
	newID = orNewID(newID)
	var h harmony
	h.process(text)
	h.flushPending()
	var r Result
	var final, commentary *string
	for _, m := range h.messages {
		if m.role != "assistant" {
			continue
		}
		switch {
		case isFunctionRecipient(m.recipient):
			args := m.content
			if m.contentType == "" || strings.Contains(m.contentType, "json") {
				if v, err := pyLoads(m.content); err == nil {
					args = pyDumps(v, true)
				}
			}
			r.Calls = append(r.Calls, Call{ID: newID(), Name: strings.TrimPrefix(m.recipient, "functions."), Arguments: args})
		case m.channel == "final":
			final = strPtr(m.content)
		case m.channel == "commentary" && m.recipient == "":
			commentary = strPtr(m.content)
		}
	}
	if ch, rc, c := h.currentContent(); c != "" {
		switch {
		case ch == "final":
			final = &c
		case ch == "commentary" && rc == "":
			commentary = &c
		}
	}
	r.Called = len(r.Calls) > 0
	r.Content = commentary // vLLM: final_content or commentary_content
	if final != nil && *final != "" {
		r.Content = final
	}
	r.Reasoning = harmonyReasoning(&h)
	return r
}

// harmonyReasoning is the reasoning half of vLLM's parse_chat_output:
// analysis messages and the unfinished analysis text, joined by newlines;
// nil when empty.
func harmonyReasoning(h *harmony) *string {
	var parts []string
	for _, m := range h.messages {
		if m.channel == "analysis" {
			parts = append(parts, m.content)
		}
	}
	if ch, _, c := h.currentContent(); ch == "analysis" && c != "" {
		parts = append(parts, c)
	}
	return contentOrNil(strings.Join(parts, "\n"))
}

// flushPending treats a held-back special-token prefix as text: the answer
// ended, so it was never a token.
func (h *harmony) flushPending() {
	if p := h.pending; p != "" {
		h.pending = ""
		h.plain(nil, p)
	}
}

func strPtr(s string) *string { return &s }

func (openAI) NewStream(_ []Tool, newID func() string) Stream {
	return &openAIStream{newID: orNewID(newID)}
}

type openAIStream struct {
	newID    func() string
	h        harmony
	streamed bool
}

// Feed is vLLM's harmony streaming step (extract_harmony_streaming_delta)
// with include_reasoning on; a caller that excludes reasoning drops the
// Reasoning field, and the delta with it when nothing else is left.
func (s *openAIStream) Feed(text string, _ int) *Delta {
	_, prevRecipient, _ := s.h.currentContent()
	segs := s.h.process(text)
	if len(segs) == 0 {
		return nil
	}
	groups := []hSegment{segs[0]}
	for _, g := range segs[1:] {
		last := &groups[len(groups)-1]
		if g.channel == last.channel && g.recipient == last.recipient {
			last.text += g.text
		} else {
			groups = append(groups, g)
		}
	}
	base := 0
	for _, m := range s.h.messages {
		if isFunctionRecipient(m.recipient) {
			base++
		}
	}
	next, ongoing := base, -1
	if isFunctionRecipient(prevRecipient) {
		next, ongoing = base+1, base
	}
	var content, reasoning strings.Builder
	contentSeen := false
	var calls []CallDelta
	for _, g := range groups {
		switch {
		case g.channel == "final":
			content.WriteString(g.text)
			contentSeen = true
		case isFunctionRecipient(g.recipient):
			opened := false
			if prevRecipient != g.recipient {
				cd := nameDelta(next, s.newID(), strings.TrimPrefix(g.recipient, "functions."))
				cd.HasArgs = true
				calls = append(calls, cd)
				opened, prevRecipient = true, g.recipient
				next++
			}
			if g.text != "" {
				idx := base
				switch {
				case opened:
					idx = next - 1
				case ongoing >= 0:
					idx = ongoing
				}
				calls = append(calls, CallDelta{Index: idx, Args: g.text, HasArgs: true})
			}
		case g.channel == "commentary" && g.recipient == "":
			content.WriteString(g.text)
			contentSeen = true
		case g.channel == "analysis":
			reasoning.WriteString(g.text)
		}
	}
	if !contentSeen && reasoning.Len() == 0 && len(calls) == 0 {
		return nil
	}
	d := &Delta{Calls: calls}
	if contentSeen {
		d.Content = strPtr(content.String())
	}
	if reasoning.Len() > 0 {
		d.Reasoning = strPtr(reasoning.String())
	}
	if len(calls) > 0 {
		s.streamed = true
	}
	return d
}

// Finish: vLLM's end-of-stream repair does not apply to harmony (the
// parser keeps no prev_tool_call_arr); finish_reason is "tool_calls" once
// a call was streamed.
func (s *openAIStream) Finish(last *Delta) (*Delta, bool) { return last, s.streamed }

// HarmonySplit is vLLM's parse_chat_output for gpt-oss without a tool
// parser: reasoning is the analysis channel, content the final channel and
// the preambles (commentary without a recipient), each joined by newlines
// with the unfinished message last; nil when empty. Calls are left out.
func HarmonySplit(text string) (reasoning, content *string) {
	var h harmony
	h.process(text)
	h.flushPending()
	var final []string
	for _, m := range h.messages {
		if m.channel == "final" || (m.channel == "commentary" && m.recipient == "") {
			final = append(final, m.content)
		}
	}
	ch, rc, c := h.currentContent()
	if c != "" && ch != "analysis" && (ch == "final" || (ch == "commentary" && rc == "")) {
		final = append(final, c)
	}
	return harmonyReasoning(&h), contentOrNil(strings.Join(final, "\n"))
}
