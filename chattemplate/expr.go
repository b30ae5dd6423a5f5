package chattemplate

import (
	"fmt"
	"math"
	"strings"
)

func (r *renderer) eval(e expr, f *frame) (any, error) {
	switch e := e.(type) {
	case *litExpr:
		return e.v, nil
	case *nameExpr:
		if v, ok := f.lookup(e.name); ok {
			return v, nil
		}
		if v, ok := r.globals[e.name]; ok {
			return v, nil
		}
		return Undefined{e.name}, nil
	case *attrExpr:
		obj, err := r.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, e.name)
	case *itemExpr:
		obj, err := r.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		key, err := r.eval(e.key, f)
		if err != nil {
			return nil, err
		}
		return getItem(obj, key)
	case *sliceExpr:
		return r.evalSlice(e, f)
	case *callExpr:
		return r.evalCall(e, f)
	case *filterExpr:
		v, err := r.eval(e.arg, f)
		if err != nil {
			return nil, err
		}
		args, kw, err := r.evalArgs(e.args, e.kw, f)
		if err != nil {
			return nil, err
		}
		return filters[e.name](r, v, args, kw)
	case *testExpr:
		v, err := r.eval(e.arg, f)
		if err != nil {
			return nil, err
		}
		args, _, err := r.evalArgs(e.args, nil, f)
		if err != nil {
			return nil, err
		}
		ok, err := tests[e.name](r, v, args)
		return ok != e.negate, err
	case *binExpr:
		return r.evalBin(e, f)
	case *unaryExpr:
		x, err := r.eval(e.x, f)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "not":
			return !truthy(x), nil
		case "-":
			return arith("-", int64(0), x)
		default:
			return arith("+", int64(0), x)
		}
	case *compareExpr:
		l, err := r.eval(e.first, f)
		if err != nil {
			return nil, err
		}
		for i, op := range e.ops {
			rv, err := r.eval(e.rest[i], f)
			if err != nil {
				return nil, err
			}
			ok, err := compare(op, l, rv)
			if err != nil || !ok {
				return false, err
			}
			l = rv
		}
		return true, nil
	case *condExpr:
		c, err := r.eval(e.cond, f)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return r.eval(e.then, f)
		}
		if e.els == nil {
			return Undefined{"conditional expression"}, nil
		}
		return r.eval(e.els, f)
	case *listExpr:
		l := make([]any, len(e.items))
		for i, it := range e.items {
			v, err := r.eval(it, f)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	case *tupleExpr:
		l := make(tuple, len(e.items))
		for i, it := range e.items {
			v, err := r.eval(it, f)
			if err != nil {
				return nil, err
			}
			l[i] = v
		}
		return l, nil
	case *dictExpr:
		o := NewObject()
		for i, k := range e.keys {
			kv, err := r.eval(k, f)
			if err != nil {
				return nil, err
			}
			ks, ok := kv.(string)
			if !ok {
				return nil, fmt.Errorf("unsupported: dict literal with a %s key", typeName(kv))
			}
			v, err := r.eval(e.vals[i], f)
			if err != nil {
				return nil, err
			}
			o.Set(ks, v)
		}
		return o, nil
	}
	return nil, fmt.Errorf("internal: unknown expression %T", e)
}

func (r *renderer) evalArgs(args []expr, kws []kwArg, f *frame) ([]any, map[string]any, error) {
	var av []any
	if len(args) > 0 {
		av = make([]any, len(args))
		for i, a := range args {
			v, err := r.eval(a, f)
			if err != nil {
				return nil, nil, err
			}
			av[i] = v
		}
	}
	var kw map[string]any
	if len(kws) > 0 {
		kw = make(map[string]any, len(kws))
		for _, k := range kws {
			v, err := r.eval(k.v, f)
			if err != nil {
				return nil, nil, err
			}
			kw[k.name] = v
		}
	}
	return av, kw, nil
}

func (r *renderer) evalCall(e *callExpr, f *frame) (any, error) {
	fn, err := r.eval(e.fn, f)
	if err != nil {
		return nil, err
	}
	args, kw, err := r.evalArgs(e.args, e.kw, f)
	if err != nil {
		return nil, err
	}
	switch fn := fn.(type) {
	case *macro:
		return r.callMacro(fn, args, kw)
	case builtin:
		return fn(r, args, kw)
	case *method:
		return r.callMethod(fn, args, kw)
	case Undefined:
		return nil, fmt.Errorf("'%s' is undefined", fn.name)
	}
	return nil, fmt.Errorf("'%s' object is not callable", typeName(fn))
}

func (r *renderer) evalBin(e *binExpr, f *frame) (any, error) {
	l, err := r.eval(e.l, f)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return r.eval(e.r, f)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return r.eval(e.r, f)
	}
	rv, err := r.eval(e.r, f)
	if err != nil {
		return nil, err
	}
	if e.op == "~" {
		ls, rs := str(l), str(rv)
		if err := r.spend(len(ls) + len(rs)); err != nil {
			return nil, err
		}
		return ls + rs, nil
	}
	v, err := arith(e.op, l, rv)
	if s, ok := v.(string); ok {
		if err := r.spend(len(s)); err != nil {
			return nil, err
		}
	}
	return v, err
}

