package chattemplate

import (
	"fmt"
	"strings"
	"unicode"
)

// builtin is a global function (range, namespace, raise_exception, ...).
type builtin func(r *renderer, args []any, kw map[string]any) (any, error)

// method is a Python method bound to its receiver (a str, dict or list).
type method struct {
	recv any
	name string
}

// Only methods that do not mutate: ImmutableSandboxedEnvironment refuses
// list.append, dict.update and the like, and so do we (they are absent).
var strMethods = setOf("startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
	"replace", "upper", "lower", "title", "capitalize", "find", "rfind", "count", "join",
	"splitlines", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "removeprefix",
	"removesuffix", "index", "zfill", "format")
var dictMethods = setOf("items", "keys", "values", "get")
var listMethods = setOf("index", "count")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func argStr(args []any, i int, what string) (string, bool, error) {
	if i >= len(args) || args[i] == nil {
		return "", false, nil
	}
	s, ok := args[i].(string)
	if !ok {
		return "", false, fmt.Errorf("%s arg must be None or str, not %s", what, typeName(args[i]))
	}
	return s, true, nil
}

func (r *renderer) callMethod(m *method, args []any, kw map[string]any) (any, error) {
	if err := r.spend(1); err != nil {
		return nil, err
	}
	switch recv := m.recv.(type) {
	case string:
		if err := r.chargeMethod(recv, m.name, args, kw); err != nil {
			return nil, err
		}
		return strMethod(recv, m.name, args, kw)
	case *Object, map[string]any:
		if err := r.alloc(listBytes(recv) * 2); err != nil {
			return nil, err
		}
		switch m.name {
		case "items":
			keys, _ := dictKeys(recv)
			out := make([]any, len(keys))
			for i, k := range keys {
				v, _ := dictGet(recv, k)
				out[i] = tuple{k, v}
			}
			return &seqView{items: out, kind: "dict_items"}, nil
		case "keys", "values":
			keys, _ := dictKeys(recv)
			out := make([]any, len(keys))
			for i, k := range keys {
				if m.name == "keys" {
					out[i] = k
				} else {
					out[i], _ = dictGet(recv, k)
				}
			}
			return &seqView{items: out, kind: "dict_" + m.name}, nil
		case "get":
			if len(args) == 0 {
				return nil, fmt.Errorf("get expected at least 1 argument")
			}
			if k, ok := args[0].(string); ok {
				if v, ok := dictGet(recv, k); ok {
					return v, nil
				}
			}
			if len(args) > 1 {
				return args[1], nil
			}
			return nil, nil
		}
	case []any:
		if err := r.scan(recv); err != nil {
			return nil, err
		}
		if len(args) != 1 {
			return nil, fmt.Errorf("%s() takes exactly one argument", m.name)
		}
		n := 0
		for i, e := range recv {
			if equal(e, args[0]) {
				if m.name == "index" {
					return int64(i), nil
				}
				n++
			}
		}
		if m.name == "index" {
			return nil, fmt.Errorf("%s is not in list", repr(args[0]))
		}
		return int64(n), nil
	case *loopObj:
		if len(args) == 0 {
			return nil, fmt.Errorf("no items for cycling given")
		}
		return args[recv.i%len(args)], nil
	}
	return nil, fmt.Errorf("unsupported method %s.%s", typeName(m.recv), m.name)
}

