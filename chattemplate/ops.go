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
			return li + ri, nil
		case "-":
			if isF {
				return lf - rf, nil
			}
			return li - ri, nil
		case "*":
			if isF {
				return lf * rf, nil
			}
			return li * ri, nil
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
				return math.Floor(lf / rf), nil
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
				return m, nil
			}
			m := li % ri
			if m != 0 && (m < 0) != (ri < 0) {
				m += ri
			}
			return m, nil
		case "**":
			if isF || ri < 0 {
				return math.Pow(lf, rf), nil
			}
			out := int64(1)
			for i := int64(0); i < ri; i++ {
				out *= li
			}
			return out, nil
		}
	}
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
		if s, ok := l.(string); ok && rok && !rflt {
			if ri < 0 {
				ri = 0
			}
			if ri*int64(len(s)) > 1<<26 {
				return nil, ErrBudget
			}
			return strings.Repeat(s, int(ri)), nil
		}
	case "%":
		if s, ok := l.(string); ok {
			return pyPercent(s, r)
		}
	}
	return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
}

// equal is Python's ==.
func equal(a, b any) bool {
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
		if y, ok := b.(string); ok {
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
			return false, nil
		}
		_, ok = dictGet(c, k)
		return ok, nil
	case Undefined:
		return false, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}