func (r *renderer) evalSlice(e *sliceExpr, f *frame) (any, error) {
	obj, err := r.eval(e.obj, f)
	if err != nil {
		return nil, err
	}
	var idx [3]any
	for i, p := range []expr{e.lo, e.hi, e.step} {
		if p == nil {
			continue
		}
		if idx[i], err = r.eval(p, f); err != nil {
			return nil, err
		}
	}
	return slice(obj, idx[0], idx[1], idx[2])
}

// slice is Python's obj[lo:hi:step] for lists, tuples and strings.
func slice(obj, lo, hi, step any) (any, error) {
	var items []any
	isStr := false
	switch x := normalize(obj).(type) {
	case []any:
		items = x
	case tuple:
		items = x
	case string:
		isStr = true
		rs := []rune(x)
		items = make([]any, len(rs))
		for i, c := range rs {
			items[i] = string(c)
		}
	case Undefined:
		return nil, fmt.Errorf("'%s' is undefined", x.name)
	default:
		return nil, fmt.Errorf("'%s' object is not subscriptable", typeName(obj))
	}
	n := len(items)
	st := 1
	if step != nil {
		s, ok := toInt(step)
		if !ok || s == 0 {
			return nil, fmt.Errorf("slice step must be a non-zero integer")
		}
		st = s
	}
	bound := func(v any, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		i, ok := toInt(v)
		if !ok {
			return 0, fmt.Errorf("slice indices must be integers or None")
		}
		if i < 0 {
			i += n
			if i < 0 {
				if st < 0 {
					return -1, nil
				}
				return 0, nil
			}
		}
		if i >= n {
			if st < 0 {
				return n - 1, nil
			}
			return n, nil
		}
		return i, nil
	}
	var out []any
	if st > 0 {
		a, err := bound(lo, 0)
		if err != nil {
			return nil, err
		}
		b, err := bound(hi, n)
		if err != nil {
			return nil, err
		}
		for i := a; i < b; i += st {
			out = append(out, items[i])
		}
	} else {
		a, err := bound(lo, n-1)
		if err != nil {
			return nil, err
		}
		b, err := bound(hi, -1)
		if err != nil {
			return nil, err
		}
		if hi == nil {
			b = -1
		}
		for i := a; i > b; i += st {
			out = append(out, items[i])
		}
	}
	if isStr {
		var sb strings.Builder
		for _, c := range out {
			sb.WriteString(c.(string))
		}
		return sb.String(), nil
	}
	if _, ok := obj.(tuple); ok {
		return tuple(out), nil
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

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
				return nil, errBudget
			}
			return strings.Repeat(s, int(ri)), nil
		}
	case "%":
		if _, ok := l.(string); ok {
			return nil, fmt.Errorf("unsupported: printf-style string formatting with %%")
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

// getAttr is jinja2's environment.getattr: a Python attribute (method) first,
// then the item of that name.
func getAttr(obj any, name string) (any, error) {
	switch x := normalize(obj).(type) {
	case Undefined:
		return nil, undefErr(x)
	case *Object, map[string]any:
		if dictMethods[name] {
			return &method{recv: x, name: name}, nil
		}
		if v, ok := dictGet(x, name); ok {
			return v, nil
		}
		return Undefined{name}, nil
	case string:
		if strMethods[name] {
			return &method{recv: x, name: name}, nil
		}
	case []any:
		if listMethods[name] {
			return &method{recv: x, name: name}, nil
		}
	case *namespace:
		if v, ok := x.obj.Get(name); ok {
			return v, nil
		}
	case *loopObj:
		return x.attr(name), nil
	}
	return Undefined{name}, nil
}

// getItem is jinja2's environment.getitem: the item first, then for a string
// key the attribute.
func getItem(obj, key any) (any, error) {
	switch x := normalize(obj).(type) {
	case Undefined:
		return nil, undefErr(x)
	case *Object, map[string]any:
		if k, ok := key.(string); ok {
			if v, ok := dictGet(x, k); ok {
				return v, nil
			}
		}
	case []any, tuple, string:
		if i, ok := toInt(key); ok {
			var items []any
			switch y := x.(type) {
			case []any:
				items = y
			case tuple:
				items = y
			case string:
				rs := []rune(y)
				if i < 0 {
					i += len(rs)
				}
				if i < 0 || i >= len(rs) {
					return Undefined{"index"}, nil
				}
				return string(rs[i]), nil
			}
			if i < 0 {
				i += len(items)
			}
			if i < 0 || i >= len(items) {
				return Undefined{"index"}, nil
			}
			return items[i], nil
		}
	}
	if k, ok := key.(string); ok {
		return getAttr(obj, k)
	}
	return Undefined{str(key)}, nil
}
