package chattemplate

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
)

// tojsonFilter is transformers' replacement for jinja2's tojson:
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys), without HTML escaping.
func tojsonFilter(r *renderer, v any, args []any, kw map[string]any) (any, error) {
	o := jsonOpts{itemSep: ", ", keySep: ": "}
	o.ensureASCII = truthy(arg(args, kw, 0, "ensure_ascii", false))
	indent := arg(args, kw, 1, "indent", nil)
	switch x := normalize(indent).(type) {
	case nil:
	case int64:
		o.indent, o.pretty = strings.Repeat(" ", max(int(x), 0)), true
	case string:
		o.indent, o.pretty = x, true
	default:
		return nil, fmt.Errorf("tojson: unsupported indent %s", typeName(indent))
	}
	if o.pretty {
		o.itemSep = ","
	}
	if seps := arg(args, kw, 2, "separators", nil); seps != nil {
		items, err := iterate(seps)
		if err != nil || len(items) != 2 {
			return nil, fmt.Errorf("tojson: separators must be a pair of strings")
		}
		a, ok1 := items[0].(string)
		b, ok2 := items[1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("tojson: separators must be a pair of strings")
		}
		o.itemSep, o.keySep = a, b
	}
	o.sortKeys = truthy(arg(args, kw, 3, "sort_keys", false))
	o.limit = int(min(r.b.bytes, math.MaxInt32))
	var b strings.Builder
	if err := o.write(&b, v, 0); err != nil {
		return nil, err
	}
	if b.Len() > o.limit {
		return nil, &budgetError{"tojson output over the bytes left (MaxBytes)"}
	}
	if err := r.alloc(int64(b.Len())); err != nil {
		return nil, err
	}
	return b.String(), nil
}

type jsonOpts struct {
	ensureASCII, pretty, sortKeys bool
	indent, itemSep, keySep       string
	limit                         int // stop writing past this many bytes (the render's budget)
}

func (o *jsonOpts) newline(b *strings.Builder, depth int) {
	if o.pretty {
		b.WriteByte('\n')
		for i := 0; i < depth && b.Len() <= o.limit; i++ {
			b.WriteString(o.indent)
		}
	}
}

func (o *jsonOpts) write(b *strings.Builder, v any, depth int) error {
	if b.Len() > o.limit {
		return &budgetError{"tojson output over the bytes left (MaxBytes)"}
	}
	if depth > 500 {
		return fmt.Errorf("tojson: nesting too deep")
	}
	switch v.(type) {
	case *pyRange, *seqView:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", typeName(v))
	}
	switch x := normalize(v).(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(x))
		}
	case string:
		o.writeString(b, x)
	case []any:
		return o.writeList(b, x, depth)
	case tuple:
		return o.writeList(b, x, depth)
	case *Object, map[string]any:
		keys, _ := dictKeys(x)
		if o.sortKeys {
			keys = append([]string(nil), keys...)
			sort.Strings(keys)
		}
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			o.writeString(b, k)
			b.WriteString(o.keySep)
			e, _ := dictGet(x, k)
			if err := o.write(b, e, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte('}')
	case *namespace:
		return fmt.Errorf("tojson: object of type Namespace is not JSON serializable")
	default:
		return fmt.Errorf("tojson: object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func (o *jsonOpts) writeList(b *strings.Builder, l []any, depth int) error {
	if len(l) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, e := range l {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		o.newline(b, depth+1)
		if err := o.write(b, e, depth+1); err != nil {
			return err
		}
	}
	o.newline(b, depth)
	b.WriteByte(']')
	return nil
}

// writeString escapes as Python's json encoder: the short escapes, \u00XX
// for other control characters, and with ensure_ascii every non-ASCII rune.
func (o *jsonOpts) writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case r > 0x7e && o.ensureASCII:
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
