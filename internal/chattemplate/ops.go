package chattemplate

import (
	"fmt"
	"math"
	"strings"
)

// Python operator semantics: arithmetic, comparison, membership.

func toInt(v any) (int, bool) {
	switch x := normalize(v).(type) {
	case int64:
		return int(x), true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// num returns v as a Python number: ints (and bools) as int64, floats as float64.
func num(v any) (int64, float64, bool, bool) {
	switch x := normalize(v).(type) {
	case int64:
		return x, float64(x), false, true
	case bool:
		if x {
			return 1, 1, false, true
		}
		return 0, 0, false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

// negate is Python's unary - and +: -0.0 stays a negative zero.
func negate(op string, x any) (any, error) {
	i, f, isF, ok := num(x)
	switch {
	case !ok:
		if u, isU := x.(Undefined); isU {
			return nil, undefErr(u)
		}
		return nil, fmt.Errorf("bad operand type for unary %s: '%s'", op, typeName(x))
	case op == "+" && isF:
		return f, nil
	case op == "+":
		return i, nil
	case isF:
		return -f, nil
	}
	return -i, nil
}

func undefErr(u Undefined) error { return fmt.Errorf("'%s' is undefined", u.name) }

func arith(op string, l, r any) (any, error) {
	if s, ok := l.(string); ok && op == "%" {
		return pyPercent(s, r) // str.__mod__ runs before Undefined.__rmod__
	}
	if u, ok := l.(Undefined); ok {
		return nil, undefErr(u)
	}
	if u, ok := r.(Undefined); ok {
		return nil, undefErr(u)
	}
	li, lf, lflt, lok := num(l)
	ri, rf, rflt, rok := num(r)
	if lok && rok {
		isF := lflt || rflt
		switch op {
		case "+":
			if isF {
				return lf + rf, nil
			}
			if s := li + ri; (s > li) == (ri > 0) {
				return s, nil
			}
			return nil, errIntOverflow
		case "-":
			if isF {
				return lf - rf, nil
			}
			if s := li - ri; (s < li) == (ri > 0) {
				return s, nil
			}
			return nil, errIntOverflow
		case "*":
			if isF {
				return lf * rf, nil
			}
			if p, ok := mulOK(li, ri); ok {
				return p, nil
			}
			return nil, errIntOverflow
		case "/":
			if rf == 0 {
				return nil, fmt.Errorf("division by zero")
			}
			return lf / rf, nil
		case "//":
			if rf == 0 {
				return nil, fmt.Errorf("integer division or modulo by zero")
			}
			if isF {
				return pyFloorDiv(lf, rf), nil
			}
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		case "%":
			if rf == 0 {
				return nil, fmt.Errorf("integer division or modulo by zero")
			}
			if isF {
				m := math.Mod(lf, rf)
				if m != 0 && (m < 0) != (rf < 0) {
					m += rf
				}
				if m == 0 { // Python: a zero remainder takes the divisor's sign
					m = math.Copysign(0, rf)
				}
				return m, nil
			}
			m := li % ri
			if m != 0 && (m < 0) != (ri < 0) {
				m += ri
			}
			return m, nil
		case "**":
			if isF || ri < 0 {
				if lf == 0 && rf < 0 {
					return nil, fmt.Errorf("0.0 cannot be raised to a negative power")
				}
				if lf < 0 && rf != math.Trunc(rf) {
					return nil, fmt.Errorf("unsupported: complex result of a negative number to a fractional power")
				}
				p := pyPow(lf, rf)
				if math.IsInf(p, 0) && !math.IsInf(lf, 0) && !math.IsInf(rf, 0) {
					return nil, fmt.Errorf("OverflowError: numerical result out of range")
				}
				return p, nil
			}
			return intPow(li, ri)
		}
	}
	if op == "+" {
		if v, ok, err := markupAdd(l, r); ok {
			return v, err
		}
	}
	if m, ok := r.(markup); ok && op == "*" && lok && !lflt {
		l, r = m, l // int * Markup is Markup too
	}
	if m, ok := l.(markup); ok {
		switch op {
		case "%":
			return nil, fmt.Errorf("unsupported: %% formatting of Markup")
		case "*":
			if _, _, isF, isNum := num(r); !isNum || isF {
				return nil, fmt.Errorf("can't multiply sequence by non-int of type '%s'", typeName(r))
			}
			if v, ok, err := repeat(string(m), r); ok {
				if s, isStr := v.(string); isStr {
					return markup(s), err
				}
				return v, err
			}
		}
	}
	_, lv := l.(*seqView)
	_, rv := r.(*seqView)
	_, lr := l.(*pyRange)
	_, rr := r.(*pyRange)
	if lv || rv || lr || rr {
		return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
	}
	l, r = normalize(l), normalize(r)
	switch op {
	case "+":
		switch a := normalize(l).(type) {
		case string:
			if b, ok := r.(string); ok {
				return a + b, nil
			}
		case []any:
			if b, ok := normalize(r).([]any); ok {
				out := make([]any, 0, len(a)+len(b))
				return append(append(out, a...), b...), nil
			}
		case tuple:
			if b, ok := r.(tuple); ok {
				out := make(tuple, 0, len(a)+len(b))
				return append(append(out, a...), b...), nil
			}
		}
	case "*":
		// sequence * int and int * sequence repeat (bools count as ints).
		seq, times, isSeq := l, r, rok && !rflt
		if !isSeq && lok && !lflt {
			seq, times, isSeq = r, l, true
		}
		if isSeq {
			if v, ok, err := repeat(seq, times); ok || err != nil {
				return v, err
			}
		}
	case "%":
		if s, ok := l.(string); ok {
			return pyPercent(s, r)
		}
	}
	return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

// repeat is Python's sequence * n for str, list and tuple.
func repeat(seq, times any) (any, bool, error) {
	n, _ := toInt(times)
	n = max(n, 0)
	switch s := normalize(seq).(type) {
	case string:
		if len(s) > 0 && n > (1<<26)/len(s) {
			return nil, true, ErrBudget
		}
		return strings.Repeat(s, n), true, nil
	case []any, tuple:
		var items []any
		if l, ok := s.([]any); ok {
			items = l
		} else {
			items = s.(tuple)
		}
		if len(items) == 0 {
			n = 0
		}
		if len(items) > 0 && n > (1<<22)/len(items) {
			return nil, true, ErrBudget
		}
		out := make([]any, 0, n*len(items))
		for i := 0; i < n; i++ {
			out = append(out, items...)
		}
		if _, ok := s.(tuple); ok {
			return tuple(out), true, nil
		}
		return out, true, nil
	}
	return nil, false, nil
}

// hashable tells whether Python could use v as a dict key or set member.
func hashable(v any) bool {
	switch x := normalize(v).(type) {
	case []any, *Object, map[string]any, *namespace:
		return false
	case tuple:
		for _, e := range x {
			if !hashable(e) {
				return false
			}
		}
	}
	return true
}

// equal is Python's ==.
func equal(a, b any) bool {
	if sa, ok := a.(*seqView); ok {
		sb, ok := b.(*seqView)
		return ok && sa == sb // iterators and views compare by identity here
	}
	if _, ok := b.(*seqView); ok {
		return false
	}
	a, b = normalize(a), normalize(b)
	if _, af, _, ok := num(a); ok {
		if _, bf, _, ok := num(b); ok {
			ai, _, aflt, _ := num(a)
			bi, _, bflt, _ := num(b)
			if !aflt && !bflt {
				return ai == bi
			}
			return af == bf
		}
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case Undefined:
		_, ok := b.(Undefined)
		return ok
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		return ok && equalSeq(x, y)
	case tuple:
		y, ok := b.(tuple)
		return ok && equalSeq(x, y)
	case *Object, map[string]any:
		xk, _ := dictKeys(x)
		yk, ok := dictKeys(b)
		if !ok || len(xk) != len(yk) {
			return false
		}
		for _, k := range xk {
			xv, _ := dictGet(x, k)
			yv, ok := dictGet(b, k)
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}

func equalSeq(x, y []any) bool {
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if !equal(x[i], y[i]) {
			return false
		}
	}
	return true
}

// less is Python's <, or a TypeError for unorderable types.
func less(a, b any) (bool, error) {
	if _, af, _, ok := num(a); ok {
		if _, bf, _, ok := num(b); ok {
			ai, _, aflt, _ := num(a)
			bi, _, bflt, _ := num(b)
			if !aflt && !bflt {
				return ai < bi, nil
			}
			return af < bf, nil
		}
	}
	switch x := normalize(a).(type) {
	case string:
		if y, ok := normalize(b).(string); ok {
			return x < y, nil
		}
	case []any:
		if y, ok := normalize(b).([]any); ok {
			return lessSeq(x, y)
		}
	case tuple:
		if y, ok := b.(tuple); ok {
			return lessSeq(x, y)
		}
	}
	return false, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

func lessSeq(x, y []any) (bool, error) {
	for i := 0; i < len(x) && i < len(y); i++ {
		if !equal(x[i], y[i]) {
			return less(x[i], y[i])
		}
	}
	return len(x) < len(y), nil
}

func compare(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "<":
		return less(l, r)
	case ">":
		return less(r, l)
	case "<=":
		lt, err := less(l, r)
		return lt || (err == nil && equal(l, r)), err
	case ">=":
		lt, err := less(r, l)
		return lt || (err == nil && equal(l, r)), err
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	return false, fmt.Errorf("unknown operator %s", op)
}

// contains is Python's "x in container".
func contains(container, x any) (bool, error) {
	if m, ok := x.(markup); ok {
		x = string(m)
	}
	switch c := normalize(container).(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(x))
		}
		return strings.Contains(c, s), nil
	case []any:
		for _, e := range c {
			if equal(e, x) {
				return true, nil
			}
		}
		return false, nil
	case tuple:
		for _, e := range c {
			if equal(e, x) {
				return true, nil
			}
		}
		return false, nil
	case *Object, map[string]any:
		k, ok := x.(string)
		if !ok {
			if !hashable(x) {
				return false, fmt.Errorf("unhashable type: '%s'", typeName(x))
			}
			return false, nil
		}
		_, ok = dictGet(c, k)
		return ok, nil
	case Undefined:
		return false, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}

// errIntOverflow: Python ints grow without bound; ours are int64, and a
// result past that is an error rather than a wrong number.
var errIntOverflow = fmt.Errorf("unsupported: integer result beyond 64 bits")

func mulOK(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	p := a * b
	if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return p, true
}

// intPow is int ** non-negative int by squaring.
func intPow(base, exp int64) (any, error) {
	out := int64(1)
	for exp > 0 {
		var ok bool
		if exp&1 == 1 {
			if out, ok = mulOK(out, base); !ok {
				return nil, errIntOverflow
			}
		}
		exp >>= 1
		if exp > 0 {
			if base, ok = mulOK(base, base); !ok {
				return nil, errIntOverflow
			}
		}
	}
	return out, nil
}

// pyFloorDiv is CPython's float floor division (via fmod, as divmod does),
// which differs from floor(a/b) when a/b rounds: 7 // 0.1 is 69.0.
func pyFloorDiv(vx, wx float64) float64 {
	mod := math.Mod(vx, wx)
	div := (vx - mod) / wx
	if mod != 0 && (wx < 0) != (mod < 0) {
		div -= 1.0
	}
	if div == 0 {
		return math.Copysign(0, vx/wx)
	}
	floordiv := math.Floor(div)
	if div-floordiv > 0.5 {
		floordiv += 1.0
	}
	return floordiv
}
