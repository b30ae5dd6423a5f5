package chattemplate

import (
	"fmt"
)

// The parser follows jinja2's grammar (parser.py) for the statements and
// expressions chat templates use. Anything else is refused here with its
// name, so a template is never rendered approximately.

type parser struct {
	toks  []token
	pos   int
	loops int // enclosing for loops in the current macro/caller scope
}

func (p *parser) peek() token { return p.toks[p.pos] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) errf(t token, format string, a ...any) error {
	return fmt.Errorf("line %d: %s", t.line, fmt.Sprintf(format, a...))
}

func (p *parser) isOp(op string) bool { t := p.peek(); return t.kind == tOp && t.val == op }
func (p *parser) isName(n string) bool {
	t := p.peek()
	return t.kind == tName && t.val == n
}

func (p *parser) expectOp(op string) error {
	t := p.next()
	if t.kind != tOp || t.val != op {
		return p.errf(t, "expected %q, got %s", op, t)
	}
	return nil
}

func (p *parser) expectName() (string, error) {
	t := p.next()
	if t.kind != tName {
		return "", p.errf(t, "expected a name, got %s", t)
	}
	return t.val, nil
}

func (p *parser) expectBlockEnd() error {
	t := p.next()
	if t.kind != tBlockEnd {
		return p.errf(t, "expected end of statement block, got %s", t)
	}
	return nil
}

// parseBody parses statements until a block tag whose keyword is in ends; it
// returns that keyword with the parser positioned after it.
func (p *parser) parseBody(ends ...string) ([]node, string, error) {
	var out []node
	for {
		t := p.next()
		switch t.kind {
		case tEOF:
			if len(ends) == 0 {
				return out, "", nil
			}
			return nil, "", p.errf(t, "unexpected end of template, expected %v", ends)
		case tText:
			out = append(out, &textNode{t.val})
		case tVarBegin:
			e, err := p.parseTupleExpr()
			if err != nil {
				return nil, "", err
			}
			if t := p.next(); t.kind != tVarEnd {
				return nil, "", p.errf(t, "expected end of print statement, got %s", t)
			}
			out = append(out, &outputNode{e})
		case tBlockBegin:
			kw := p.peek()
			if kw.kind != tName {
				return nil, "", p.errf(kw, "expected a statement keyword, got %s", kw)
			}
			for _, e := range ends {
				if kw.val == e {
					p.next()
					return out, e, nil
				}
			}
			n, err := p.parseStatement()
			if err != nil {
				return nil, "", err
			}
			if n != nil {
				out = append(out, n)
			}
		default:
			return nil, "", p.errf(t, "unexpected %s", t)
		}
	}
}

func (p *parser) parseStatement() (node, error) {
	kw := p.next()
	switch kw.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "with":
		// {% with a = 1, b = a %}...{% endwith %}: a scope whose values are
		// computed in the enclosing one (jinja2 evaluates them all outside).
		n := &withNode{}
		for p.peek().kind != tBlockEnd {
			if len(n.names) > 0 {
				if err := p.expectOp(","); err != nil {
					return nil, err
				}
			}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			if err := p.expectOp("="); err != nil {
				return nil, err
			}
			v, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			n.names, n.values = append(n.names, name), append(n.values, v)
		}
		p.next()
		body, _, err := p.parseBody("endwith")
		if err != nil {
			return nil, err
		}
		n.body = body
		return n, p.expectBlockEnd()
	case "filter":
		// {% filter f | g %}...{% endfilter %}: the body, filtered. The
		// first filter comes without "|" (jinja2's start_inline): put one in.
		if p.peek().kind != tName {
			return nil, p.errf(kw, "expected a filter after 'filter'")
		}
		p.toks = append(p.toks[:p.pos], append([]token{{tOp, "|", kw.line}}, p.toks[p.pos:]...)...)
		f, err := p.parseFilterExpr(&nameExpr{blockVar})
		if err != nil {
			return nil, err
		}
		if _, ok := f.(*filterExpr); !ok {
			return nil, p.errf(kw, "expected a filter after 'filter'")
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody("endfilter")
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{filter: f, body: body}, p.expectBlockEnd()
	case "break", "continue":
		if p.loops == 0 { // jinja2's compiler refuses these too
			return nil, p.errf(kw, "'%s' outside loop", kw.val)
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if kw.val == "break" {
			return &breakNode{}, nil
		}
		return &continueNode{}, nil
	case "generation":
		// transformers' AssistantTracker: a call block whose body renders
		// as is, in its own scope (a caller macro in jinja2).
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		saved := p.loops
		p.loops = 0
		body, _, err := p.parseBody("endgeneration")
		p.loops = saved
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		return &generationNode{body}, nil
	}
	return nil, p.errf(kw, "unsupported statement %q (refused rather than rendered approximately)", kw.val)
}

func (p *parser) parseIf() (node, error) {
	n := &ifNode{}
	for {
		c, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, end, err := p.parseBody("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, c)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.expectBlockEnd(); err != nil {
				return nil, err
			}
			if n.els, _, err = p.parseBody("endif"); err != nil {
				return nil, err
			}
		}
		return n, p.expectBlockEnd()
	}
}

