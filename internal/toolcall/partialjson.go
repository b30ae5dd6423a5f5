package toolcall

import "strings"

// This file stands in for the partial_json_parser package that vLLM's
// llama3_json parser uses: it reads a JSON prefix and closes what is open.
// Incomplete object keys, keys without a value and trailing commas are
// dropped; an unterminated string is kept (cut before a partial escape,
// without trailing whitespace) only when partial strings are allowed; a number or literal that touches
// the end of the text is taken as far as it is valid.

type pjson struct {
	s        string
	allowStr bool
	depth    int
}

// partialLoads is vLLM's partial_json_loads: the value at the start of s
// (after whitespace) and how far it reaches. A complete value followed by
// more text returns the offset just past it (raw_decode); otherwise the
// whole text is consumed. ok is false for malformed text or when nothing
// could be read.
func partialLoads(s string, allowStr bool) (v jval, end int, ok bool) {
	p := pjson{s: s, allowStr: allowStr}
	i := skipWS(s, 0)
	v, j, st := p.value(i)
	switch st {
	case pDone:
		if skipWS(s, j) == len(s) {
			return v, len(s), true
		}
		return v, j, true
	case pPartial:
		return v, len(s), true
	}
	return jval{}, 0, false
}

type pstate uint8

const (
	pBad     pstate = iota // malformed
	pNone                  // the text ends before any usable value
	pPartial               // a value, closed by us
	pDone                  // a complete value
)

func (p *pjson) value(i int) (jval, int, pstate) {
	s := p.s
	if i >= len(s) {
		return jval{}, i, pNone
	}
	switch c := s[i]; {
	case c == '"':
		return p.str(i)
	case c == '{':
		return p.object(i)
	case c == '[':
		return p.array(i)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(i)
	}
	for _, lit := range literals {
		if strings.HasPrefix(s[i:], lit.text) {
			return lit.v, i + len(lit.text), pDone
		}
		if strings.HasPrefix(lit.text, s[i:]) {
			return lit.v, len(s), pPartial
		}
	}
	return jval{}, i, pBad
}

var literals = []struct {
	text string
	v    jval
}{
	{"null", jval{kind: jNull}},
	{"true", jval{kind: jBool, b: true}},
	{"false", jval{kind: jBool}},
	{"NaN", jval{kind: jFloat, num: nan}},
	{"Infinity", jval{kind: jFloat, num: posInf}},
}

func (p *pjson) str(i int) (jval, int, pstate) {
	d := jdec{s: p.s}
	str, end, err := d.str(i)
	if err == nil {
		return jval{kind: jString, text: str}, end, pDone
	}
	if !p.openString(i) {
		return jval{}, i, pBad
	}
	if !p.allowStr {
		return jval{}, len(p.s), pNone
	}
	// Decode what is there, cut before an incomplete escape. Like
	// partial_json_parser, which strips the text it completes, trailing
	// whitespace is dropped.
	body := pyRStrip(p.s[i+1:])
	for cut := len(body); cut >= 0; cut-- {
		d := jdec{s: `"` + body[:cut] + `"`}
		if v, _, err := d.str(0); err == nil {
			return jval{kind: jString, text: v}, len(p.s), pPartial
		}
		if len(body)-cut > 12 {
			break
		}
	}
	return jval{}, i, pBad
}

// openString reports whether the string at i runs to the end of the text
// without a closing quote (as opposed to being malformed).
func (p *pjson) openString(i int) bool {
	s := p.s
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return false
		case c < 0x20:
			return false
		case c == '\\':
			j++
		}
	}
	return true
}

func (p *pjson) array(i int) (jval, int, pstate) {
	if p.depth++; p.depth > maxDepth {
		return jval{}, i, pBad
	}
	defer func() { p.depth-- }()
	out := jval{kind: jArray, arr: []jval{}}
	j := skipWS(p.s, i+1)
	if j < len(p.s) && p.s[j] == ']' {
		return out, j + 1, pDone
	}
	for {
		if j >= len(p.s) {
			return out, len(p.s), pPartial
		}
		v, end, st := p.value(j)
		switch st {
		case pBad:
			return jval{}, end, pBad
		case pNone:
			return out, len(p.s), pPartial
		case pPartial:
			out.arr = append(out.arr, v)
			return out, len(p.s), pPartial
		}
		out.arr = append(out.arr, v)
		j = skipWS(p.s, end)
		if j >= len(p.s) {
			return out, len(p.s), pPartial
		}
		switch p.s[j] {
		case ',':
			j = skipWS(p.s, j+1)
		case ']':
			return out, j + 1, pDone
		default:
			return jval{}, j, pBad
		}
	}
}

func (p *pjson) object(i int) (jval, int, pstate) {
	if p.depth++; p.depth > maxDepth {
		return jval{}, i, pBad
	}
	defer func() { p.depth-- }()
	out := jval{kind: jObject}
	s := p.s
	j := skipWS(s, i+1)
	if j < len(s) && s[j] == '}' {
		return out, j + 1, pDone
	}
	for {
		if j >= len(s) {
			return out, len(s), pPartial
		}
		if s[j] != '"' {
			return jval{}, j, pBad
		}
		d := jdec{s: s}
		key, end, err := d.str(j)
		if err != nil {
			if p.openString(j) {
				return out, len(s), pPartial
			}
			return jval{}, j, pBad
		}
		j = skipWS(s, end)
		if j >= len(s) {
			return out, len(s), pPartial
		}
		if s[j] != ':' {
			return jval{}, j, pBad
		}
		j = skipWS(s, j+1)
		v, end, st := p.value(j)
		switch st {
		case pBad:
			return jval{}, end, pBad
		case pNone:
			return out, len(s), pPartial
		case pPartial:
			out.set(key, v)
			return out, len(s), pPartial
		}
		out.set(key, v)
		j = skipWS(s, end)
		if j >= len(s) {
			return out, len(s), pPartial
		}
		switch s[j] {
		case ',':
			j = skipWS(s, j+1)
		case '}':
			return out, j + 1, pDone
		default:
			return jval{}, j, pBad
		}
	}
}

func (p *pjson) number(i int) (jval, int, pstate) {
	s := p.s
	if strings.HasPrefix(s[i:], "-Infinity") {
		return jval{kind: jFloat, num: negInf}, i + 9, pDone
	}
	if len(s)-i > 1 && strings.HasPrefix("-Infinity", s[i:]) {
		return jval{kind: jFloat, num: negInf}, len(s), pPartial
	}
	v, end, complete := scanNumber(s, i)
	switch {
	case end == i && i+1 == len(s):
		return jval{}, len(s), pNone // a lone "-"
	case end == i:
		return jval{}, i, pBad
	case !complete:
		return v, len(s), pPartial
	case strings.Trim(s[end:], ".eE+-") == "":
		return v, len(s), pPartial // "1." or "1e+" at the end
	}
	return v, end, pDone
}
