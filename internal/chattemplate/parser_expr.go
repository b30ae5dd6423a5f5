package chattemplate

import (
	"strconv"
)

// Expression grammar, by precedence from loosest to tightest, as jinja2's
// parser.py: conditional, or, and, not, comparisons, + -, ~, * / // %, **,
// unary -, then postfix (attribute, subscript, call) with filters and tests.

// parseTupleExpr parses "a" or "a, b" (a tuple without parentheses).
func (p *parser) parseTupleExpr() (expr, error) { return p.parseTuple(true) }

func (p *parser) parseTupleNoCond() (expr, error) { return p.parseTuple(false) }

func (p *parser) parseTuple(withCond bool) (expr, error) {
	parse := p.parseExpr
	if !withCond {
		parse = p.parseOr
	}
	e, err := parse()
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		return e, nil
	}
	items := []expr{e}
	for p.isOp(",") {
		p.next()
		if t := p.peek(); t.kind == tVarEnd || t.kind == tBlockEnd || p.isOp(")") {
			break
		}
		e, err := parse()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &tupleExpr{items}, nil
}

func (p *parser) parseExpr() (expr, error) {
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		p.next()
		c, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els expr
		if p.isName("else") {
			p.next()
			if els, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		e = &condExpr{cond: c, then: e, els: els}
	}
	return e, nil
}

func (p *parser) parseOr() (expr, error) {
	l, err := p.parseAnd()
	for err == nil && p.isName("or") {
		p.next()
		var r expr
		r, err = p.parseAnd()
		l = &binExpr{"or", l, r}
	}
	return l, err
}

func (p *parser) parseAnd() (expr, error) {
	l, err := p.parseNot()
	for err == nil && p.isName("and") {
		p.next()
		var r expr
		r, err = p.parseNot()
		l = &binExpr{"and", l, r}
	}
	return l, err
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		p.next()
		x, err := p.parseNot()
		return &unaryExpr{"not", x}, err
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: first}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == ">" || t.val == "<=" || t.val == ">="):
			op = t.val
			p.next()
		case t.kind == tName && t.val == "in":
			op = "in"
			p.next()
		case t.kind == tName && t.val == "not" && p.toks[p.pos+1].kind == tName && p.toks[p.pos+1].val == "in":
			op = "notin"
			p.pos += 2
		default:
			if len(c.ops) == 0 {
				return first, nil
			}
			return c, nil
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
}

func (p *parser) parseBinary(ops []string, sub func() (expr, error)) (expr, error) {
	l, err := sub()
	for err == nil {
		t := p.peek()
		matched := false
		for _, op := range ops {
			if t.kind == tOp && t.val == op {
				matched = true
			}
		}
		if !matched {
			break
		}
		p.next()
		var r expr
		r, err = sub()
		l = &binExpr{t.val, l, r}
	}
	return l, err
}

func (p *parser) parseMath1() (expr, error)  { return p.parseBinary([]string{"+", "-"}, p.parseConcat) }
func (p *parser) parseConcat() (expr, error) { return p.parseBinary([]string{"~"}, p.parseMath2) }
func (p *parser) parseMath2() (expr, error) {
	return p.parseBinary([]string{"*", "/", "//", "%"}, p.parsePow)
}
func (p *parser) parsePow() (expr, error) {
	return p.parseBinary([]string{"**"}, func() (expr, error) { return p.parseUnary(true) })
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	var e expr
	var err error
	if p.isOp("-") || p.isOp("+") {
		op := p.next().val
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &unaryExpr{op, x}
	} else {
		if e, err = p.parsePrimary(); err != nil {
			return nil, err
		}
		if e, err = p.parsePostfix(e); err != nil {
			return nil, err
		}
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tName:
		switch t.val {
		case "true", "True":
			return &litExpr{true}, nil
		case "false", "False":
			return &litExpr{false}, nil
		case "none", "None":
			return &litExpr{nil}, nil
		}
		return &nameExpr{t.val}, nil
	case tString:
		s := t.val
		for p.peek().kind == tString { // adjacent literals concatenate
			s += p.next().val
		}
		return &litExpr{s}, nil
	case tInt:
		v, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, p.errf(t, "integer literal %s out of range", t.val)
		}
		return &litExpr{v}, nil
	case tFloat:
		v, err := strconv.ParseFloat(t.val, 64)
		if err != nil {
			return nil, p.errf(t, "bad float literal %s", t.val)
		}
		return &litExpr{v}, nil
	case tOp:
		switch t.val {
		case "(":
			if p.isOp(")") {
				p.next()
				return &tupleExpr{}, nil
			}
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			if p.isOp(",") {
				items := []expr{e}
				for p.isOp(",") {
					p.next()
					if p.isOp(")") {
						break
					}
					e, err := p.parseExpr()
					if err != nil {
						return nil, err
					}
					items = append(items, e)
				}
				e = &tupleExpr{items}
			}
			return e, p.expectOp(")")
		case "[":
			items, err := p.parseList("]")
			return &listExpr{items}, err
		case "{":
			d := &dictExpr{}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	}
	return nil, p.errf(t, "unexpected %s", t)
}