func (p *parser) parseTargets() ([]string, error) {
	var names []string
	paren := p.isOp("(")
	if paren {
		p.next()
	}
	for {
		n, err := p.expectName()
		if err != nil {
			return nil, err
		}
		names = append(names, n)
		if !p.isOp(",") {
			break
		}
		p.next()
		if paren && p.isOp(")") {
			break
		}
	}
	if paren {
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func (p *parser) parseFor() (node, error) {
	n := &forNode{}
	var err error
	if n.targets, err = p.parseTargets(); err != nil {
		return nil, err
	}
	if t := p.next(); t.kind != tName || t.val != "in" {
		return nil, p.errf(t, "expected 'in', got %s", t)
	}
	if n.iter, err = p.parseTupleNoCond(); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.next()
		if n.cond, err = p.parseExpr(); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, p.errf(p.peek(), "unsupported: recursive for loops")
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	p.loops++
	body, end, err := p.parseBody("else", "endfor")
	p.loops--
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if n.els, _, err = p.parseBody("endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.expectBlockEnd()
}

func (p *parser) parseSet() (node, error) {
	n := &setNode{}
	if p.isOp("(") {
		targets, err := p.parseTargets()
		if err != nil {
			return nil, err
		}
		n.targets = targets
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		if n.value, err = p.parseTupleExpr(); err != nil {
			return nil, err
		}
		return n, p.expectBlockEnd()
	}
	first, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n.targets = []string{first}
	switch {
	case p.isOp("."):
		p.next()
		if n.nsAttr, err = p.expectName(); err != nil {
			return nil, err
		}
	case p.isOp(","):
		p.pos--
		if n.targets, err = p.parseTargets(); err != nil {
			return nil, err
		}
	}
	if (p.peek().kind == tBlockEnd || p.isOp("|")) && n.nsAttr == "" && len(n.targets) == 1 {
		// {% set x %}...{% endset %}, optionally {% set x | filters %}
		if p.isOp("|") {
			if n.filter, err = p.parseFilterExpr(&nameExpr{blockVar}); err != nil {
				return nil, err
			}
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		body, _, err := p.parseBody("endset")
		if err != nil {
			return nil, err
		}
		n.body = body
		return n, p.expectBlockEnd()
	}
	if err := p.expectOp("="); err != nil {
		return nil, err
	}
	if n.value, err = p.parseTupleExpr(); err != nil {
		return nil, err
	}
	return n, p.expectBlockEnd()
}

func (p *parser) parseMacro() (node, error) {
	n := &macroNode{}
	var err error
	if n.name, err = p.expectName(); err != nil {
		return nil, err
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		if len(n.params) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.params = append(n.params, name)
		if p.isOp("=") {
			p.next()
			d, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			n.defaults = append(n.defaults, d)
		} else if len(n.defaults) > 0 {
			return nil, p.errf(p.peek(), "non-default argument follows default argument")
		}
	}
	p.next()
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	saved := p.loops
	p.loops = 0
	n.body, _, err = p.parseBody("endmacro")
	p.loops = saved
	if err != nil {
		return nil, err
	}
	return n, p.expectBlockEnd()
}

func parseTemplate(src string) ([]node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	body, _, err := p.parseBody()
	return body, err
}
