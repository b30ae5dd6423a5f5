package chattemplate

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

type filterFn func(r *renderer, v any, args []any, kw map[string]any) (any, error)
type testFn func(r *renderer, v any, args []any) (bool, error)

var filters map[string]filterFn
var tests map[string]testFn

// arg returns positional argument i or keyword name, or def.
func arg(args []any, kw map[string]any, i int, name string, def any) any {
	if i < len(args) {
		return args[i]
	}
	if v, ok := kw[name]; ok {
		return v
	}
	return def
}

func init() {
	filters = map[string]filterFn{
		"abs": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
			i, f, isF, ok := num(v)
			switch {
			case !ok:
				return nil, fmt.Errorf("bad operand type for abs(): '%s'", typeName(v))
			case isF:
				return math.Abs(f), nil
			case i < 0:
				return -i, nil
			}
			return i, nil
		},
		"capitalize": strFilter(func(s string) string { v, _ := strMethod(s, "capitalize", nil, nil); return v.(string) }),
		"lower":      strFilter(strings.ToLower),
		"upper":      strFilter(strings.ToUpper),
		"title":      strFilter(jinjaTitle),
		"count":      lengthFilter,
		"length":     lengthFilter,
		"default":    defaultFilter,
		"d":          defaultFilter,
		"dictsort":   dictsortFilter,
		"first": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
			items, err := iterate(v)
			if err != nil || len(items) == 0 {
				return Undefined{"first"}, err
			}
			return items[0], nil
		},
		"last": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
			if s, ok := v.(*seqView); ok && s.isIterator() {
				return nil, fmt.Errorf("'%s' object is not reversible", s.kind)
			}
			items, err := iterate(v)
			if err != nil || len(items) == 0 {
				return Undefined{"last"}, err
			}
			return items[len(items)-1], nil
		},
		"float": func(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
			def := arg(args, kw, 0, "default", 0.0)
			if u, ok := v.(Undefined); ok { // Undefined.__float__ raises
				return nil, undefErr(u)
			}
			if _, f, _, ok := num(v); ok {
				return f, nil
			}
			if s, ok := v.(string); ok {
				if f, err := strconv.ParseFloat(strings.ReplaceAll(strings.TrimFunc(s, isPySpace), "_", ""), 64); err == nil {
					return f, nil
				}
			}
			return def, nil
		},
		"int": intFilter,
		"list": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
			l, err := iterate(v)
			return append([]any{}, l...), err
		},
		"items": func(r *renderer, v any, _ []any, _ map[string]any) (any, error) {
			if isUndef(v) {
				return generator(nil), nil
			}
			if _, ok := dictKeys(v); !ok {
				return nil, fmt.Errorf("can only get item pairs from a mapping")
			}
			items, err := r.callMethod(&method{recv: normalize(v), name: "items"}, nil, nil)
			return generator(normalize(items).([]any)), err
		},
		"join":       joinFilter,
		"map":        mapFilter,
		"select":     selectFilter(false, false),
		"reject":     selectFilter(true, false),
		"selectattr": selectFilter(false, true),
		"rejectattr": selectFilter(true, true),
		"replace": func(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
			a := []any{arg(args, kw, 0, "old", nil), arg(args, kw, 1, "new", nil)}
			if c := arg(args, kw, 2, "count", nil); c != nil {
				a = append(a, c)
			}
			return strMethod(str(v), "replace", a, nil)
		},
		"reverse": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
			if s, ok := v.(string); ok {
				return slice(s, nil, nil, int64(-1))
			}
			items, err := iterate(v)
			if err != nil {
				return nil, err
			}
			out := make([]any, len(items))
			for i, it := range items {
				out[len(items)-1-i] = it
			}
			switch normalize(v).(type) {
			case []any, tuple: // reversed(list)
				return &seqView{items: out, kind: "list_reverseiterator"}, nil
			}
			return out, nil
		},
		"round": func(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
			p, _ := toInt(arg(args, kw, 0, "precision", int64(0)))
			method := arg(args, kw, 1, "method", "common")
			_, f, _, ok := num(v)
			if !ok {
				return nil, fmt.Errorf("round of %s", typeName(v))
			}
			m := math.Pow(10, float64(p))
			switch method {
			case "common":
				if i, _, isF, _ := num(v); !isF && p >= 0 {
					return i, nil // Python's round(int, n) is the int
				}
				return pyRound(f, p), nil
			case "ceil":
				return math.Ceil(f*m) / m, nil
			case "floor":
				return math.Floor(f*m) / m, nil
			}
			return nil, fmt.Errorf("method must be common, ceil or floor")
		},
		"safe": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) { return v, nil },
		"string": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
			if err := printable(v); err != nil {
				return nil, err
			}
			return str(v), nil
		},
		"escape": escapeFilter, // applyFilter handles escape, e and safe
		"e":      escapeFilter,
		"sort":   sortFilter,
		"unique": uniqueFilter,
		"sum": func(r *renderer, v any, args []any, kw map[string]any) (any, error) {
			items, err := iterate(v)
			if err != nil {
				return nil, err
			}
			attr := arg(args, kw, 0, "attribute", nil)
			var total any = arg(args, kw, 1, "start", int64(0))
			for _, it := range items {
				if attr != nil {
					if it, err = attrPath(it, attr); err != nil {
						return nil, err
					}
				}
				if err := r.chargeBin("+", total, it); err != nil {
					return nil, err
				}
				if total, err = arith("+", total, it); err != nil {
					return nil, err
				}
			}
			return total, nil
		},
		"min":    minMaxFilter(false),
		"max":    minMaxFilter(true),
		"tojson": tojsonFilter,
		"trim":   trimFilter,
		"wordcount": func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
			return int64(len(strings.FieldsFunc(str(v), func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_') }))), nil
		},
		"indent": indentFilter,
		"format": func(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
			if len(args) > 0 && len(kw) > 0 {
				return nil, fmt.Errorf("can't handle positional and keyword arguments at the same time")
			}
			if len(kw) > 0 {
				o := NewObject()
				for _, k := range sortedKeys(kw) {
					o.Set(k, kw[k])
				}
				return pyPercent(str(v), o)
			}
			return pyPercent(str(v), tuple(args))
		},
	}
}

