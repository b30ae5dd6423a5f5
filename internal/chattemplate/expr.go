package chattemplate

import (
	"fmt"
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
		return r.applyFilter(e.name, v, args, kw)
	case *testExpr:
		v, err := r.eval(e.arg, f)
		if err != nil {
			return nil, err
		}
		args, _, err := r.evalArgs(e.args, nil, f)
		if err != nil {
			return nil, err
		}
		if m, ok := v.(markup); ok { // tests see a Markup as the str it is
			v = string(m)
		}
		args = plainArgs(args)
		steps := 1
		if e.name == "in" || e.name == "eq" || e.name == "equalto" || e.name == "==" || e.name == "ne" || e.name == "!=" {
			steps += r.work(v) + r.work(args) // the other tests look at the value's type or a number
		}
		if err := r.spend(steps); err != nil {
			return nil, err
		}
		if want := testArity[e.name]; len(args) > want {
			return nil, fmt.Errorf("test_%s() takes %d positional argument(s) but %d were given", e.name, want+1, len(args)+1)
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
		}
		return negate(e.op, x)
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
			if err := r.scan(l, rv); err != nil {
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
		if err := r.alloc(int64(len(e.items)) * elemBytes); err != nil {
			return nil, err
		}
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
		if err := r.alloc(int64(len(e.items)) * elemBytes); err != nil {
			return nil, err
		}
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
		if err := r.alloc(int64(len(e.keys)) * 2 * elemBytes); err != nil {
			return nil, err
		}
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
		if m, ok := fn.recv.(markup); ok {
			return r.callMarkupMethod(m, fn.name, args, kw)
		}
		return r.callMethod(fn, plainArgs(args), plainKw(kw))
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
		if err := printable(l); err != nil {
			return nil, err
		}
		if err := printable(rv); err != nil {
			return nil, err
		}
		if err := r.allocOf(l, rv); err != nil {
			return nil, err
		}
		return str(l) + str(rv), nil
	}
	if e.op == "**" && negLiteral(e.l) {
		if _, isLit := e.r.(*litExpr); !isLit && !negLiteral(e.r) {
			// jinja2 folds -<number> into a constant and emits "-c ** x"
			// into Python source, which Python reads as -(c ** x).
			c, err := negate("-", l)
			if err != nil {
				return nil, err
			}
			p, err := arith("**", c, rv)
			if err != nil {
				return nil, err
			}
			return negate("-", p)
		}
	}
	if err := r.chargeBin(e.op, l, rv); err != nil {
		return nil, err
	}
	return arith(e.op, l, rv)
}

// negLiteral: a unary minus applied to a number literal (what jinja2's
// optimizer folds into a negative constant).
func negLiteral(e expr) bool {
	u, ok := e.(*unaryExpr)
	if !ok || u.op != "-" {
		return false
	}
	lit, ok := u.x.(*litExpr)
	if !ok {
		return false
	}
	switch lit.v.(type) {
	case int64, float64:
		return true
	}
	return false
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
	if err := r.alloc(sliceBytes(obj)); err != nil {
		return nil, err
	}
	return slice(obj, idx[0], idx[1], idx[2])
}

// slice is Python's obj[lo:hi:step] for lists, tuples and strings.
func slice(obj, lo, hi, step any) (any, error) {
	if m, ok := obj.(markup); ok {
		v, err := slice(string(m), lo, hi, step)
		if s, isStr := v.(string); isStr {
			return markup(s), err
		}
		return v, err
	}
	if _, ok := obj.(*seqView); ok {
		return nil, fmt.Errorf("'%s' object is not subscriptable", typeName(obj))
	}
	var items []any
	var rs []rune // a string is sliced by code points
	isStr := false
	switch x := normalize(obj).(type) {
	case []any:
		items = x
	case tuple:
		items = x
	case string:
		isStr = true
		rs = []rune(x)
	case Undefined:
		return nil, fmt.Errorf("'%s' is undefined", x.name)
	default:
		return nil, fmt.Errorf("'%s' object is not subscriptable", typeName(obj))
	}
	n := len(items)
	if isStr {
		n = len(rs)
	}
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
	var outRunes []rune
	pick := func(i int) {
		if isStr {
			outRunes = append(outRunes, rs[i])
		} else {
			out = append(out, items[i])
		}
	}
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
			pick(i)
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
			pick(i)
		}
	}
	if isStr {
		return string(outRunes), nil
	}
	if _, ok := obj.(tuple); ok {
		return tuple(out), nil
	}
	if out == nil {
		out = []any{}
	}
	return out, nil
}

// getAttr is jinja2's environment.getattr: a Python attribute (method) first,
// then the item of that name.
func getAttr(obj any, name string) (any, error) {
	if m, ok := obj.(markup); ok {
		if strMethods[name] {
			return &method{recv: m, name: name}, nil
		}
		return Undefined{name}, nil
	}
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
	key = normalize(key)
	if m, ok := obj.(markup); ok { // Markup.__getitem__ returns Markup
		v, err := getItem(string(m), key)
		if s, isStr := v.(string); isStr {
			return markup(s), err
		}
		return v, err
	}
	if _, ok := obj.(*seqView); ok { // not subscriptable: jinja2 gives undefined
		return Undefined{str(key)}, nil
	}
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
