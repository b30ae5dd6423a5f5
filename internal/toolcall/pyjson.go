package toolcall

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads JSON the way Python's json.loads does and writes it the
// way json.dumps does, because vLLM's parsers re-serialize arguments with
// json.dumps: ", " and ": " separators, keys in input order, duplicate
// keys keeping their first position and last value, integers verbatim and
// floats in Python's repr.

type jkind uint8

const (
	jNull jkind = iota
	jBool
	jInt   // text holds the digits
	jFloat // num holds the value
	jString
	jArray
	jObject
)

type jval struct {
	kind jkind
	b    bool
	num  float64
	text string // jInt digits or jString value
	arr  []jval
	keys []string
	vals []jval
}

func (v *jval) set(key string, val jval) {
	for i, k := range v.keys {
		if k == key {
			v.vals[i] = val
			return
		}
	}
	v.keys = append(v.keys, key)
	v.vals = append(v.vals, val)
}

func (v jval) get(key string) (jval, bool) {
	if v.kind != jObject {
		return jval{}, false
	}
	for i, k := range v.keys {
		if k == key {
			return v.vals[i], true
		}
	}
	return jval{}, false
}

func (v jval) has(key string) bool { _, ok := v.get(key); return ok }

// truthy is Python's bool() of the decoded value.
func (v jval) truthy() bool {
	switch v.kind {
	case jNull:
		return false
	case jBool:
		return v.b
	case jInt:
		return strings.Trim(v.text, "-0") != ""
	case jFloat:
		return v.num != 0
	case jString:
		return v.text != ""
	case jArray:
		return len(v.arr) > 0
	}
	return len(v.keys) > 0
}

var errJSON = errors.New("toolcall: invalid JSON")

// pyLoads is json.loads: one value, surrounded only by whitespace.
func pyLoads(s string) (jval, error) {
	v, end, err := pyRawDecode(s, skipWS(s, 0))
	if err != nil {
		return jval{}, err
	}
	if skipWS(s, end) != len(s) {
		return jval{}, errJSON
	}
	return v, nil
}

// pyRawDecode is JSONDecoder.raw_decode from byte offset i: the value
// starting exactly at i and the offset just past it.
func pyRawDecode(s string, i int) (jval, int, error) {
	d := jdec{s: s, depth: 0}
	v, end, err := d.value(i)
	return v, end, err
}

// isCompleteJSON is vLLM's is_complete_json. An object or array can only be
// complete when its last non-space byte closes it: the growing call of a
// stream is refused without reading it all again on every delta.
func isCompleteJSON(s string) bool {
	t := strings.TrimRight(s, " \t\n\r")
	if i := skipWS(t, 0); i < len(t) && (t[i] == '{' && t[len(t)-1] != '}' || t[i] == '[' && t[len(t)-1] != ']') {
		return false
	}
	return validJSON(s)
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// maxDepth bounds nesting; Python would raise RecursionError near 1000.
const maxDepth = 512

type jdec struct {
	s     string
	depth int
}

func (d *jdec) value(i int) (jval, int, error) {
	s := d.s
	if i >= len(s) {
		return jval{}, i, errJSON
	}
	switch c := s[i]; {
	case c == '"':
		str, end, err := d.str(i)
		return jval{kind: jString, text: str}, end, err
	case c == '{':
		return d.object(i)
	case c == '[':
		return d.array(i)
	case c == 'n' && strings.HasPrefix(s[i:], "null"):
		return jval{kind: jNull}, i + 4, nil
	case c == 't' && strings.HasPrefix(s[i:], "true"):
		return jval{kind: jBool, b: true}, i + 4, nil
	case c == 'f' && strings.HasPrefix(s[i:], "false"):
		return jval{kind: jBool}, i + 5, nil
	case c == 'N' && strings.HasPrefix(s[i:], "NaN"):
		return jval{kind: jFloat, num: math.NaN()}, i + 3, nil
	case c == 'I' && strings.HasPrefix(s[i:], "Infinity"):
		return jval{kind: jFloat, num: math.Inf(1)}, i + 8, nil
	case c == '-' && strings.HasPrefix(s[i:], "-Infinity"):
		return jval{kind: jFloat, num: math.Inf(-1)}, i + 9, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number(i)
	}
	return jval{}, i, errJSON
}

func (d *jdec) number(i int) (jval, int, error) {
	v, end, _ := scanNumber(d.s, i)
	if end == i {
		return jval{}, i, errJSON
	}
	return v, end, nil
}

// scanNumber reads the JSON number at i. complete is false when the text
// ends inside it (a longer text could extend it) or it is malformed.
func scanNumber(s string, i int) (v jval, end int, complete bool) {
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	intStart := j
	if j < len(s) && s[j] == '0' {
		j++
	} else {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
	}
	if j == intStart {
		return jval{}, i, false
	}
	isFloat := false
	if j < len(s) && s[j] == '.' && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9' {
		isFloat = true
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			isFloat = true
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			j = k
		}
	}
	complete = j < len(s)
	text := s[i:j]
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return jval{}, i, false
		}
		return jval{kind: jFloat, num: f}, j, complete
	}
	if text == "-0" {
		text = "0"
	}
	return jval{kind: jInt, text: text}, j, complete
}