func strMethod(s, name string, args []any, kw map[string]any) (any, error) {
	switch name {
	case "startswith", "endswith":
		if len(args) != 1 {
			return nil, fmt.Errorf("%s() takes exactly one argument", name)
		}
		var prefixes []any
		switch p := args[0].(type) {
		case string:
			prefixes = []any{p}
		case tuple:
			prefixes = p
		default:
			return nil, fmt.Errorf("%s first arg must be str or a tuple of str, not %s", name, typeName(args[0]))
		}
		for _, p := range prefixes {
			ps, ok := p.(string)
			if !ok {
				return nil, fmt.Errorf("tuple for %s must only contain str", name)
			}
			if (name == "startswith" && strings.HasPrefix(s, ps)) || (name == "endswith" && strings.HasSuffix(s, ps)) {
				return true, nil
			}
		}
		return false, nil
	case "strip", "lstrip", "rstrip":
		chars, has, err := argStr(args, 0, name)
		if err != nil {
			return nil, err
		}
		return pyStrip(s, name, chars, has), nil
	case "split", "rsplit":
		sep, has, err := argStr(args, 0, name)
		if err != nil {
			return nil, err
		}
		if v, ok := kw["sep"]; ok {
			if sep, has = v.(string); !has && v != nil {
				return nil, fmt.Errorf("must be str or None")
			}
		}
		maxsplit := -1
		if len(args) > 1 {
			maxsplit, _ = toInt(args[1])
		}
		if v, ok := kw["maxsplit"]; ok {
			maxsplit, _ = toInt(v)
		}
		return pySplit(s, sep, has, maxsplit, name == "rsplit")
	case "replace":
		if len(args) < 2 {
			return nil, fmt.Errorf("replace expected at least 2 arguments")
		}
		old, ok1 := args[0].(string)
		nw, ok2 := args[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("replace arguments must be str")
		}
		n := -1
		if len(args) > 2 {
			n, _ = toInt(args[2])
		}
		return strings.Replace(s, old, nw, n), nil
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	case "title":
		return pyTitle(s), nil
	case "capitalize":
		rs := []rune(strings.ToLower(s))
		if len(rs) > 0 {
			rs[0] = unicode.ToUpper(rs[0])
		}
		return string(rs), nil
	case "find", "rfind", "index", "count":
		sub, ok := "", false
		if len(args) > 0 {
			sub, ok = args[0].(string)
		}
		if !ok {
			return nil, fmt.Errorf("%s() argument must be str", name)
		}
		switch name {
		case "count":
			if sub == "" {
				return int64(len([]rune(s)) + 1), nil
			}
			return int64(strings.Count(s, sub)), nil
		case "rfind":
			i := strings.LastIndex(s, sub)
			if i < 0 {
				return int64(-1), nil
			}
			return int64(len([]rune(s[:i]))), nil
		}
		i := strings.Index(s, sub)
		if i < 0 {
			if name == "index" {
				return nil, fmt.Errorf("substring not found")
			}
			return int64(-1), nil
		}
		return int64(len([]rune(s[:i]))), nil
	case "join":
		if len(args) != 1 {
			return nil, fmt.Errorf("join() takes exactly one argument")
		}
		items, err := iterate(args[0])
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		for i, it := range items {
			p, ok := it.(string)
			if !ok {
				return nil, fmt.Errorf("sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			parts[i] = p
		}
		return strings.Join(parts, s), nil
	case "splitlines":
		lines := pySplitlines(s)
		out := make([]any, len(lines))
		for i, l := range lines {
			out[i] = l
		}
		return out, nil
	case "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower":
		return strPredicate(s, name), nil
	case "removeprefix":
		p, _, err := argStr(args, 0, name)
		return strings.TrimPrefix(s, p), err
	case "removesuffix":
		p, _, err := argStr(args, 0, name)
		return strings.TrimSuffix(s, p), err
	case "format":
		return pyStrFormat(s, args, kw)
	case "zfill":
		w := 0
		if len(args) > 0 {
			w, _ = toInt(args[0])
		}
		n := len([]rune(s))
		if n >= w {
			return s, nil
		}
		sign := ""
		if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
			sign, s = s[:1], s[1:]
		}
		return sign + strings.Repeat("0", w-n) + s, nil
	}
	return nil, fmt.Errorf("unsupported method str.%s", name)
}

func strPredicate(s, name string) bool {
	if s == "" {
		return false
	}
	cased := false
	for _, r := range s {
		var ok bool
		switch name {
		case "isdigit":
			ok = unicode.IsDigit(r)
		case "isalpha":
			ok = unicode.IsLetter(r)
		case "isalnum":
			ok = unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r)
		case "isspace":
			ok = isPySpace(r)
		case "isupper":
			ok = !unicode.IsLower(r)
			cased = cased || unicode.IsUpper(r)
		case "islower":
			ok = !unicode.IsUpper(r)
			cased = cased || unicode.IsLower(r)
		}
		if !ok {
			return false
		}
	}
	if name == "isupper" || name == "islower" {
		return cased
	}
	return true
}

func pyStrip(s, name, chars string, has bool) string {
	cut := isPySpace
	if has {
		cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
	}
	switch name {
	case "lstrip":
		return strings.TrimLeftFunc(s, cut)
	case "rstrip":
		return strings.TrimRightFunc(s, cut)
	}
	return strings.TrimFunc(s, cut)
}

func pySplit(s, sep string, has bool, maxsplit int, fromRight bool) (any, error) {
	var parts []string
	if !has {
		parts = splitWhitespace(s, maxsplit, fromRight)
	} else {
		if sep == "" {
			return nil, fmt.Errorf("empty separator")
		}
		switch {
		case maxsplit < 0:
			parts = strings.Split(s, sep)
		case !fromRight:
			parts = strings.SplitN(s, sep, maxsplit+1)
		default:
			for len(parts) < maxsplit {
				i := strings.LastIndex(s, sep)
				if i < 0 {
					break
				}
				parts = append([]string{s[i+len(sep):]}, parts...)
				s = s[:i]
			}
			parts = append([]string{s}, parts...)
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func splitWhitespace(s string, maxsplit int, fromRight bool) []string {
	if maxsplit < 0 {
		return strings.FieldsFunc(s, isPySpace)
	}
	var parts []string
	if !fromRight {
		for len(parts) < maxsplit {
			s = strings.TrimLeftFunc(s, isPySpace)
			i := strings.IndexFunc(s, isPySpace)
			if s == "" || i < 0 {
				break
			}
			parts = append(parts, s[:i])
			s = s[i:]
		}
		if s = strings.TrimLeftFunc(s, isPySpace); s != "" {
			parts = append(parts, s)
		}
		return parts
	}
	for len(parts) < maxsplit {
		s = strings.TrimRightFunc(s, isPySpace)
		i := strings.LastIndexFunc(s, isPySpace)
		if s == "" || i < 0 {
			break
		}
		_, sz := decodeLastRune(s[:i+1])
		parts = append([]string{s[i+sz:]}, parts...)
		s = s[:i]
	}
	if s = strings.TrimRightFunc(s, isPySpace); s != "" {
		parts = append([]string{s}, parts...)
	}
	return parts
}

func decodeLastRune(s string) (rune, int) {
	rs := []rune(s)
	r := rs[len(rs)-1]
	return r, len(string(r))
}

// pyTitle is Python's str.title: a cased letter after an uncased one starts a word.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
	}
	return b.String()
}
