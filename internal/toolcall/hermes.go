package toolcall

import (
	"strings"
	"unicode/utf8"
)

// hermes is vLLM's Hermes2ProToolParser ("hermes"): Hermes 2 Pro and 3,
// Qwen 2.5 and Qwen 3 write <tool_call>{"name": ..., "arguments": ...}</tool_call>.
type hermes struct{}

func init() { register(hermes{}, "hermes") }

const (
	hermesStart = "<tool_call>"
	hermesEnd   = "</tool_call>"
)

func (hermes) Name() string { return "hermes" }

func (hermes) Parse(text string, _ []Tool, newID func() string) Result {
	start := strings.Index(text, hermesStart)
	if start < 0 {
		return noCalls(text)
	}
	newID = orNewID(newID)
	var calls []Call
	rest := text
	for {
		i := strings.Index(rest, hermesStart)
		if i < 0 {
			break
		}
		body := rest[i+len(hermesStart):]
		if j := strings.Index(body, hermesEnd); j >= 0 {
			rest = body[j+len(hermesEnd):]
			body = body[:j]
		} else {
			rest = ""
		}
		obj, err := pyLoads(body)
		if err != nil || obj.kind != jObject {
			return noCalls(text)
		}
		name, okName := obj.get("name")
		args, okArgs := obj.get("arguments")
		if !okName || !okArgs || name.kind != jString {
			return noCalls(text)
		}
		calls = append(calls, Call{ID: newID(), Name: name.text, Arguments: pyDumps(args, false)})
	}
	return Result{Called: true, Calls: calls, Content: contentOrNil(text[:start])}
}

func (hermes) NewStream(_ []Tool, newID func() string) Stream {
	return &hermesStream{newID: orNewID(newID), tagAt: -1}
}

type hermesCall struct {
	name    string
	args    string
	hasArgs bool
}

type hermesStream struct {
	newID    func() string
	text     string
	buf      textBuf
	sent     int // bytes of text sent as content
	tagAt    int // offset of the first <tool_call>, -1 until seen
	calls    []hermesCall
	streamed []string
	// done counts leading calls that are closed and fully sent; scanAt is
	// where the region after them starts. Both only skip work.
	done   int
	scanAt int
}

func (s *hermesStream) Feed(delta string, _ int) *Delta {
	from := len(s.text) - len(hermesStart) + 1
	s.text = s.buf.add(delta)
	content := s.content(max(from, 0))
	var out []CallDelta
	pos, i := s.scanAt, s.done
	for ; ; i++ {
		body, complete, next, ok := s.region(pos)
		if !ok {
			break
		}
		if i >= len(s.calls) {
			s.calls = append(s.calls, hermesCall{})
			s.streamed = append(s.streamed, "")
		}
		c := &s.calls[i]
		if c.name == "" {
			name := hermesName(body)
			if name == "" {
				break
			}
			c.name = name
			out = append(out, nameDelta(i, s.newID(), name))
		}
		if diff, ok := s.argsDiff(i, body, complete); ok {
			out = append(out, CallDelta{Index: i, Args: diff, HasArgs: true})
		}
		if next < 0 {
			break
		}
		if i == s.done {
			s.done, s.scanAt = i+1, next
		}
		pos = next
	}
	if content == nil && len(out) == 0 {
		return nil
	}
	return &Delta{Content: content, Calls: out}
}

// content returns unsent text before the first <tool_call>, holding back
// a suffix that could be the start of one.
func (s *hermesStream) content(searchFrom int) *string {
	if s.tagAt < 0 {
		if k := strings.Index(s.text[searchFrom:], hermesStart); k >= 0 {
			s.tagAt = searchFrom + k
		}
	}
	sendable := s.tagAt
	if sendable < 0 {
		sendable = len(s.text) - partialTagOverlap(s.text, hermesStart)
	}
	if sendable <= s.sent {
		return nil
	}
	c := s.text[s.sent:sendable]
	s.sent = sendable
	return &c
}

// region reads the <tool_call> region at or after pos: its stripped body,
// whether the body is complete, and where the next search starts (-1
// when the region runs to the end of the text).
func (s *hermesStream) region(pos int) (body string, complete bool, next int, ok bool) {
	k := strings.Index(s.text[pos:], hermesStart)
	if k < 0 {
		return "", false, -1, false
	}
	start := pos + k + len(hermesStart)
	if e := strings.Index(s.text[start:], hermesEnd); e >= 0 {
		return pyStrip(s.text[start : start+e]), true, start + e + len(hermesEnd), true
	}
	raw := s.text[start:]
	raw = raw[:len(raw)-partialTagOverlap(raw, hermesEnd)]
	body = pyStrip(raw)
	return body, body != "" && isCompleteJSON(body), -1, true
}

// hermesName is the first `"name"\s*:\s*"([^"]+)"` of the body, raw.
func hermesName(body string) string {
	from := 0
	for {
		k := strings.Index(body[from:], `"name"`)
		if k < 0 {
			return ""
		}
		j := skipRegexSpace(body, from+k+len(`"name"`))
		if j < len(body) && body[j] == ':' {
			j = skipRegexSpace(body, j+1)
			if j < len(body) && body[j] == '"' {
				if e := strings.IndexByte(body[j+1:], '"'); e > 0 {
					return body[j+1 : j+1+e]
				}
			}
		}
		from += k + 1
	}
}

// argsDiff returns argument text not yet sent for call i. The arguments
// are the raw text after "arguments": — without the closing brace of the
// outer object once the body is complete.
func (s *hermesStream) argsDiff(i int, body string, complete bool) (string, bool) {
	at := afterKey(body, `"arguments"`)
	if at < 0 {
		return "", false
	}
	args := body[at:]
	if complete {
		args = pyRStrip(args)
		if strings.HasSuffix(args, "}") {
			args = pyRStrip(args[:len(args)-1])
		}
	}
	var diff string
	if prev := s.streamed[i]; len(args) > len(prev) && strings.HasPrefix(args, prev) && (prev == "" || prev[len(prev)-1] < utf8.RuneSelf) {
		// The usual step: the arguments grew behind an ASCII end, so the
		// characters after the streamed ones are the bytes after them, with
		// no counting of the whole text on every delta.
		diff = args[len(prev):]
	} else {
		n := pyLen(prev)
		if pyLen(args) <= n {
			return "", false
		}
		diff = pyTail(args, n)
	}
	s.streamed[i] = args
	s.calls[i].args, s.calls[i].hasArgs = args, true
	return diff, true
}

func (s *hermesStream) Finish(last *Delta) (*Delta, bool) { return finishWith(s, last) }

func (s *hermesStream) prevCount() int { return len(s.calls) }

func (s *hermesStream) expectedArgs(i int) string {
	if !s.calls[i].hasArgs {
		return "{}"
	}
	return s.calls[i].args
}

func (s *hermesStream) streamedArgs(i int) string {
	if i < len(s.streamed) {
		return s.streamed[i]
	}
	return ""
}