func strFilter(f func(string) string) filterFn {
	return func(_ *renderer, v any, _ []any, _ map[string]any) (any, error) { return f(str(v)), nil }
}

// jinjaTitle is jinja2's title filter (not str.title): words begin after
// whitespace or one of -({[<.
func jinjaTitle(s string) string {
	var b strings.Builder
	start := true
	for _, r := range s {
		if isPySpace(r) || strings.ContainsRune("-({[<", r) {
			b.WriteRune(r)
			start = true
			continue
		}
		if start {
			b.WriteRune(unicode.ToTitle(r))
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
		start = false
	}
	return b.String()
}

func lengthFilter(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
	if s, ok := v.(*seqView); ok && s.isIterator() {
		return nil, fmt.Errorf("object of type '%s' has no len()", s.kind)
	}
	switch x := normalize(v).(type) {
	case string:
		return int64(len([]rune(x))), nil
	case []any:
		return int64(len(x)), nil
	case tuple:
		return int64(len(x)), nil
	case *Object:
		return int64(x.Len()), nil
	case map[string]any:
		return int64(len(x)), nil
	case Undefined:
		return int64(0), nil
	}
	return nil, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}

func defaultFilter(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
	def := arg(args, kw, 0, "default_value", "")
	boolean := truthy(arg(args, kw, 1, "boolean", false))
	if isUndef(v) || (boolean && !truthy(v)) {
		return def, nil
	}
	return v, nil
}

func intFilter(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
	if u, ok := v.(Undefined); ok { // Undefined.__int__ raises
		return nil, undefErr(u)
	}
	def := arg(args, kw, 0, "default", int64(0))
	base, _ := toInt(arg(args, kw, 1, "base", int64(10)))
	switch x := normalize(v).(type) {
	case int64:
		return x, nil
	case bool:
		i, _ := toInt(x)
		return int64(i), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return def, nil
		}
		return int64(x), nil
	case string:
		s := strings.ReplaceAll(strings.TrimFunc(x, isPySpace), "_", "")
		if i, ok := parsePyInt(s, base); ok {
			return i, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
	}
	return def, nil
}

// parsePyInt is Python's int(s, base): a 0x/0o/0b prefix is allowed when it
// matches the base, and base 0 means "from the prefix".
func parsePyInt(s string, base int) (int64, bool) {
	neg := false
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		neg, s = s[0] == '-', s[1:]
	}
	lower := strings.ToLower(s)
	for _, p := range []struct {
		prefix string
		base   int
	}{{"0x", 16}, {"0o", 8}, {"0b", 2}} {
		if strings.HasPrefix(lower, p.prefix) && (base == p.base || base == 0) {
			s, base = s[2:], p.base
		}
	}
	if base == 0 {
		base = 10
	}
	i, err := strconv.ParseInt(s, base, 64)
	if err != nil || s == "" || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	if neg {
		i = -i
	}
	return i, true
}

