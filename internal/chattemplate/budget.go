package chattemplate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// A render is bounded three ways, whoever wrote the template: steps (work:
// statements, loop iterations, calls, and scans in proportion to the size of
// what they scan), bytes (every value produced: strings, lists, dicts, the
// output, charged before it is built from an upper bound of its size) and the
// caller's context (checked every ctxEvery steps, so a cancelled request
// stops within a few milliseconds).

// ErrBudget is returned (wrapped, naming the bound) when a render exceeds
// Input.MaxSteps, Input.MaxBytes or Input.MaxOutputBytes.
var ErrBudget = errors.New("render exceeded its budget")

// Defaults for Input's bounds: a base every template gets, plus an allowance
// per byte of input (messages, tools, documents, kwargs), so a long
// conversation renders through any real template while a template alone
// (tiny input) cannot build more than a few MiB or run for long.
const (
	DefaultMaxOutputBytes = 64 << 20
	DefaultMaxBytes       = 4 << 20
	DefaultMaxSteps       = 256 << 10
	bytesPerInputByte     = 16
	stepsPerInputByte     = 4
	ctxEvery              = 1024
	elemBytes             = 16 // what a list element or dict entry costs beyond its value
)

type budgetError struct{ what string }

func (e *budgetError) Error() string   { return ErrBudget.Error() + ": " + e.what }
func (e *budgetError) Is(t error) bool { return t == ErrBudget }

// budget holds what is left of a render's allowances.
type budget struct {
	steps, bytes int64
	maxSteps     int64
	maxBytes     int64
	tick         int64
	ctx          context.Context
}

func newBudget(ctx context.Context, in *Input) budget {
	b := budget{maxSteps: in.MaxSteps, maxBytes: in.MaxBytes, ctx: ctx, tick: ctxEvery}
	if b.maxSteps <= 0 || b.maxBytes <= 0 {
		size := inputSize(in)
		if b.maxSteps <= 0 {
			b.maxSteps = satAdd(DefaultMaxSteps, satMul(stepsPerInputByte, size))
		}
		if b.maxBytes <= 0 {
			b.maxBytes = satAdd(DefaultMaxBytes, satMul(bytesPerInputByte, size))
		}
	}
	b.steps, b.bytes = b.maxSteps, b.maxBytes
	return b
}

// inputSize is the printed size of what the render is given.
func inputSize(in *Input) int64 {
	n := int64(0)
	for _, m := range in.Messages {
		n = satAdd(n, sizeOf(m, math.MaxInt64))
	}
	n = satAdd(n, sizeOf(in.Tools, math.MaxInt64))
	n = satAdd(n, sizeOf(in.Documents, math.MaxInt64))
	for k, v := range in.Kwargs {
		n = satAdd(n, int64(len(k))+sizeOf(v, math.MaxInt64))
	}
	return n
}

// spend charges n work units and checks the context every ctxEvery units.
func (r *renderer) spend(n int) error {
	r.b.steps -= int64(n)
	if r.b.steps < 0 {
		return &budgetError{fmt.Sprintf("more than %d steps (MaxSteps)", r.b.maxSteps)}
	}
	if r.b.tick -= int64(n); r.b.tick <= 0 {
		r.b.tick = ctxEvery
		if err := r.b.ctx.Err(); err != nil {
			return fmt.Errorf("render stopped: %w", err)
		}
	}
	return nil
}

// alloc charges n bytes of values about to be produced (and n/64 steps, the
// work of building them), before they are built.
func (r *renderer) alloc(n int64) error {
	r.b.bytes -= n
	if n < 0 || r.b.bytes < 0 {
		return &budgetError{fmt.Sprintf("values produced over %d bytes (MaxBytes)", r.b.maxBytes)}
	}
	return r.spend(int(min(n>>6, math.MaxInt32)))
}

// allocOf charges what printing v takes (the bytes left bound the walk).
func (r *renderer) allocOf(vs ...any) error {
	n := int64(0)
	for _, v := range vs {
		n = satAdd(n, sizeOf(v, r.b.bytes+1))
	}
	return r.alloc(n)
}

// scan charges the work of reading v (comparing, searching, counting).
func (r *renderer) scan(vs ...any) error {
	n := 1
	for _, v := range vs {
		n += r.work(v)
	}
	return r.spend(n)
}

// work is the cost in steps of one deep pass over v (comparing, hashing or
// searching it): an element a step, a string a step per 64 bytes, a list
// held many times counted every time, as comparing walks it every time. The
// walk stops past the steps left.
func (r *renderer) work(v any) int {
	n := int64(0)
	workWalk(v, r.b.steps+1, &n)
	return int(min(n, math.MaxInt32))
}

