package chattemplate

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Values are plain Go values with Python meaning: nil is None, bool, int64,
// float64, string, []any (list), tuple, *Object or map[string]any (dict),
// Undefined. Ints from encoding/json (float64) print as floats, so callers
// should decode with DecodeJSON, which keeps ints as ints and key order as
// Python's json module does.

// Undefined is what a missing variable, attribute or key evaluates to,
// following jinja2's default Undefined: empty when printed, false, iterable as
// empty, and an error for most other uses.
type Undefined struct{ name string }

type tuple []any

// seqView is a lazy Python sequence a filter or method returns: a generator
// (select, map, items ...: always true, no len, prints with an address) or
// a dict view (dict.items()/keys()/values(): sized, prints as dict_items([...])).
type seqView struct {
	items []any
	kind  string // "generator", "list_reverseiterator", "dict_items", "dict_keys", "dict_values"
}

func (v *seqView) isIterator() bool { return !strings.HasPrefix(v.kind, "dict_") }

// pyRange is what range() returns: it iterates as its items but prints as
// Python's range object does.
type pyRange struct {
	items []any
	args  [3]int
	n     int
}

// Object is a JSON object that keeps its keys in insertion order, as a
// Python dict does, so tojson and iteration print keys as the client sent them.
type Object struct {
	keys []string
	vals map[string]any
}

// NewObject returns an empty Object.
func NewObject() *Object { return &Object{vals: map[string]any{}} }

// Set adds or replaces a key; a new key goes last.
func (o *Object) Set(k string, v any) {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// Get returns the value of a key.
func (o *Object) Get(k string) (any, bool) { v, ok := o.vals[k]; return v, ok }

// Keys returns the keys in order.
func (o *Object) Keys() []string { return o.keys }

// Len is the number of keys.
func (o *Object) Len() int { return len(o.keys) }

// DecodeJSON decodes JSON the way Python's json.loads does: objects keep key
// order (*Object), integers stay int64, other numbers are float64.
func DecodeJSON(data []byte) (any, error) {
	d := json.NewDecoder(strings.NewReader(string(data)))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, fmt.Errorf("chattemplate: trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := NewObject()
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				o.Set(kt.(string), v)
			}
			_, err := d.Token()
			return o, err
		case '[':
			l := []any{}
			for d.More() {
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := d.Token()
			return l, err
		}
	case json.Number:
		return numberValue(t), nil
	}
	return t, nil
}

func numberValue(n json.Number) any {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i
	}
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
}

// normalize turns the integer and number types a Go caller may pass into the
// interpreter's int64/float64.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case float32:
		return float64(x)
	case json.Number:
		return numberValue(x)
	case []map[string]any:
		l := make([]any, len(x))
		for i, m := range x {
			l[i] = m
		}
		return l
	case markup:
		return string(x)
	case *pyRange:
		return x.items
	case *seqView:
		return x.items
	case []string:
		l := make([]any, len(x))
		for i, s := range x {
			l[i] = s
		}
		return l
	}
	return v
}

