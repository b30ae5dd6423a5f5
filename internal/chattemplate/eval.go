package chattemplate

import (
	"fmt"
	"strings"
	"time"
)

// RaisedError is returned by Render when the template calls
// raise_exception(message); Error() is the message itself.
type RaisedError struct{ Message string }

func (e *RaisedError) Error() string { return e.Message }

type frame struct {
	vars   map[string]any
	parent *frame
}

func (f *frame) lookup(name string) (any, bool) {
	for ; f != nil; f = f.parent {
		if v, ok := f.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

func (f *frame) set(name string, v any) {
	if f.vars == nil {
		f.vars = make(map[string]any, 4)
	}
	f.vars[name] = v
}

type renderer struct {
	depth   int // macro call depth
	b       budget
	maxOut  int
	now     func() time.Time
	globals map[string]any
}

type signal uint8

const (
	sigNone signal = iota
	sigBreak
	sigContinue
)

func (r *renderer) exec(body []node, f *frame, out *strings.Builder) (signal, error) {
	for _, n := range body {
		if err := r.spend(1); err != nil {
			return sigNone, err
		}
		switch n := n.(type) {
		case *textNode:
			if err := r.alloc(int64(len(n.s))); err != nil {
				return sigNone, err
			}
			out.WriteString(n.s)
		case *outputNode:
			v, err := r.eval(n.e, f)
			if err != nil {
				return sigNone, err
			}
			if err := printable(v); err != nil {
				return sigNone, err
			}
			if err := r.allocOf(v); err != nil {
				return sigNone, err
			}
			out.WriteString(str(v))
		case *withNode:
			wf := &frame{parent: f, vars: make(map[string]any, len(n.names))}
			for i, name := range n.names {
				v, err := r.eval(n.values[i], f)
				if err != nil {
					return sigNone, err
				}
				wf.vars[name] = v
			}
			if sig, err := r.exec(n.body, wf, out); sig != sigNone || err != nil {
				return sig, err
			}
		case *filterBlockNode:
			var b strings.Builder
			if _, err := r.exec(n.body, &frame{parent: f}, &b); err != nil {
				return sigNone, err
			}
			v, err := r.eval(n.filter, &frame{parent: f, vars: map[string]any{blockVar: b.String()}})
			if err != nil {
				return sigNone, err
			}
			if err := printable(v); err != nil {
				return sigNone, err
			}
			if err := r.allocOf(v); err != nil {
				return sigNone, err
			}
			out.WriteString(str(v))
		case *generationNode:
			if _, err := r.exec(n.body, &frame{parent: f}, out); err != nil {
				return sigNone, err
			}
		case *ifNode:
			done := false
			for i, c := range n.conds {
				v, err := r.eval(c, f)
				if err != nil {
					return sigNone, err
				}
				if truthy(v) {
					done = true
					if sig, err := r.exec(n.bodies[i], f, out); sig != sigNone || err != nil {
						return sig, err
					}
					break
				}
			}
			if !done && n.els != nil {
				if sig, err := r.exec(n.els, f, out); sig != sigNone || err != nil {
					return sig, err
				}
			}
		case *forNode:
			if err := r.execFor(n, f, out); err != nil {
				return sigNone, err
			}
		case *setNode:
			if err := r.execSet(n, f); err != nil {
				return sigNone, err
			}
		case *macroNode:
			f.set(n.name, &macro{n: n, closure: f})
		case *breakNode:
			return sigBreak, nil
		case *continueNode:
			return sigContinue, nil
		}
		if out.Len() > r.maxOut {
			return sigNone, &budgetError{fmt.Sprintf("output over %d bytes (MaxOutputBytes)", r.maxOut)}
		}
	}
	return sigNone, nil
}

func (r *renderer) execSet(n *setNode, f *frame) error {
	var v any
	if n.body != nil {
		var b strings.Builder
		if _, err := r.exec(n.body, f, &b); err != nil {
			return err
		}
		v = b.String()
		if n.filter != nil {
			var err error
			if v, err = r.eval(n.filter, &frame{parent: f, vars: map[string]any{blockVar: v}}); err != nil {
				return err
			}
		}
	} else {
		var err error
		if v, err = r.eval(n.value, f); err != nil {
			return err
		}
	}
	if n.nsAttr != "" {
		ns, _ := f.lookup(n.targets[0])
		nsp, ok := ns.(*namespace)
		if !ok {
			return fmt.Errorf("cannot assign attribute on non-namespace object")
		}
		nsp.obj.Set(n.nsAttr, v)
		return nil
	}
	return assign(f, n.targets, v)
}

func assign(f *frame, targets []string, v any) error {
	if len(targets) == 1 {
		f.set(targets[0], v)
		return nil
	}
	items, err := iterate(v)
	if err != nil {
		return err
	}
	if len(items) != len(targets) {
		return fmt.Errorf("cannot unpack %d values into %d names", len(items), len(targets))
	}
	for i, t := range targets {
		f.set(t, items[i])
	}
	return nil
}

func (r *renderer) execFor(n *forNode, f *frame, out *strings.Builder) error {
	it, err := r.eval(n.iter, f)
	if err != nil {
		return err
	}
	items, err := r.iterate(it)
	if err != nil {
		return err
	}
	if n.cond != nil {
		if err := r.alloc(listBytes(items)); err != nil {
			return err
		}
		kept := make([]any, 0, len(items))
		for _, item := range items {
			lf := &frame{parent: f}
			if err := assign(lf, n.targets, item); err != nil {
				return err
			}
			c, err := r.eval(n.cond, lf)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		if n.els != nil {
			_, err := r.exec(n.els, f, out)
			return err
		}
		return nil
	}
	loop := &loopObj{items: items}
	// Each iteration gets a fresh scope: jinja2 does not carry a {% set %}
	// from one iteration to the next, nor out of the loop.
	lf := &frame{parent: f, vars: make(map[string]any, 4)}
	for i, item := range items {
		if err := r.spend(1); err != nil {
			return err
		}
		clear(lf.vars)
		loop.i = i
		lf.vars["loop"] = loop
		if err := assign(lf, n.targets, item); err != nil {
			return err
		}
		sig, err := r.exec(n.body, lf, out)
		if err != nil {
			return err
		}
		if sig == sigBreak {
			break
		}
	}
	return nil
}

// iterate lists what a Python for loop over v yields.
func iterate(v any) ([]any, error) {
	switch x := normalize(v).(type) {
	case []any:
		return x, nil
	case tuple:
		return x, nil
	case string:
		out := make([]any, 0, len(x))
		for _, c := range x {
			out = append(out, string(c))
		}
		return out, nil
	case *Object, map[string]any:
		keys, _ := dictKeys(x)
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = k
		}
		return out, nil
	case Undefined:
		return nil, nil
	case *loopObj:
		return nil, fmt.Errorf("'LoopContext' iteration is not supported")
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

type loopObj struct {
	items []any
	i     int
}

func (l *loopObj) attr(name string) any {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.i + 1)
	case "index0":
		return int64(l.i)
	case "revindex":
		return int64(n - l.i)
	case "revindex0":
		return int64(n - l.i - 1)
	case "first":
		return l.i == 0
	case "last":
		return l.i == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if l.i > 0 {
			return l.items[l.i-1]
		}
		return Undefined{"previtem"}
	case "nextitem":
		if l.i+1 < n {
			return l.items[l.i+1]
		}
		return Undefined{"nextitem"}
	case "cycle":
		return &method{recv: l, name: "cycle"}
	}
	return Undefined{"loop." + name}
}

type namespace struct{ obj *Object }

// maxMacroDepth stops runaway macro recursion before the Go stack does
// (Python would raise RecursionError).
const maxMacroDepth = 200

type macro struct {
	n       *macroNode
	closure *frame
}

func (r *renderer) callMacro(m *macro, args []any, kw map[string]any) (any, error) {
	if r.depth >= maxMacroDepth {
		return nil, fmt.Errorf("macro '%s': maximum recursion depth exceeded", m.n.name)
	}
	r.depth++
	defer func() { r.depth-- }()
	if len(args) > len(m.n.params) {
		return nil, fmt.Errorf("macro '%s' takes not more than %d argument(s)", m.n.name, len(m.n.params))
	}
	mf := &frame{parent: m.closure, vars: make(map[string]any, len(m.n.params))}
	firstDefault := len(m.n.params) - len(m.n.defaults)
	for i, p := range m.n.params {
		switch v, ok := kw[p]; {
		case i < len(args):
			if ok {
				return nil, fmt.Errorf("macro '%s' got multiple values for argument '%s'", m.n.name, p)
			}
			mf.vars[p] = args[i]
		case ok:
			mf.vars[p] = v
		case i >= firstDefault:
			d, err := r.eval(m.n.defaults[i-firstDefault], mf)
			if err != nil {
				return nil, err
			}
			mf.vars[p] = d
		default:
			mf.vars[p] = Undefined{p}
		}
	}
	for k := range kw {
		if _, ok := mf.vars[k]; !ok {
			return nil, fmt.Errorf("macro '%s' takes no keyword argument '%s'", m.n.name, k)
		}
	}
	var b strings.Builder
	if _, err := r.exec(m.n.body, mf, &b); err != nil {
		return nil, err
	}
	return b.String(), nil
}
