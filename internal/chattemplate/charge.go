package chattemplate

import (
	"math"
	"math/bits"
	"strings"
)

// What each operation is charged before it runs: an upper bound of the
// bytes it builds (a Go list element is elemBytes, a string its length) and
// the steps it takes to read its operands.

// count is how many elements iterating v yields (runes of a string at most
// its bytes).
func count(v any) int64 {
	switch x := normalize(v).(type) {
	case string:
		return int64(len(x))
	case []any:
		return int64(len(x))
	case tuple:
		return int64(len(x))
	case *Object:
		return int64(x.Len())
	case map[string]any:
		return int64(len(x))
	case *seqView:
		return int64(len(x.items))
	case *pyRange:
		return int64(len(x.items))
	}
	return 0
}

// listBytes is what a Go list of v's elements costs (a string's runes become
// strings: a header and an interface each).
func listBytes(v any) int64 {
	if _, ok := normalize(v).(string); ok {
		return satMul(count(v), 2*elemBytes)
	}
	return satMul(count(v), elemBytes)
}

// copyBytes is what a copy of v costs.
func copyBytes(v any) int64 {
	if s, ok := normalize(v).(string); ok {
		return int64(len(s))
	}
	return listBytes(v)
}

// sliceBytes is what slicing v costs (a string goes through its runes).
func sliceBytes(v any) int64 {
	if s, ok := normalize(v).(string); ok {
		return satMul(int64(len(s)), 9)
	}
	return listBytes(v)
}

// iterate is iterate charged for the list it builds.
func (r *renderer) iterate(v any) ([]any, error) {
	switch normalize(v).(type) {
	case string, *Object, map[string]any:
		if err := r.alloc(listBytes(v)); err != nil {
			return nil, err
		}
	}
	return iterate(v)
}

// readOnlyFilters read their subject and build nothing in proportion to it.
var readOnlyFilters = setOf("length", "count", "first", "last", "default", "d", "abs", "int", "float",
	"round", "min", "max", "safe")

// constantFilters take the same time whatever the size of a list subject
// (a string's length still counts its code points).
var constantFilters = setOf("length", "count", "first", "last", "default", "d", "safe")

// listFilters build a list (or a value the size of one) from their subject.
var listFilters = setOf("list", "reverse", "sort", "unique", "map", "select", "reject", "selectattr",
	"rejectattr", "dictsort", "items", "batch", "slice")

// chargeFilter charges filter name applied to v before it runs.
func (r *renderer) chargeFilter(name string, v any, args []any, kw map[string]any) error {
	steps := 1
	if _, isStr := v.(string); !constantFilters[name] || isStr { // no walk for length of a list
		w := r.work(v)
		steps += w
		if name == "sort" || name == "dictsort" || name == "unique" {
			steps += w * bits.Len(uint(w))
		}
	}
	if err := r.spend(steps); err != nil {
		return err
	}
	switch {
	case readOnlyFilters[name]:
		return nil
	case listFilters[name]:
		return r.alloc(listBytes(v))
	}
	limit := r.b.bytes + 1
	switch name {
	case "join":
		sep, _ := arg(args, kw, 0, "d", "").(string)
		return r.alloc(satAdd(sizeOf(v, limit), satMul(count(v), int64(len(sep)))))
	case "replace":
		s, old, repl := str2(v, limit), argString(args, 0), argString(args, 1)
		if s == nil {
			return r.alloc(math.MaxInt64)
		}
		return r.alloc(replaceBound(*s, old, repl))
	case "indent":
		lines := int64(1)
		if s := str2(v, limit); s != nil {
			lines += int64(strings.Count(*s, "\n"))
		}
		return r.alloc(satAdd(sizeOf(v, limit), satMul(lines+1, widthOf(arg(args, kw, 0, "width", int64(4))))))
	case "format":
		vals := append([]any{}, args...)
		for _, x := range kw {
			vals = append(vals, x)
		}
		s := str2(v, limit)
		if s == nil {
			return r.alloc(math.MaxInt64)
		}
		return r.alloc(formatBound(limit, *s, vals...))
	case "escape", "e":
		return r.alloc(satMul(6, sizeOf(v, limit)))
	case "tojson":
		return r.alloc(satAdd(sizeOf(v, limit), widthOf(arg(args, kw, 1, "indent", nil))))
	case "sum":
		return nil // charged per addition
	case "wordcount": // the words are listed to be counted: at most one per 2 bytes
		return r.alloc(satMul(8, sizeOf(v, limit)))
	}
	return r.alloc(satMul(4, sizeOf(v, limit))) // str, upper, title, trim, ...: a copy (case changes may grow it)
}

// str2 is str(v) when printing v fits in limit, else nil.
func str2(v any, limit int64) *string {
	if sizeOf(v, limit) > limit {
		return nil
	}
	s := str(v)
	return &s
}

func argString(args []any, i int) string {
	if i < len(args) {
		if s, ok := args[i].(string); ok {
			return s
		}
	}
	return ""
}

// widthOf is the size of an indent given as a number or a string.
func widthOf(w any) int64 {
	switch x := normalize(w).(type) {
	case string:
		return int64(len(x))
	case nil:
		return 0
	}
	n, _ := toInt(w)
	return int64(max(n, 0))
}

// chargeMethod charges recv.name(args) on a string before it runs.
func (r *renderer) chargeMethod(s, name string, args []any, kw map[string]any) error {
	steps := 1 + len(s)>>6
	for _, a := range args {
		steps += r.work(a)
	}
	if err := r.spend(steps); err != nil {
		return err
	}
	limit := r.b.bytes + 1
	switch name {
	case "startswith", "endswith", "find", "rfind", "index", "count", "isdigit", "isalpha", "isalnum",
		"isspace", "isupper", "islower":
		return nil
	case "replace":
		return r.alloc(replaceBound(s, argString(args, 0), argString(args, 1)))
	case "join":
		if len(args) == 0 {
			return nil
		}
		return r.alloc(satAdd(sizeOf(args[0], limit), satMul(count(args[0]), int64(len(s)))))
	case "format":
		vals := append([]any{}, args...)
		for _, x := range kw {
			vals = append(vals, x)
		}
		return r.alloc(formatBound(limit, s, vals...))
	case "split", "rsplit", "splitlines":
		return r.alloc(satMul(int64(len(s))+1, 2*elemBytes))
	case "zfill", "ljust", "rjust", "center":
		w := int64(0)
		if len(args) > 0 {
			w = widthOf(args[0])
		}
		return r.alloc(satAdd(int64(len(s)), w))
	}
	return r.alloc(satMul(3, int64(len(s)))) // upper, strip, title, ...: a copy
}

// chargeBin charges l op rv before arith builds it.
func (r *renderer) chargeBin(op string, l, rv any) error {
	if err := r.scan(l, rv); err != nil {
		return err
	}
	switch op {
	case "+":
		return r.alloc(satAdd(copyBytes(l), copyBytes(rv)))
	case "*":
		lc, rc := count(l), count(rv)
		if lc > 0 {
			n, _ := toInt(rv)
			return r.alloc(satMul(copyBytes(l), int64(max(n, 0))))
		}
		if rc > 0 {
			n, _ := toInt(l)
			return r.alloc(satMul(copyBytes(rv), int64(max(n, 0))))
		}
	case "%":
		if s, ok := l.(string); ok {
			return r.alloc(formatBound(r.b.bytes+1, s, rv))
		}
		if m, ok := l.(markup); ok {
			return r.alloc(formatBound(r.b.bytes+1, string(m), rv))
		}
	}
	return nil
}
