package toolcall

import (
	"regexp"
	"strings"
)

// deepseek is vLLM's DeepSeekV3ToolParser ("deepseek_v3") and
// DeepSeekV31ToolParser ("deepseek_v31"). V3 writes
//
//	<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//	```json
//	ARGS
//	```<｜tool▁call▁end｜><｜tool▁calls▁end｜>
//
// and V3.1 <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>.
// The arguments are passed through as the model wrote them. As in vLLM,
// "." in the patterns stops at newlines.
type deepseek struct {
	name     string
	full     *regexp.Regexp // complete call; groups: [type,] name, args
	withType bool
}

const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

func init() {
	register(&deepseek{
		name:     "deepseek_v3",
		full:     regexp.MustCompile("<｜tool▁call▁begin｜>(.*)<｜tool▁sep｜>(.*)\n```json\n(.*)\n```<｜tool▁call▁end｜>"),
		withType: true,
	}, "deepseek_v3")
	register(&deepseek{
		name: "deepseek_v31",
		full: regexp.MustCompile("<｜tool▁call▁begin｜>(.*?)<｜tool▁sep｜>(.*?)<｜tool▁call▁end｜>"),
	}, "deepseek_v31")
}

func (p *deepseek) Name() string { return p.name }

func (p *deepseek) Parse(text string, _ []Tool, newID func() string) Result {
	at := strings.Index(text, dsCallsBegin)
	if at < 0 {
		return noCalls(text)
	}
	newID = orNewID(newID)
	calls := []Call{}
	for _, m := range p.full.FindAllStringSubmatch(text, -1) {
		g := m[1:]
		if p.withType {
			if g[0] != "function" {
				return noCalls(text) // vLLM's ToolCall accepts type "function" only
			}
			g = g[1:]
		}
		calls = append(calls, Call{ID: newID(), Name: g[0], Arguments: g[1]})
	}
	return Result{Called: true, Calls: calls, Content: contentOrNil(text[:at])}
}

// groups matches a streamed portion as vLLM's patterns do, without a
// regexp: "." stops at newlines and the first group is greedy, so it
// ends at the last separator of the first line. args is "" when only the
// name pattern matched; ok when either did.
func (p *deepseek) groups(portion string) (name, args string, ok bool) {
	line, rest, hasNL := strings.Cut(portion, "\n")
	k := strings.LastIndex(line, dsSep)
	if k < 0 {
		return "", "", false
	}
	before, after := line[:k], line[k+len(dsSep):]
	if !p.withType {
		return before, after, true // NAME<sep>ARGS
	}
	if !hasNL {
		return "", "", false // TYPE<sep>NAME needs its newline
	}
	if body, ok := strings.CutPrefix(rest, "```json\n"); ok {
		argLine, _, _ := strings.Cut(body, "\n")
		if a := strings.TrimRight(argLine, "`"); a != "" {
			return after, a, true
		}
	}
	return after, "", true
}

func (p *deepseek) NewStream(_ []Tool, newID func() string) Stream {
	return &dsStream{p: p, newID: orNewID(newID), current: -1}
}

type dsPrev struct {
	name, args string
	hasArgs    bool
}

type dsStream struct {
	p        *deepseek
	newID    func() string
	text     string
	buf      textBuf
	seen     bool // <｜tool▁calls▁begin｜> appeared
	prev     []dsPrev
	streamed []string
	current  int
	nameSent bool
	// Marker counts in the text before this delta.
	starts, ends int
}

