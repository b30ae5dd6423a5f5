package chattemplate

import (
	"fmt"
	"strings"
)

// markup is markupsafe's Markup, which the safe and escape filters return:
// it prints as its text but shows as Markup('...') inside a printed list,
// escapes plain strings joined to it with +, and its string methods escape
// their arguments and return Markup.
type markup string

var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

// escapeValue is markupsafe.escape: Markup stays, anything else is str()'d
// and escaped.
func escapeValue(v any) markup {
	if m, ok := v.(markup); ok {
		return m
	}
	return markup(htmlEscaper.Replace(str(v)))
}

// markupAdd is Markup.__add__/__radd__ for a Markup and a str.
func markupAdd(l, r any) (any, bool, error) {
	_, lm := l.(markup)
	_, rm := r.(markup)
	if !lm && !rm {
		return nil, false, nil
	}
	_, ls := normalize(l).(string)
	_, rs := normalize(r).(string)
	if !ls || !rs {
		return nil, true, fmt.Errorf("unsupported operand type(s) for +: '%s' and '%s'", typeName(l), typeName(r))
	}
	return escapeValue(l) + escapeValue(r), true, nil
}

// markupMethods are the str methods markupsafe wraps: they escape string
// arguments and return Markup (or a list of Markup).
var markupMethods = setOf("capitalize", "title", "lower", "upper", "replace", "lstrip", "rstrip", "strip",
	"zfill", "split", "rsplit", "splitlines", "join", "removeprefix", "removesuffix")

func (r *renderer) callMarkupMethod(recv markup, name string, args []any, kw map[string]any) (any, error) {
	if !markupMethods[name] {
		if err := r.chargeMethod(string(recv), name, plainArgs(args), plainKw(kw)); err != nil {
			return nil, err
		}
		return strMethod(string(recv), name, plainArgs(args), plainKw(kw))
	}
	if err := r.alloc(satMul(6, sizeOf(args, r.b.bytes+1))); err != nil { // escaping grows a string at most 6x
		return nil, err
	}
	esc := make([]any, len(args))
	for i, a := range args {
		switch a.(type) {
		case string, markup:
			esc[i] = string(escapeValue(a))
		case []any, tuple:
			items, _ := iterate(a)
			l := make([]any, len(items))
			for j, it := range items {
				l[j] = string(escapeValue(it))
			}
			esc[i] = l
		default:
			esc[i] = a
		}
	}
	if err := r.chargeMethod(string(recv), name, esc, plainKw(kw)); err != nil {
		return nil, err
	}
	v, err := strMethod(string(recv), name, esc, plainKw(kw))
	return toMarkup(v), err
}

func toMarkup(v any) any {
	switch x := v.(type) {
	case string:
		return markup(x)
	case []any:
		for i, e := range x {
			x[i] = toMarkup(e)
		}
	}
	return v
}

// plainArgs turns Markup arguments into plain strings for operations that
// treat them as str.
func plainArgs(args []any) []any {
	for i, a := range args {
		if m, ok := a.(markup); ok {
			args[i] = string(m)
		}
	}
	return args
}

func plainKw(kw map[string]any) map[string]any {
	for k, a := range kw {
		if m, ok := a.(markup); ok {
			kw[k] = string(m)
		}
	}
	return kw
}

// markupFilters keep a Markup subject Markup (jinja2 applies them to
// soft_str(value), which is the Markup itself); escaping filters leave it as is.
var markupFilters = setOf("capitalize", "upper", "lower", "trim", "string", "reverse", "indent")

// applyFilter runs a filter with jinja2's Markup rules around it.
func (r *renderer) applyFilter(name string, v any, args []any, kw map[string]any) (any, error) {
	if err := r.chargeFilter(name, v, args, kw); err != nil {
		return nil, err
	}
	m, isMarkup := v.(markup)
	switch name {
	case "default", "d":
		return filters[name](r, v, args, kw)
	case "safe":
		if isMarkup {
			return m, nil
		}
		return markup(str(v)), nil
	case "escape", "e":
		return escapeValue(v), nil
	}
	args, kw = plainArgs(args), plainKw(kw)
	if !isMarkup {
		return filters[name](r, v, args, kw)
	}
	if name == "format" {
		return nil, fmt.Errorf("unsupported: the format filter on Markup")
	}
	out, err := filters[name](r, string(m), args, kw)
	if err == nil && markupFilters[name] {
		if s, ok := out.(string); ok {
			return markup(s), nil
		}
	}
	return out, err
}
