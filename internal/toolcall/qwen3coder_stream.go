package toolcall

import "strings"

func (qwen3Coder) NewStream(tools []Tool, newID func() string) Stream {
	return &qcStream{tools: tools, newID: orNewID(newID)}
}

type qcPrev struct {
	name string
	args string // a JSON text, "{}" until the function closes
}

// qcStream is vLLM's Qwen3CoderToolParser streaming state machine.
type qcStream struct {
	tools []Tool
	newID func() string
	text  string
	buf   textBuf

	prev     []qcPrev
	streamed []string

	index      int // current tool index
	started    bool
	headerSent bool
	inFunction bool
	jsonOpen   bool // json_started
	jsonClosed bool
	paramCount int
	funcName   string
	props      jval
	propsFor   string
	propsReady bool
}

func (s *qcStream) Feed(delta string, tokens int) *Delta {
	s.text = s.buf.add(delta)
	cur := s.text
	if delta == "" {
		return s.emptyDelta(tokens)
	}
	if s.jsonClosed && !s.inFunction {
		if strings.Count(cur, qcCallEnd) > s.index {
			s.index++
			s.headerSent, s.paramCount = false, 0
			s.jsonOpen, s.jsonClosed = false, false
			if s.index >= strings.Count(cur, qcCallStart) {
				s.started = false
			}
			return nil
		}
	}
	if !s.started {
		if i := strings.Index(delta, qcCallStart); i >= 0 {
			s.started = true
			if i > 0 {
				return contentDelta(delta[:i])
			}
			return nil
		}
		if strings.HasSuffix(pyRStrip(cur), qcCallEnd) && pyStrip(delta) == "" {
			return nil
		}
		return contentDelta(delta)
	}
	toolText, ok := s.toolText()
	if !ok {
		return nil
	}
	if !s.headerSent {
		return s.header(toolText)
	}
	if !s.inFunction {
		return nil
	}
	if !s.jsonOpen {
		s.jsonOpen = true
		s.streamed[s.index] += "{"
		return argsDelta(s.index, "{")
	}
	if frag := s.params(toolText); frag != "" {
		s.streamed[s.index] += frag
		return argsDelta(s.index, frag)
	}
	if !s.jsonClosed && strings.Contains(toolText, qcFuncEnd) {
		return s.closeFunction(toolText)
	}
	return nil
}

// emptyDelta handles an output whose text is empty (a token that
// detokenized to nothing, such as a skipped end-of-sequence token).
func (s *qcStream) emptyDelta(tokens int) *Delta {
	if tokens == 0 {
		return nil
	}
	cur := s.text
	if qcCompleteCalls(cur) > 0 && len(s.prev) > 0 {
		if strings.Count(cur, qcCallStart) == strings.Count(cur, qcCallEnd) {
			return contentDelta("")
		}
	} else if !s.started && cur != "" {
		return contentDelta("")
	}
	return nil
}

// qcCompleteCalls counts <tool_call>(.*?)</tool_call> matches.
func qcCompleteCalls(s string) int {
	n := 0
	for {
		i := strings.Index(s, qcCallStart)
		if i < 0 {
			return n
		}
		s = s[i+len(qcCallStart):]
		j := strings.Index(s, qcCallEnd)
		if j < 0 {
			return n
		}
		n++
		s = s[j+len(qcCallEnd):]
	}
}

// toolText is the text of the current tool's <tool_call> region, through
// its </tool_call> when present.
func (s *qcStream) toolText() (string, bool) {
	cur := s.text
	pos := -1
	for k, from := 0, 0; k <= s.index; k++ {
		i := strings.Index(cur[from:], qcCallStart)
		if i < 0 {
			return "", false
		}
		pos = from + i
		from = pos + len(qcCallStart)
	}
	if e := strings.Index(cur[pos:], qcCallEnd); e >= 0 {
		return cur[pos : pos+e+len(qcCallEnd)], true
	}
	return cur[pos:], true
}

