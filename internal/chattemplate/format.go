package chattemplate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// pyPercent is Python's printf-style "fmt % args" for str: args is a tuple
// (positional), a mapping (for %(name)s) or one value.
func pyPercent(format string, args any) (string, error) {
	var pos []any
	var mapping any
	// CPython skips the "not all arguments converted" check when the
	// argument supports indexing and is not a tuple or str (dicts, lists).
	mappingLike := false
	switch a := args.(type) {
	case tuple:
		pos = a
	case *Object, map[string]any:
		mapping, pos, mappingLike = a, []any{a}, true
	case []any, *pyRange, Undefined:
		pos, mappingLike = []any{a}, true
	default:
		pos = []any{args}
	}
	used := 0
	next := func() (any, error) {
		if used >= len(pos) {
			return nil, fmt.Errorf("not enough arguments for format string")
		}
		used++
		return pos[used-1], nil
	}
	var b strings.Builder
	usedMapping := false
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		var v any
		haveV := false
		if format[i] == '(' {
			end := strings.IndexByte(format[i:], ')')
			if end < 0 || mapping == nil {
				return "", fmt.Errorf("format requires a mapping")
			}
			key := format[i+1 : i+end]
			val, ok := dictGet(mapping, key)
			if !ok {
				return "", fmt.Errorf("KeyError: %s", repr(key))
			}
			v, haveV, usedMapping = val, true, true
			i += end + 1
		}
		spec := fmtSpec{prec: -1}
		for ; i < len(format) && strings.IndexByte("-+ 0#", format[i]) >= 0; i++ {
			switch format[i] {
			case '-':
				spec.left = true
			case '+':
				spec.plus = true
			case ' ':
				spec.space = true
			case '0':
				spec.zero = true
			case '#':
				spec.alt = true
			}
		}
		for ; i < len(format) && isDigit(format[i]); i++ {
			spec.width = spec.width*10 + int(format[i]-'0')
		}
		if i < len(format) && format[i] == '.' {
			spec.prec = 0
			for i++; i < len(format) && isDigit(format[i]); i++ {
				spec.prec = spec.prec*10 + int(format[i]-'0')
			}
		}
		if i >= len(format) {
			return "", fmt.Errorf("incomplete format")
		}
		conv := format[i]
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if !haveV {
			var err error
			if v, err = next(); err != nil {
				return "", err
			}
		}
		s, err := spec.format(conv, v)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	if used < len(pos) && !usedMapping && !mappingLike {
		return "", fmt.Errorf("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

type fmtSpec struct {
	left, plus, space, zero, alt bool
	width, prec                  int
}

func (s fmtSpec) format(conv byte, v any) (string, error) {
	var body string
	numeric := false
	switch conv {
	case 's', 'r', 'a':
		if conv == 's' {
			body = str(v)
		} else {
			body = repr(v)
		}
		if s.prec >= 0 && len([]rune(body)) > s.prec {
			body = string([]rune(body)[:s.prec])
		}
	case 'd', 'i', 'u', 'x', 'X', 'o':
		i, f, isF, ok := num(v)
		if !ok {
			return "", fmt.Errorf("%%%c format: a real number is required, not %s", conv, typeName(v))
		}
		if isF {
			if conv == 'x' || conv == 'X' || conv == 'o' {
				return "", fmt.Errorf("%%%c format: an integer is required, not float", conv)
			}
			i = int64(math.Trunc(f))
		}
		numeric = true
		base := map[byte]int{'x': 16, 'X': 16, 'o': 8}[conv]
		if base == 0 {
			base = 10
		}
		body = strconv.FormatInt(i, base)
		if conv == 'X' {
			body = strings.ToUpper(body)
		}
		if s.alt && base != 10 {
			prefix := map[byte]string{'x': "0x", 'X': "0X", 'o': "0o"}[conv]
			if strings.HasPrefix(body, "-") {
				body = "-" + prefix + body[1:]
			} else {
				body = prefix + body
			}
		}
	case 'f', 'F', 'e', 'E', 'g', 'G':
		_, f, _, ok := num(v)
		if !ok {
			return "", fmt.Errorf("must be real number, not %s", typeName(v))
		}
		numeric = true
		prec := s.prec
		if prec < 0 {
			prec = 6
		}
		switch conv {
		case 'g', 'G':
			if prec == 0 {
				prec = 1
			}
			body = strconv.FormatFloat(f, 'g', prec, 64)
			if mant, exp, ok := strings.Cut(body, "e"); ok && len(exp) == 2 {
				body = mant + "e" + exp[:1] + "0" + exp[1:]
			}
		default:
			body = strconv.FormatFloat(f, conv|0x20, prec, 64)
		}
		if conv >= 'A' && conv <= 'Z' {
			body = strings.ToUpper(body)
		}
	case 'c':
		switch x := v.(type) {
		case string:
			body = x
		default:
			i, ok := toInt(v)
			if !ok {
				return "", fmt.Errorf("%%c requires int or char")
			}
			body = string(rune(i))
		}
	default:
		return "", fmt.Errorf("unsupported format character '%c'", conv)
	}
	if numeric && !strings.HasPrefix(body, "-") {
		if s.plus {
			body = "+" + body
		} else if s.space {
			body = " " + body
		}
	}
	if pad := s.width - len([]rune(body)); pad > 0 {
		switch {
		case s.left:
			body += strings.Repeat(" ", pad)
		case s.zero && numeric:
			sign := ""
			if strings.HasPrefix(body, "-") || strings.HasPrefix(body, "+") || strings.HasPrefix(body, " ") {
				sign, body = body[:1], body[1:]
			}
			body = sign + strings.Repeat("0", pad) + body
		default:
			body = strings.Repeat(" ", pad) + body
		}
	}
	return body, nil
}