func workWalk(v any, limit int64, n *int64) {
	if *n > limit {
		return
	}
	if s, ok := v.(*seqView); ok {
		v = s.items
	}
	switch x := normalize(v).(type) {
	case string:
		*n += int64(len(x) >> 6)
	case []any:
		workList(x, limit, n)
	case tuple:
		workList(x, limit, n)
	case *Object:
		for _, k := range x.Keys() {
			e, _ := x.Get(k)
			if *n++; *n > limit {
				return
			}
			workWalk(e, limit, n)
		}
	case map[string]any:
		for _, e := range x {
			if *n++; *n > limit {
				return
			}
			workWalk(e, limit, n)
		}
	}
}

func workList(l []any, limit int64, n *int64) {
	for _, e := range l {
		if *n++; *n > limit {
			return
		}
		switch e.(type) {
		case string, int64, float64, bool, nil:
		default:
			workWalk(e, limit, n)
		}
	}
}

// sizeOf is an upper bound of the bytes printing v (str or repr) produces,
// plus what a Go list element costs, walking no further than limit: a result
// over limit means "too big". A list that holds one big value many times
// counts it every time, as printing it would.
func sizeOf(v any, limit int64) int64 {
	n := int64(0)
	sizeWalk(v, limit, &n)
	return n
}

func sizeWalk(v any, limit int64, n *int64) {
	if *n > limit {
		return
	}
	switch x := v.(type) {
	case string:
		*n = satAdd(*n, int64(len(x))+2)
		return
	case markup:
		*n = satAdd(*n, int64(len(x))+10)
		return
	case *seqView:
		*n += 16
		sizeWalk(x.items, limit, n)
		return
	case *namespace:
		*n += 16
		sizeWalk(x.obj, limit, n)
		return
	}
	switch x := normalize(v).(type) {
	case []any:
		*n += 2
		for _, e := range x {
			*n += elemBytes
			if sizeWalk(e, limit, n); *n > limit {
				return
			}
		}
	case tuple:
		*n += 2
		for _, e := range x {
			*n += elemBytes
			if sizeWalk(e, limit, n); *n > limit {
				return
			}
		}
	case map[string]any: // any order adds up the same (no sorted key list built)
		*n += 2
		for k, e := range x {
			*n = satAdd(*n, int64(len(k))+2*elemBytes)
			if sizeWalk(e, limit, n); *n > limit {
				return
			}
		}
	case *Object:
		keys, _ := dictKeys(x)
		*n += 2
		for _, k := range keys {
			*n = satAdd(*n, int64(len(k))+2*elemBytes)
			e, _ := dictGet(x, k)
			if sizeWalk(e, limit, n); *n > limit {
				return
			}
		}
	default:
		*n += 24 // numbers, None, booleans, ranges, callables
	}
}

// formatBound bounds what a printf-style or str.format format produces: the
// format, every width and precision its fields spell, and the arguments once
// per field.
func formatBound(limit int64, format string, args ...any) int64 {
	n := satAdd(int64(len(format)), specDigits(format))
	fields := int64(strings.Count(format, "%") + strings.Count(format, "{"))
	a := int64(0)
	for _, v := range args {
		a = satAdd(a, sizeOf(v, limit))
	}
	return satAdd(n, satMul(fields, a))
}

// specDigits adds up the numbers spelled inside format fields: from a '%' to
// its conversion letter (past a "(name)"), from a '{' to its '}'.
func specDigits(format string) int64 {
	n := int64(0)
	for i := 0; i < len(format); i++ {
		brace := format[i] == '{'
		if !brace && format[i] != '%' {
			continue
		}
		j := i + 1
		if !brace && j < len(format) && format[j] == '(' {
			if k := strings.IndexByte(format[j:], ')'); k >= 0 {
				j += k + 1
			}
		}
		for ; j < len(format); j++ {
			c := format[j]
			if isDigit(c) {
				v := int64(0)
				for ; j < len(format) && isDigit(format[j]); j++ {
					v = satAdd(satMul(v, 10), int64(format[j]-'0'))
				}
				n = satAdd(n, v)
				j--
				continue
			}
			if brace && c == '}' || !brace && (c == '%' || c|0x20 >= 'a' && c|0x20 <= 'z') {
				break
			}
		}
		i = j
	}
	return n
}

// replaceBound bounds s.replace(old, new): every gap between runes (or every
// occurrence of old) may become new.
func replaceBound(s, old, repl string) int64 {
	k := int64(utf8.RuneCountInString(s) + 1)
	if old != "" {
		k = int64(strings.Count(s, old))
	}
	return satAdd(int64(len(s)), satMul(k, int64(len(repl))))
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
