package toolcall

import (
	"strings"
	"unicode"
)

// This file reads OpenAI's harmony format (gpt-oss) from text in which
// its special tokens were kept:
//
//	<|channel|>analysis<|message|>thinking<|end|>
//	<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>
//
// vLLM reads the same with openai_harmony's StreamableParser over token
// ids; each special token is one token, so it arrives whole in the text.

const (
	hStart     = "<|start|>"
	hMessage   = "<|message|>"
	hChannel   = "<|channel|>"
	hConstrain = "<|constrain|>"
)

var hEnds = []string{"<|end|>", "<|call|>", "<|return|>"}

type hState uint8

const (
	hHeader hState = iota // the parser starts here: the prompt ended with <|start|>assistant
	hContent
	hExpectStart
)

type hMessageT struct {
	role, channel, recipient, contentType string
	content                               string
}

// hSegment is one piece of processed text with the parser's state after
// it (vLLM's TokenState): channel and recipient are set only inside a
// message's content.
type hSegment struct {
	channel, recipient string
	text               string
}

type harmony struct {
	state    hState
	header   strings.Builder
	cur      hMessageT // the message whose content is being read
	content  strings.Builder
	messages []hMessageT
	pending  string // a possible special-token prefix held back
	started  bool   // a header was read: later ones name their role
}

// process consumes text and returns its segments.
func (h *harmony) process(text string) []hSegment {
	text = h.pending + text
	h.pending = ""
	if k := specialPrefixSuffix(text); k > 0 {
		text, h.pending = text[:len(text)-k], text[len(text)-k:]
	}
	var segs []hSegment
	for text != "" {
		i := strings.Index(text, "<|")
		if i < 0 {
			segs = h.plain(segs, text)
			break
		}
		if i > 0 {
			segs = h.plain(segs, text[:i])
			text = text[i:]
		}
		tok, ok := specialAt(text)
		if !ok {
			segs = h.plain(segs, "<|")
			text = text[2:]
			continue
		}
		h.special(tok)
		segs = append(segs, h.segment(""))
		text = text[len(tok):]
	}
	return segs
}

var hSpecials = []string{hStart, hMessage, hChannel, hConstrain, "<|end|>", "<|call|>", "<|return|>"}

func specialAt(s string) (string, bool) {
	for _, t := range hSpecials {
		if strings.HasPrefix(s, t) {
			return t, true
		}
	}
	return "", false
}

// specialPrefixSuffix is the length of the longest end of s that could
// begin a special token: it waits for the next text.
func specialPrefixSuffix(s string) int {
	best := 0
	for _, t := range hSpecials {
		if k := partialTagOverlap(s, t); k > best {
			best = k
		}
	}
	return best
}

func (h *harmony) plain(segs []hSegment, text string) []hSegment {
	switch h.state {
	case hHeader:
		h.header.WriteString(text)
		return append(segs, h.segment(""))
	case hContent:
		h.content.WriteString(text)
		return append(segs, h.segment(text))
	}
	return append(segs, h.segment(""))
}

func (h *harmony) segment(text string) hSegment {
	if h.state != hContent {
		return hSegment{text: text}
	}
	return hSegment{channel: h.cur.channel, recipient: h.cur.recipient, text: text}
}

func (h *harmony) special(tok string) {
	switch h.state {
	case hHeader:
		if tok != hMessage {
			h.header.WriteString(tok)
			return
		}
		preset := ""
		if !h.started {
			preset = "assistant" // the prompt ended with <|start|>assistant
		}
		h.cur = parseHarmonyHeader(h.header.String(), preset)
		h.started = true
		h.header.Reset()
		h.content.Reset()
		h.state = hContent
	case hContent:
		for _, e := range hEnds {
			if tok == e {
				h.cur.content = h.content.String()
				h.messages = append(h.messages, h.cur)
				h.cur = hMessageT{}
				h.content.Reset()
				h.state = hExpectStart
				return
			}
		}
		h.content.WriteString(tok)
	case hExpectStart:
		if tok == hStart {
			h.header.Reset()
			h.state = hHeader
			h.started = true
		}
	}
}

// parseHarmonyHeader reads a header as openai_harmony does: the channel
// word after <|channel|> comes out first; of the remaining words, a role
// leads (preset for the first message of an output), then the last word
// is the recipient when it is "to=R" or alone, else the content type with
// the recipient before it. Where openai_harmony fails (stray words, an
// unknown role), this reads on.
func parseHarmonyHeader(s, presetRole string) hMessageT {
	var m hMessageT
	if i := strings.Index(s, hChannel); i >= 0 {
		after := s[i+len(hChannel):]
		end := strings.IndexFunc(after, func(r rune) bool { return r == '<' || unicode.IsSpace(r) })
		if end < 0 {
			end = len(after)
		}
		m.channel = after[:end]
		s = s[:i] + after[end:]
	}
	s = strings.TrimSpace(s)
	if strings.Contains(s, hConstrain) {
		s = strings.TrimSpace(strings.ReplaceAll(s, hConstrain, " "+hConstrain))
	}
	parts := strings.Fields(s)
	m.role = presetRole
	if m.role == "" && len(parts) > 0 {
		m.role = parts[0]
		if !harmonyRoles[m.role] && (len(parts) > 1 || strings.HasPrefix(parts[0], "to=")) {
			m.role, parts = "tool", parts[1:]
		}
	}
	if len(parts) > 0 && parts[0] == m.role {
		parts = parts[1:]
	}
	if len(parts) == 0 {
		return m
	}
	last := parts[len(parts)-1]
	parts = parts[:len(parts)-1]
	switch r, ok := strings.CutPrefix(last, "to="); {
	case ok:
		m.recipient = r
	case len(parts) == 0:
		m.recipient = last
	default:
		m.contentType = last
		m.recipient = strings.TrimPrefix(parts[len(parts)-1], "to=")
	}
	return m
}

var harmonyRoles = map[string]bool{"user": true, "assistant": true, "system": true, "developer": true, "tool": true}

// harmonyBuiltins are tools served by vLLM itself, not function calls.
var harmonyBuiltins = map[string]bool{"python": true, "browser": true, "container": true}

// isFunctionRecipient is vLLM's is_function_recipient for chat.
func isFunctionRecipient(r string) bool {
	switch {
	case r == "" || strings.HasPrefix(r, "<|") || r == "assistant":
		return false
	case strings.HasPrefix(r, "functions."):
		return len(r) > len("functions.")
	}
	first, _, _ := strings.Cut(r, ".")
	return !harmonyBuiltins[r] && !harmonyBuiltins[first]
}

func (h *harmony) currentContent() (channel, recipient, content string) {
	if h.state != hContent {
		return "", "", ""
	}
	return h.cur.channel, h.cur.recipient, h.content.String()
}