func (s *qcStream) header(toolText string) *Delta {
	i := strings.Index(toolText, qcFuncPrefix)
	if i < 0 {
		return nil
	}
	start := i + len(qcFuncPrefix)
	gt := strings.IndexByte(toolText[start:], '>')
	if gt < 0 {
		return nil
	}
	s.funcName = toolText[start : start+gt]
	s.headerSent, s.inFunction = true, true
	s.prev = append(s.prev, qcPrev{name: s.funcName, args: "{}"})
	s.streamed = append(s.streamed, "")
	cd := nameDelta(s.index, s.newID(), s.funcName)
	cd.HasArgs = true
	return &Delta{Calls: []CallDelta{cd}}
}

// params returns the JSON fragments of parameters that completed since
// the last call.
func (s *qcStream) params(toolText string) string {
	var b strings.Builder
	starts := allIndexes(toolText, qcParamPre)
	for s.paramCount < len(starts) {
		pstart := starts[s.paramCount] + len(qcParamPre)
		gt := strings.IndexByte(toolText[pstart:], '>')
		if gt < 0 {
			break
		}
		name := toolText[pstart : pstart+gt]
		value := strings.TrimPrefix(toolText[pstart+gt+1:], "\n")
		end := qcValueEnd(value)
		if end < 0 {
			break
		}
		v, err := qcConvert(strings.TrimSuffix(value[:end], "\n"), name, s.properties())
		if err != nil {
			// vLLM's json.dumps raises here and the stream fails; keep
			// the raw text as a string instead.
			v = jval{kind: jString, text: strings.TrimSuffix(value[:end], "\n")}
		}
		if s.paramCount > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`"` + name + `": ` + pyDumps(v, false))
		s.paramCount++
	}
	return b.String()
}

// qcValueEnd finds where a streamed parameter value ends: its
// </parameter>, else the next <parameter= or </function> (whichever comes
// first), else </tool_call>; -1 while it may still grow.
func qcValueEnd(v string) int {
	if e := strings.Index(v, qcParamEnd); e >= 0 {
		return e
	}
	next, fend := strings.Index(v, qcParamPre), strings.Index(v, qcFuncEnd)
	switch {
	case next >= 0 && (fend < 0 || next < fend):
		return next
	case fend >= 0:
		return fend
	}
	return strings.Index(v, qcCallEnd)
}

func (s *qcStream) properties() jval {
	if !s.propsReady || s.propsFor != s.funcName {
		s.props, s.propsFor, s.propsReady = toolProperties(s.tools, s.funcName), s.funcName, true
	}
	return s.props
}

func (s *qcStream) closeFunction(toolText string) *Delta {
	s.jsonClosed = true
	start := strings.Index(toolText, qcFuncPrefix) + len(qcFuncPrefix)
	if e := strings.Index(toolText[start:], qcFuncEnd); e >= 0 {
		c, ok, err := qcParseFunction(toolText[start:start+e], s.tools)
		if ok && err == nil && s.index < len(s.prev) {
			s.prev[s.index].args = c.Arguments
		}
	}
	s.streamed[s.index] += "}"
	s.inFunction = false
	return argsDelta(s.index, "}")
}

func allIndexes(s, sub string) []int {
	var out []int
	for from := 0; ; {
		i := strings.Index(s[from:], sub)
		if i < 0 {
			return out
		}
		out = append(out, from+i)
		from += i + len(sub)
	}
}

func (s *qcStream) Finish(last *Delta) (*Delta, bool) { return finishWith(s, last) }

func (s *qcStream) prevCount() int            { return len(s.prev) }
func (s *qcStream) expectedArgs(i int) string { return s.prev[i].args }
func (s *qcStream) streamedArgs(i int) string {
	if i < len(s.streamed) {
		return s.streamed[i]
	}
	return ""
}