func (d *jdec) str(i int) (string, int, error) {
	s := d.s
	j := i + 1
	// Fast path: no escapes.
	for k := j; k < len(s); k++ {
		c := s[k]
		if c == '"' {
			return s[j:k], k + 1, nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
	}
	var b strings.Builder
	for j < len(s) {
		c := s[j]
		switch {
		case c == '"':
			return b.String(), j + 1, nil
		case c < 0x20:
			return "", j, errJSON
		case c != '\\':
			b.WriteByte(c)
			j++
			continue
		}
		if j+1 >= len(s) {
			return "", j, errJSON
		}
		e := s[j+1]
		j += 2
		switch e {
		case '"', '\\', '/':
			b.WriteByte(e)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, n, ok := readU(s, j)
			if !ok {
				return "", j, errJSON
			}
			j = n
			b.WriteRune(r)
		default:
			return "", j, errJSON
		}
	}
	return "", j, errJSON
}

// readU reads the 4 hex digits at j (after "\u"), pairing surrogates. A
// lone surrogate becomes U+FFFD: Go strings cannot hold it.
func readU(s string, j int) (rune, int, bool) {
	r, ok := hex4(s, j)
	if !ok {
		return 0, j, false
	}
	j += 4
	if utf16.IsSurrogate(r) {
		if r < 0xdc00 && j+6 <= len(s) && s[j] == '\\' && s[j+1] == 'u' {
			if r2, ok := hex4(s, j+2); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
				return utf16.DecodeRune(r, r2), j + 6, true
			}
		}
		return utf8.RuneError, j, true
	}
	return r, j, true
}

func hex4(s string, j int) (rune, bool) {
	if j+4 > len(s) {
		return 0, false
	}
	v, err := strconv.ParseUint(s[j:j+4], 16, 32)
	if err != nil {
		return 0, false
	}
	return rune(v), true
}

func (d *jdec) array(i int) (jval, int, error) {
	if d.depth++; d.depth > maxDepth {
		return jval{}, i, errJSON
	}
	defer func() { d.depth-- }()
	out := jval{kind: jArray, arr: []jval{}}
	j := skipWS(d.s, i+1)
	if j < len(d.s) && d.s[j] == ']' {
		return out, j + 1, nil
	}
	for {
		v, end, err := d.value(skipWS(d.s, j))
		if err != nil {
			return jval{}, end, err
		}
		out.arr = append(out.arr, v)
		j = skipWS(d.s, end)
		if j >= len(d.s) {
			return jval{}, j, errJSON
		}
		switch d.s[j] {
		case ',':
			j++
		case ']':
			return out, j + 1, nil
		default:
			return jval{}, j, errJSON
		}
	}
}

func (d *jdec) object(i int) (jval, int, error) {
	if d.depth++; d.depth > maxDepth {
		return jval{}, i, errJSON
	}
	defer func() { d.depth-- }()
	out := jval{kind: jObject}
	j := skipWS(d.s, i+1)
	if j < len(d.s) && d.s[j] == '}' {
		return out, j + 1, nil
	}
	for {
		if j >= len(d.s) || d.s[j] != '"' {
			return jval{}, j, errJSON
		}
		key, end, err := d.str(j)
		if err != nil {
			return jval{}, end, err
		}
		j = skipWS(d.s, end)
		if j >= len(d.s) || d.s[j] != ':' {
			return jval{}, j, errJSON
		}
		v, end, err := d.value(skipWS(d.s, j+1))
		if err != nil {
			return jval{}, end, err
		}
		out.set(key, v)
		j = skipWS(d.s, end)
		if j >= len(d.s) {
			return jval{}, j, errJSON
		}
		switch d.s[j] {
		case ',':
			j = skipWS(d.s, j+1)
		case '}':
			return out, j + 1, nil
		default:
			return jval{}, j, errJSON
		}
	}
}

// pyDumps is json.dumps(v, ensure_ascii=asciiOnly).
func pyDumps(v jval, asciiOnly bool) string {
	var b strings.Builder
	writeJSON(&b, v, asciiOnly)
	return b.String()
}

func writeJSON(b *strings.Builder, v jval, asciiOnly bool) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jBool:
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case jInt:
		b.WriteString(v.text)
	case jFloat:
		b.WriteString(pyFloatRepr(v.num))
	case jString:
		writeJSONString(b, v.text, asciiOnly)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSON(b, e, asciiOnly)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeJSONString(b, k, asciiOnly)
			b.WriteString(": ")
			writeJSON(b, v.vals[i], asciiOnly)
		}
		b.WriteByte('}')
	}
}

const hexDigits = "0123456789abcdef"

func writeJSONString(b *strings.Builder, s string, asciiOnly bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				writeU(b, r)
			case asciiOnly && r > 0x7e:
				if r > 0xffff {
					r1, r2 := utf16.EncodeRune(r)
					writeU(b, r1)
					writeU(b, r2)
				} else {
					writeU(b, r)
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

func writeU(b *strings.Builder, r rune) {
	b.WriteString(`\u`)
	b.WriteByte(hexDigits[r>>12&0xf])
	b.WriteByte(hexDigits[r>>8&0xf])
	b.WriteByte(hexDigits[r>>4&0xf])
	b.WriteByte(hexDigits[r&0xf])
}

// pyFloatRepr is Python's repr of a float, as json.dumps writes it.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // [-]d[.ddd]e±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
	}
	p := strings.IndexByte(e, 'e')
	digits := strings.Replace(e[:p], ".", "", 1)
	exp, _ := strconv.Atoi(e[p+1:])
	decpt := exp + 1
	var out string
	switch {
	case decpt > 16 || decpt <= -4:
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		x := strconv.Itoa(exp)
		if len(x) < 2 {
			x = "0" + x
		}
		out += "e" + sign + x
	case decpt <= 0:
		out = "0." + strings.Repeat("0", -decpt) + digits
	case decpt >= len(digits):
		out = digits + strings.Repeat("0", decpt-len(digits)) + ".0"
	default:
		out = digits[:decpt] + "." + digits[decpt:]
	}
	if neg {
		out = "-" + out
	}
	return out
}

var (
	nan    = math.NaN()
	posInf = math.Inf(1)
	negInf = math.Inf(-1)
)