func (p *parser) parseList(end string) ([]expr, error) {
	var items []expr
	for !p.isOp(end) {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
			if p.isOp(end) {
				break
			}
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	p.next()
	return items, nil
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	for {
		switch {
		case p.isOp("."):
			p.next()
			t := p.next()
			switch t.kind {
			case tName:
				e = &attrExpr{e, t.val}
			case tInt:
				n, _ := strconv.ParseInt(t.val, 10, 64)
				e = &itemExpr{e, &litExpr{n}}
			default:
				return nil, p.errf(t, "expected an attribute name, got %s", t)
			}
		case p.isOp("["):
			p.next()
			var err error
			if e, err = p.parseSubscript(e); err != nil {
				return nil, err
			}
		case p.isOp("("):
			var err error
			if e, err = p.parseCall(e); err != nil {
				return nil, err
			}
		default:
			return e, nil
		}
	}
}

func (p *parser) parseSubscript(obj expr) (expr, error) {
	var parts [3]expr
	i := 0
	isSlice := false
	for {
		if p.isOp(":") {
			isSlice = true
			p.next()
			i++
			if i > 2 {
				return nil, p.errf(p.peek(), "bad slice")
			}
			continue
		}
		if p.isOp("]") {
			p.next()
			break
		}
		if parts[i] != nil && p.isOp(",") && !isSlice {
			// x[a, b] subscripts with a tuple, as jinja2's parse_subscript
			items := []expr{parts[0]}
			for p.isOp(",") {
				p.next()
				if p.isOp("]") {
					break
				}
				e, err := p.parseExpr()
				if err != nil {
					return nil, err
				}
				items = append(items, e)
			}
			if err := p.expectOp("]"); err != nil {
				return nil, err
			}
			return &itemExpr{obj, &tupleExpr{items}}, nil
		}
		if parts[i] != nil {
			return nil, p.errf(p.peek(), "unsupported subscript")
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		parts[i] = e
	}
	if !isSlice {
		if parts[0] == nil { // x[] subscripts with an empty tuple
			return &itemExpr{obj, &tupleExpr{}}, nil
		}
		return &itemExpr{obj, parts[0]}, nil
	}
	return &sliceExpr{obj, parts[0], parts[1], parts[2]}, nil
}

func (p *parser) parseArgs() ([]expr, []kwArg, error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kws []kwArg
	for !p.isOp(")") {
		if len(args)+len(kws) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		if p.isOp("*") || p.isOp("**") {
			return nil, nil, p.errf(p.peek(), "unsupported: *args/**kwargs in calls")
		}
		if t := p.peek(); t.kind == tName && p.toks[p.pos+1].kind == tOp && p.toks[p.pos+1].val == "=" {
			p.pos += 2
			v, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kws = append(kws, kwArg{t.val, v})
			continue
		}
		if len(kws) > 0 {
			return nil, nil, p.errf(p.peek(), "positional argument follows keyword argument")
		}
		v, err := p.parseExpr()
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	p.next()
	return args, kws, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	args, kws, err := p.parseArgs()
	return &callExpr{fn, args, kws}, err
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			t := p.peek()
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			for p.isOp(".") { // dotted filter names
				p.next()
				n, err := p.expectName()
				if err != nil {
					return nil, err
				}
				name += "." + n
			}
			if _, ok := filters[name]; !ok {
				return nil, p.errf(t, "unsupported filter %q (refused rather than rendered approximately)", name)
			}
			f := &filterExpr{name: name, arg: e}
			if p.isOp("(") {
				if f.args, f.kw, err = p.parseArgs(); err != nil {
					return nil, err
				}
			}
			e = f
		case p.isName("is"):
			p.next()
			te := &testExpr{arg: e}
			if p.isName("not") {
				p.next()
				te.negate = true
			}
			t := p.peek()
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			if name == "none" || name == "true" || name == "false" {
				name = map[string]string{"none": "none", "true": "true", "false": "false"}[name]
			}
			if _, ok := tests[name]; !ok {
				return nil, p.errf(t, "unsupported test %q (refused rather than rendered approximately)", name)
			}
			te.name = name
			switch nt := p.peek(); {
			case p.isOp("("):
				if te.args, _, err = p.parseArgs(); err != nil {
					return nil, err
				}
			case nt.kind == tString || nt.kind == tInt || nt.kind == tFloat || p.isOp("[") || p.isOp("{") ||
				(nt.kind == tName && nt.val != "else" && nt.val != "or" && nt.val != "and"):
				a, err := p.parsePrimary()
				if err != nil {
					return nil, err
				}
				if a, err = p.parsePostfix(a); err != nil {
					return nil, err
				}
				te.args = []expr{a}
			}
			e = te
		case p.isOp("("):
			var err error
			if e, err = p.parseCall(e); err != nil {
				return nil, err
			}
		default:
			return e, nil
		}
	}
}
