package openaijson

// Scalar fields and member names of a request body, decoded without allocating
// where the value allows: most of a completions body is a few keys and scalars,
// and encoding/json's reflection (or a fresh string per key) cost more than the
// floor's whole decode.

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// slowScalarsOnly turns the scalar fast paths off, so tests can hold them to
// encoding/json's results.
var slowScalarsOnly = false

// memberName is raw as a string: a known field's name without allocating, anything
// else copied.
func (p *jsonReader) memberName(raw []byte) string {
	if name, ok := p.names[string(raw)]; ok {
		return name
	}
	return string(raw)
}

// scalarField decodes the common scalar fields (model, max_tokens, stream,
// ignore_eos, request_id, ...) without encoding/json's reflection when raw is plainly
// of the field's type: true/false, an integer of at most 18 digits, a string without
// escapes in valid UTF-8, a number in a float's range, a list of such integers, or
// null for a pointer or a list. It reports false, leaving dst as it
// was, for anything else, which encoding/json then decodes (or refuses) as before.
// raw was syntax-checked by capture.
func scalarField(raw []byte, dst any) bool {
	if slowScalarsOnly {
		return false
	}
	switch d := dst.(type) {
	case *bool:
		switch string(raw) {
		case "true":
			*d = true
		case "false":
			*d = false
		default:
			return false
		}
	case *int64:
		return plain(raw, d, plainInt)
	case **int64:
		return optional(raw, d, plainInt)
	case **float64:
		return optional(raw, d, plainFloat)
	case *string:
		return plain(raw, d, plainString)
	case **string:
		return optional(raw, d, plainString)
	case *[]int64:
		if string(raw) == "null" {
			*d = nil
			return true
		}
		v, ok := plainInts(raw)
		if !ok {
			return false
		}
		*d = v
	default:
		return false
	}
	return true
}

// plain decodes a required field with parse (false: not plainly of the type, dst
// unchanged).
func plain[T any](raw []byte, dst *T, parse func([]byte) (T, bool)) bool {
	v, ok := parse(raw)
	if ok {
		*dst = v
	}
	return ok
}

// optional decodes an optional field: null is nil, anything else what parse makes
// of it (false: not plainly of the type, dst unchanged).
func optional[T any](raw []byte, dst **T, parse func([]byte) (T, bool)) bool {
	if string(raw) == "null" {
		*dst = nil
		return true
	}
	v, ok := parse(raw)
	if !ok {
		return false
	}
	*dst = &v
	return true
}

func plainInt(raw []byte) (int64, bool) {
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	var v int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if len(digits) < len(raw) {
		v = -v
	}
	return v, true
}

func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') >= 0 || !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// plainFloat parses a JSON number as encoding/json does for a float64 (with
// strconv.ParseFloat: a JSON number is valid Go float syntax), refusing what is
// not a number and what overflows, which encoding/json then reports.
func plainFloat(raw []byte) (float64, bool) {
	if !jsonNumber(raw) { // ParseFloat also takes "01", "1." and hex floats
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil
}

// jsonNumber reports whether raw is exactly one JSON number (RFC 8259 section 6).
func jsonNumber(raw []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(raw) && raw[i] == '-' {
		i++
	}
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(raw)
}

// plainInts parses a JSON array of plain integers (plainInt, whitespace allowed
// between), as encoding/json would decode it into a []int64: "[]" is an empty,
// non-nil list.
func plainInts(raw []byte) ([]int64, bool) {
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil, false
	}
	in := bytes.TrimSpace(raw[1 : len(raw)-1])
	out := make([]int64, 0, bytes.Count(in, []byte{','})+1)
	if len(in) == 0 {
		return out, true
	}
	for {
		item, rest, more := bytes.Cut(in, []byte{','})
		v, ok := plainInt(bytes.TrimSpace(item))
		if !ok {
			return nil, false // "[1,]" included: plainInt refuses the empty item
		}
		out = append(out, v)
		if !more {
			return out, true
		}
		in = rest
	}
}
