package toolcall

import "strings"

// validJSON reports whether json.loads accepts s, without building the
// value: the hot check of hermes streaming, made on every delta.
func validJSON(s string) bool {
	v := jvalid{s: s}
	end, ok := v.value(skipWS(s, 0), 0)
	return ok && skipWS(s, end) == len(s)
}

type jvalid struct{ s string }

func (v jvalid) value(i, depth int) (int, bool) {
	s := v.s
	if i >= len(s) || depth > maxDepth {
		return i, false
	}
	switch c := s[i]; {
	case c == '"':
		return v.str(i)
	case c == '{':
		return v.object(i, depth)
	case c == '[':
		return v.array(i, depth)
	case c == '-' || (c >= '0' && c <= '9'):
		if strings.HasPrefix(s[i:], "-Infinity") {
			return i + 9, true
		}
		_, end, _ := scanNumber(s, i)
		return end, end > i
	}
	for _, lit := range []string{"null", "true", "false", "NaN", "Infinity"} {
		if strings.HasPrefix(s[i:], lit) {
			return i + len(lit), true
		}
	}
	return i, false
}

func (v jvalid) str(i int) (int, bool) {
	s := v.s
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return j, false
		case c == '\\':
			if j+1 >= len(s) {
				return j, false
			}
			switch s[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j++
			case 'u':
				if _, ok := hex4(s, j+2); !ok {
					return j, false
				}
				j += 5
			default:
				return j, false
			}
		}
	}
	return len(s), false
}

func (v jvalid) array(i, depth int) (int, bool) {
	s := v.s
	j := skipWS(s, i+1)
	if j < len(s) && s[j] == ']' {
		return j + 1, true
	}
	for {
		end, ok := v.value(skipWS(s, j), depth+1)
		if !ok {
			return end, false
		}
		j = skipWS(s, end)
		if j >= len(s) {
			return j, false
		}
		switch s[j] {
		case ',':
			j++
		case ']':
			return j + 1, true
		default:
			return j, false
		}
	}
}

func (v jvalid) object(i, depth int) (int, bool) {
	s := v.s
	j := skipWS(s, i+1)
	if j < len(s) && s[j] == '}' {
		return j + 1, true
	}
	for {
		if j >= len(s) || s[j] != '"' {
			return j, false
		}
		end, ok := v.str(j)
		if !ok {
			return end, false
		}
		j = skipWS(s, end)
		if j >= len(s) || s[j] != ':' {
			return j, false
		}
		if end, ok = v.value(skipWS(s, j+1), depth+1); !ok {
			return end, false
		}
		j = skipWS(s, end)
		if j >= len(s) {
			return j, false
		}
		switch s[j] {
		case ',':
			j = skipWS(s, j+1)
		case '}':
			return j + 1, true
		default:
			return j, false
		}
	}
}