// attrPath is jinja2's make_attrgetter: "a.b.0" looks up each part as an item.
func attrPath(v, attr any) (any, error) {
	s, ok := attr.(string)
	if !ok {
		return getItem(v, attr)
	}
	for _, part := range strings.Split(s, ".") {
		var key any = part
		if i, err := strconv.ParseInt(part, 10, 64); err == nil {
			key = i
		}
		var err error
		if v, err = getItem(v, key); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func joinFilter(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
	sep := str(arg(args, kw, 0, "d", ""))
	attr := arg(args, kw, 1, "attribute", nil)
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	for i, it := range items {
		if attr != nil {
			if it, err = attrPath(it, attr); err != nil {
				return nil, err
			}
		}
		parts[i] = str(it)
	}
	return strings.Join(parts, sep), nil
}

func mapFilter(r *renderer, v any, args []any, kw map[string]any) (any, error) {
	out, err := mapItems(r, v, args, kw)
	return generator(out), err
}

func mapItems(r *renderer, v any, args []any, kw map[string]any) ([]any, error) {
	if !truthy(v) { // jinja2: "if value: for item in value"
		return nil, nil
	}
	items, err := iterate(v)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	if attr, ok := kw["attribute"]; ok {
		def, hasDef := kw["default"]
		for i, it := range items {
			if out[i], err = attrPath(it, attr); err != nil {
				return nil, err
			}
			if hasDef && isUndef(out[i]) {
				out[i] = def
			}
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("map requires a filter name or attribute=")
	}
	name, _ := args[0].(string)
	f, ok := filters[name]
	if !ok {
		return nil, fmt.Errorf("unsupported filter %q in map", name)
	}
	for i, it := range items {
		if out[i], err = f(r, it, args[1:], kw); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func selectFilter(reject, byAttr bool) filterFn {
	return func(r *renderer, v any, args []any, _ map[string]any) (any, error) {
		if !truthy(v) { // jinja2: "if value: for item in value"
			return generator(nil), nil
		}
		items, err := iterate(v)
		if err != nil {
			return nil, err
		}
		var attr any
		if byAttr {
			if len(args) == 0 {
				return nil, fmt.Errorf("missing attribute")
			}
			attr, args = args[0], args[1:]
		}
		var test testFn
		if len(args) > 0 {
			name, _ := args[0].(string)
			if test = tests[name]; test == nil {
				return nil, fmt.Errorf("unsupported test %q", name)
			}
			args = args[1:]
		}
		out := []any{}
		for _, it := range items {
			x := it
			if byAttr {
				if x, err = attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			ok := truthy(x)
			if test != nil {
				if ok, err = test(r, x, args); err != nil {
					return nil, err
				}
			}
			if ok != reject {
				out = append(out, it)
			}
		}
		return generator(out), nil
	}
}

func escapeFilter(_ *renderer, v any, _ []any, _ map[string]any) (any, error) {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(str(v)), nil
}

func trimFilter(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
	chars := arg(args, kw, 0, "chars", nil)
	cs, has := chars.(string)
	return pyStrip(str(v), "strip", cs, has), nil
}

func indentFilter(_ *renderer, v any, args []any, kw map[string]any) (any, error) {
	width := arg(args, kw, 0, "width", int64(4))
	first := truthy(arg(args, kw, 1, "first", false))
	blank := truthy(arg(args, kw, 2, "blank", false))
	ind, ok := width.(string)
	if !ok {
		n, _ := toInt(width)
		ind = strings.Repeat(" ", n)
	}
	lines := pySplitlines(str(v) + "\n")
	var rv string
	if blank {
		rv = strings.Join(lines, "\n"+ind)
	} else {
		rv = lines[0]
		if len(lines) > 1 {
			rest := make([]string, len(lines)-1)
			for i, l := range lines[1:] {
				if l != "" {
					l = ind + l
				}
				rest[i] = l
			}
			rv += "\n" + strings.Join(rest, "\n")
		}
	}
	if first {
		rv = ind + rv
	}
	return rv, nil
}

// pySplitlines is Python's str.splitlines() without keepends.
func pySplitlines(s string) []string {
	var out []string
	start := 0
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		switch rs[i] {
		case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			out = append(out, string(rs[start:i]))
			if rs[i] == '\r' && i+1 < len(rs) && rs[i+1] == '\n' {
				i++
			}
			start = i + 1
		}
	}
	if start < len(rs) {
		out = append(out, string(rs[start:]))
	}
	return out
}

// pyRound is Python's round(float, ndigits): the decimal rounding of the
// exact binary value, ties to even.
func pyRound(f float64, ndigits int) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	s := strconv.FormatFloat(f, 'f', ndigits, 64) // exact, round-half-even on the true value
	r, _ := strconv.ParseFloat(s, 64)
	return r
}

// generator wraps what a jinja2 generator filter yields.
func generator(items []any) *seqView { return &seqView{items: items, kind: "generator"} }
