package chattemplate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// pyStrFormat is str.format for the common cases: {} / {0} / {name} fields,
// !r !s !a conversions and format specs [[fill]align][sign][0][width][,_]
// [.precision][type] for str, int and float. Field attribute or index
// access and nested fields are refused.
func pyStrFormat(f string, args []any, kw map[string]any) (string, error) {
	var b strings.Builder
	auto := 0
	manual := false
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '{' && i+1 < len(f) && f[i+1] == '{':
			b.WriteByte('{')
			i++
			continue
		case c == '}' && i+1 < len(f) && f[i+1] == '}':
			b.WriteByte('}')
			i++
			continue
		case c == '}':
			return "", fmt.Errorf("single '}' encountered in format string")
		case c != '{':
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(f[i:], '}')
		if end < 0 {
			return "", fmt.Errorf("single '{' encountered in format string")
		}
		field := f[i+1 : i+end]
		i += end
		name, spec, _ := strings.Cut(field, ":")
		name, conv, _ := strings.Cut(name, "!")
		if strings.ContainsAny(name, "[.") || strings.Contains(spec, "{") {
			return "", fmt.Errorf("unsupported: str.format field %q", field)
		}
		var v any
		switch {
		case name == "":
			if manual {
				return "", fmt.Errorf("cannot switch from manual field specification to automatic field numbering")
			}
			if auto >= len(args) {
				return "", fmt.Errorf("replacement index %d out of range for positional args tuple", auto)
			}
			v = args[auto]
			auto++
		case name[0] >= '0' && name[0] <= '9':
			n, err := strconv.Atoi(name)
			if err != nil || auto > 0 {
				return "", fmt.Errorf("bad field %q", name)
			}
			manual = true
			if n >= len(args) {
				return "", fmt.Errorf("replacement index %d out of range for positional args tuple", n)
			}
			v = args[n]
		default:
			var ok bool
			if v, ok = kw[name]; !ok {
				return "", fmt.Errorf("KeyError: %s", repr(name))
			}
		}
		switch conv {
		case "":
		case "s":
			v = str(v)
		case "r", "a":
			v = repr(v)
		default:
			return "", fmt.Errorf("unknown conversion specifier %s", conv)
		}
		s, err := formatSpec(v, spec)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// formatSpec is format(v, spec) for str, int and float values.
func formatSpec(v any, spec string) (string, error) {
	if spec == "" {
		if err := printable(v); err != nil {
			return "", err
		}
		return str(v), nil
	}
	fill, align := " ", byte(0)
	if len(spec) >= 2 && strings.IndexByte("<>^=", spec[1]) >= 0 {
		fill, align, spec = spec[:1], spec[1], spec[2:]
	} else if len(spec) >= 1 && strings.IndexByte("<>^=", spec[0]) >= 0 {
		align, spec = spec[0], spec[1:]
	}
	sign := byte('-')
	if len(spec) > 0 && strings.IndexByte("+- ", spec[0]) >= 0 {
		sign, spec = spec[0], spec[1:]
	}
	alt := false
	if len(spec) > 0 && spec[0] == '#' {
		alt, spec = true, spec[1:]
	}
	if len(spec) > 0 && spec[0] == '0' {
		if align == 0 {
			fill, align = "0", '='
		}
		spec = spec[1:]
	}
	width := 0
	for len(spec) > 0 && isDigit(spec[0]) {
		width = width*10 + int(spec[0]-'0')
		spec = spec[1:]
	}
	group := ""
	if len(spec) > 0 && (spec[0] == ',' || spec[0] == '_') {
		group, spec = spec[:1], spec[1:]
	}
	prec := -1
	if len(spec) > 0 && spec[0] == '.' {
		prec = 0
		spec = spec[1:]
		for len(spec) > 0 && isDigit(spec[0]) {
			prec = prec*10 + int(spec[0]-'0')
			spec = spec[1:]
		}
	}
	if len(spec) > 1 {
		return "", fmt.Errorf("unsupported: format spec %q", spec)
	}
	typ := byte(0)
	if len(spec) == 1 {
		typ = spec[0]
	}
	var body string
	numeric := false
	neg := false
	switch x := normalize(v).(type) {
	case string:
		if typ != 0 && typ != 's' || sign != '-' || group != "" || align == '=' {
			return "", fmt.Errorf("unsupported: format spec for str")
		}
		body = x
		if prec >= 0 && len([]rune(body)) > prec {
			body = string([]rune(body)[:prec])
		}
		if align == 0 {
			align = '<'
		}
	case int64, bool, float64:
		numeric = true
		i, fv, isF, _ := num(x)
		switch {
		case isF && (math.IsInf(fv, 0) || math.IsNaN(fv)) && typ != 'd' && typ != 'x' && typ != 'X' && typ != 'o' && typ != 'b':
			body = strings.TrimPrefix(pyFloat(fv), "+")
			if typ == '%' {
				body += "%"
			}
			if typ >= 'A' && typ <= 'Z' {
				body = strings.ToUpper(body)
			}
		case typ == 0 && !isF:
			if prec >= 0 {
				return "", fmt.Errorf("precision not allowed in integer format specifier")
			}
			typ = 'd'
		case typ == 0 && prec < 0:
			body = pyFloat(fv) // repr
		case typ == 0:
			body = formatG(fv, prec, alt, true)
		case typ == 'g' || typ == 'G':
			body = formatG(fv, prec, alt, false)
			if typ == 'G' {
				body = strings.ToUpper(body)
			}
		}
		if body == "" {
			switch typ {
			case 'd', 'x', 'X', 'o', 'b':
				if isF {
					return "", fmt.Errorf("unknown format code '%c' for object of type 'float'", typ)
				}
				base := map[byte]int{'d': 10, 'x': 16, 'X': 16, 'o': 8, 'b': 2}[typ]
				body = strconv.FormatInt(i, base)
				if typ == 'X' {
					body = strings.ToUpper(body)
				}
				if alt && typ != 'd' {
					p := map[byte]string{'x': "0x", 'X': "0X", 'o': "0o", 'b': "0b"}[typ]
					if strings.HasPrefix(body, "-") {
						body = "-" + p + body[1:]
					} else {
						body = p + body
					}
				}
			case 'f', 'F', 'e', 'E', '%':
				if prec < 0 {
					prec = 6
				}
				if typ == '%' {
					body = strconv.FormatFloat(fv*100, 'f', prec, 64) + "%"
				} else {
					body = strconv.FormatFloat(fv, typ|0x20, prec, 64)
					if typ == 'E' || typ == 'F' {
						body = strings.ToUpper(body)
					}
				}
			default:
				return "", fmt.Errorf("unsupported: format type '%c'", typ)
			}
		}
		if strings.HasPrefix(body, "-") {
			neg, body = true, body[1:]
		}
		if group != "" {
			intPart, frac, _ := strings.Cut(body, ".")
			if typ == 'd' || typ == 'f' || typ == 'F' || typ == '%' {
				var g []string
				for len(intPart) > 3 {
					g = append([]string{intPart[len(intPart)-3:]}, g...)
					intPart = intPart[:len(intPart)-3]
				}
				intPart = strings.Join(append([]string{intPart}, g...), group)
			}
			body = intPart
			if frac != "" {
				body += "." + frac
			}
		}
		if align == 0 {
			align = '>'
		}
	default:
		return "", fmt.Errorf("unsupported: format spec for %s", typeName(v))
	}
	signStr := ""
	if numeric {
		switch {
		case neg:
			signStr = "-"
		case sign == '+':
			signStr = "+"
		case sign == ' ':
			signStr = " "
		}
	}
	pad := width - len([]rune(body)) - len(signStr)
	if pad <= 0 {
		return signStr + body, nil
	}
	switch align {
	case '<':
		return signStr + body + strings.Repeat(fill, pad), nil
	case '^':
		return strings.Repeat(fill, pad/2) + signStr + body + strings.Repeat(fill, pad-pad/2), nil
	case '=':
		return signStr + strings.Repeat(fill, pad) + body, nil
	}
	return strings.Repeat(fill, pad) + signStr + body, nil
}

// formatG is Python's 'g' presentation (and, with noneType, the float
// format with a precision but no type: at least one digit after the point,
// scientific from exponent precision-1 on).
func formatG(f float64, prec int, alt, noneType bool) string {
	p := prec
	if p < 0 {
		p = 6
	}
	if p == 0 {
		p = 1
	}
	sci := strconv.FormatFloat(f, 'e', p-1, 64)
	_, expS, _ := strings.Cut(sci, "e")
	exp, _ := strconv.Atoi(expS)
	limit := p
	if noneType {
		limit = p - 1
	}
	var out string
	if exp < -4 || exp >= limit {
		out = sci
		if !alt {
			mant, e, _ := strings.Cut(sci, "e")
			if strings.Contains(mant, ".") {
				mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
			}
			out = mant + "e" + e
		}
	} else {
		out = strconv.FormatFloat(f, 'f', max(p-1-exp, 0), 64)
		if !alt && strings.Contains(out, ".") {
			out = strings.TrimRight(strings.TrimRight(out, "0"), ".")
		}
		if noneType && !strings.Contains(out, ".") {
			out += ".0"
		}
	}
	return out
}