func (s *dsStream) Feed(delta string, tokens int) *Delta {
	prevText := s.text
	s.text = s.buf.add(delta)
	cur := s.text
	prevStart, prevEnd := s.starts, s.ends
	s.starts += strings.Count(delta, dsCallBegin)
	s.ends += strings.Count(delta, dsCallEnd)
	if !s.seen {
		s.seen = strings.Contains(cur[max(0, len(prevText)-len(dsCallsBegin)):], dsCallsBegin)
	}
	if !s.seen {
		return contentDelta(delta)
	}
	delta = strings.ReplaceAll(strings.ReplaceAll(delta, dsCallsBegin, ""), dsCallsEnd, "")
	curStart, curEnd := s.starts, s.ends
	if curStart == curEnd && prevEnd == curEnd && !strings.Contains(delta, dsCallEnd) {
		return contentDelta(delta)
	}
	var portion *string
	var textPortion *string
	if strings.Contains(delta, dsCallEnd) {
		full := cur + delta // sic: vLLM appends the delta twice here
		parts := strings.Split(full, dsCallBegin)
		tp := pyRStrip(strings.SplitN(parts[len(parts)-1], dsCallEnd, 2)[0])
		portion = &tp
		delta = pyRStrip(strings.SplitN(delta, dsCallEnd, 2)[0])
		tx := pyLStrip(delta)
		textPortion = &tx
	}
	switch {
	case curStart > curEnd && curStart > prevStart:
		portion = nil
		if tokens > 1 {
			tp := lastAfter(cur, dsCallBegin)
			portion = &tp
		}
		textPortion = nil
		s.current++
		s.nameSent = false
		s.streamed = append(s.streamed, "")
	case curStart > curEnd && curStart == prevStart:
		tp := lastAfter(cur, dsCallBegin)
		portion, textPortion = &tp, nil
	case curStart == curEnd && curEnd >= prevEnd:
		if len(s.prev) == 0 {
			return nil
		}
		i, j := pyIndexOK(len(s.prev), s.current), pyIndexOK(len(s.streamed), s.current)
		if i < 0 {
			return nil // IndexError in vLLM: the chunk is skipped
		}
		if s.prev[i].args != "" {
			end := strings.LastIndex(delta, `"}`)
			if end < 0 || j < 0 {
				return nil
			}
			diff := delta[:end] + `"}`
			s.streamed[j] += diff
			return argsDelta(s.current, diff)
		}
	default:
		text := strings.ReplaceAll(strings.ReplaceAll(delta, dsCallBegin, ""), dsCallEnd, "")
		return &Delta{Content: &text}
	}
	return s.callDelta(portion, textPortion, delta)
}

func lastAfter(s, sep string) string {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[i+len(sep):]
	}
	return s
}

// callDelta streams the name, then argument growth, of the current call.
func (s *dsStream) callDelta(portion, textPortion *string, delta string) *Delta {
	var call dsPrev
	if portion != nil && *portion != "" {
		name, args, ok := s.p.groups(*portion)
		if !ok {
			return nil
		}
		call = dsPrev{name: name, args: args, hasArgs: true}
	}
	if !s.nameSent {
		if call.name == "" {
			return nil
		}
		s.nameSent = true
		return &Delta{Calls: []CallDelta{nameDelta(s.current, s.newID(), call.name)}}
	}
	if portion == nil {
		if textPortion != nil {
			return contentDelta(delta)
		}
		return nil
	}
	if s.current < 0 {
		return nil
	}
	if len(s.prev) <= s.current {
		s.prev = append(s.prev, dsPrev{})
	}
	if s.current >= len(s.prev) || s.current >= len(s.streamed) {
		return nil // IndexError in vLLM: the chunk is skipped
	}
	prevArgs, curArgs := s.prev[s.current].args, call.args
	var out *Delta
	switch {
	case curArgs != "" && prevArgs == "":
		out = argsDelta(s.current, curArgs)
		s.streamed[s.current] = curArgs
	case curArgs != "" && curArgs != prevArgs && len(curArgs) > len(prevArgs) && strings.HasPrefix(curArgs, prevArgs):
		out = argsDelta(s.current, curArgs[len(prevArgs):])
		s.streamed[s.current] = curArgs
	}
	if s.current == len(s.prev)-1 {
		s.prev[s.current] = call
	} else {
		s.prev = append(s.prev, call)
	}
	return out
}

func (s *dsStream) Finish(last *Delta) (*Delta, bool) { return finishWith(s, last) }

func (s *dsStream) prevCount() int { return len(s.prev) }

func (s *dsStream) expectedArgs(i int) string {
	if !s.prev[i].hasArgs {
		return "{}"
	}
	return s.prev[i].args
}

func (s *dsStream) streamedArgs(i int) string {
	if i >= 0 && i < len(s.streamed) {
		return s.streamed[i]
	}
	return ""
}

// pyIndexOK maps a Python index into [0, n), or -1 where Python raises
// IndexError.
func pyIndexOK(n, i int) int {
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return -1
	}
	return i
}