func truthy(v any) bool {
	if s, ok := v.(*seqView); ok {
		return s.isIterator() || len(s.items) > 0
	}
	switch x := normalize(v).(type) {
	case nil, Undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case tuple:
		return len(x) > 0
	case *Object:
		return x.Len() > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

func isUndef(v any) bool { _, ok := v.(Undefined); return ok }

// typeName is Python's type(v).__name__, for error messages.
func typeName(v any) string {
	if s, ok := v.(*seqView); ok {
		return s.kind
	}
	if _, ok := v.(markup); ok {
		return "Markup"
	}
	switch normalize(v).(type) {
	case nil:
		return "NoneType"
	case Undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case tuple:
		return "tuple"
	case *Object, map[string]any:
		return "dict"
	case *namespace:
		return "Namespace"
	case *macro:
		return "Macro"
	}
	return fmt.Sprintf("%T", v)
}

// sortedKeys gives a map[string]any's keys in a stable order (Go maps have no
// insertion order; sorted is the documented stand-in).
func sortedKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// messageKeyOrder is the key order of the messages vLLM builds (and
// PrepareMessages returns as maps): iterating or printing such a message
// lists its keys as Python would.
var messageKeyOrder = []string{"role", "content", "tool_calls", "reasoning", "reasoning_content", "tool_call_id", "name", "tools"}

// mapKeys orders a map[string]any's keys: the message keys vLLM sets, in
// its order, then the rest sorted.
func mapKeys(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for _, k := range messageKeyOrder {
		if _, ok := m[k]; ok {
			ks = append(ks, k)
		}
	}
	if len(ks) == len(m) {
		return ks
	}
	var rest []string
	for k := range m {
		if !slices.Contains(messageKeyOrder, k) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(ks, rest...)
}

func dictKeys(v any) ([]string, bool) {
	switch x := v.(type) {
	case *Object:
		return x.keys, true
	case map[string]any:
		return mapKeys(x), true
	}
	return nil, false
}

func dictGet(v any, k string) (any, bool) {
	switch x := v.(type) {
	case *Object:
		r, ok := x.vals[k]
		return r, ok
	case map[string]any:
		r, ok := x[k]
		return r, ok
	}
	return nil, false
}

// str is Python's str(v) as jinja2 prints it.
func str(v any) string {
	switch x := normalize(v).(type) {
	case string:
		return x
	case Undefined:
		return ""
	}
	var b strings.Builder
	writeRepr(&b, v, false)
	return b.String()
}

func repr(v any) string {
	var b strings.Builder
	writeRepr(&b, v, true)
	return b.String()
}

func writeRepr(b *strings.Builder, v any, quote bool) {
	if m, ok := v.(markup); ok {
		if quote {
			b.WriteString("Markup(")
			pyQuote(b, string(m))
			b.WriteByte(')')
		} else {
			b.WriteString(string(m))
		}
		return
	}
	if s, ok := v.(*seqView); ok {
		// Iterators print with a memory address; views are deterministic.
		b.WriteString(s.kind)
		if s.isIterator() {
			b.WriteString(" object")
			return
		}
		b.WriteByte('(')
		writeRepr(b, s.items, true)
		b.WriteByte(')')
		return
	}
	if r, ok := v.(*pyRange); ok {
		if r.args[2] == 1 {
			fmt.Fprintf(b, "range(%d, %d)", r.args[0], r.args[1])
		} else {
			fmt.Fprintf(b, "range(%d, %d, %d)", r.args[0], r.args[1], r.args[2])
		}
		return
	}
	switch x := normalize(v).(type) {
	case nil:
		b.WriteString("None")
	case Undefined:
		if !quote {
			return
		}
		b.WriteString("Undefined")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case string:
		if quote {
			pyQuote(b, x)
		} else {
			b.WriteString(x)
		}
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, true)
		}
		b.WriteByte(']')
	case tuple:
		b.WriteByte('(')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e, true)
		}
		if len(x) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(')')
	case *Object, map[string]any:
		keys, _ := dictKeys(x)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pyQuote(b, k)
			b.WriteString(": ")
			e, _ := dictGet(x, k)
			writeRepr(b, e, true)
		}
		b.WriteByte('}')
	case *namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, x.obj, true)
		b.WriteByte('>')
	default:
		fmt.Fprintf(b, "<%s>", typeName(v))
	}
}

// pyFloat is Python's repr(float): shortest round-trip digits, fixed notation
// for exponents in [-4, 16), otherwise d.ddde+XX.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp >= -4 && exp < 16 {
		if exp >= 0 {
			if len(digits) <= exp+1 {
				out = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
			} else {
				out = digits[:exp+1] + "." + digits[exp+1:]
			}
		} else {
			out = "0." + strings.Repeat("0", -exp-1) + digits
		}
	} else {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		out = fmt.Sprintf("%se%s%02d", m, sign, exp)
	}
	if neg {
		out = "-" + out
	}
	return out
}

// pyQuote writes Python's repr of a str.
func pyQuote(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x7f:
			b.WriteRune(r)
		case r == utf8.RuneError:
			b.WriteRune(r)
		case !pyPrintable(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				fmt.Fprintf(b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}

// pyPrintable approximates str.isprintable for one non-ASCII rune: Python
// treats categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs (except space) as not printable.
func pyPrintable(r rune) bool {
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp, unicode.Zs) {
		return false
	}
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

// printable refuses values whose Python str() holds a memory address, which
// no one could reproduce byte for byte.
func printable(v any) error {
	switch x := v.(type) {
	case *seqView:
		if x.isIterator() {
			return fmt.Errorf("unsupported: printing a %s (Python prints its memory address); add | list", x.kind)
		}
	case *macro, builtin, *method:
		return fmt.Errorf("unsupported: printing a %s", typeName(v))
	case []any:
		for _, e := range x {
			if err := printable(e); err != nil {
				return err
			}
		}
	case tuple:
		for _, e := range x {
			if err := printable(e); err != nil {
				return err
			}
		}
	}
	return nil
}
