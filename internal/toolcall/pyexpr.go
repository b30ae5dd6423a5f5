package toolcall

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file reads the small part of Python's expression grammar that
// vLLM's pythonic parser (ast.parse) and qwen3_coder (ast.literal_eval)
// accept: literals, lists, tuples, sets, dicts, names, dotted calls with
// keyword arguments, and unary +/- and complex +/- for literal_eval.
// Anything else is treated as a syntax error; both callers treat an
// unsupported node and a syntax error alike.

type pyKind uint8

const (
	pyConst  pyKind = iota // val holds it
	pyOpaque               // a constant json.dumps rejects: bytes, complex, Ellipsis
	pyList                 // elts
	pyTuple                // elts
	pySet                  // elts
	pyDict                 // keys, elts
	pyName                 // name
	pyCall                 // name (dotted; "" when the callee is not a name chain), kwNames, elts
	pyUnary                // op, elts[0]
	pyBinary               // op, elts[0], elts[1]
)

type pyNode struct {
	kind    pyKind
	val     jval
	name    string
	op      byte
	elts    []pyNode
	keys    []pyNode
	kwNames []string
	numeric bool // a number constant (for unary minus and complex sums)
}

var errPySyntax = errors.New("toolcall: python syntax")

type pyParser struct {
	s     string
	i     int
	depth int // open brackets: newlines are free inside them
	nest  int
}

// parsePyExpr parses one expression statement that must be all of s
// (whitespace, newlines and comments around it aside).
func parsePyExpr(s string) (pyNode, error) {
	p := &pyParser{s: s}
	p.skipSpace()
	n, err := p.expr()
	if err != nil {
		return pyNode{}, err
	}
	p.skipSpace()
	if p.i != len(p.s) {
		return pyNode{}, errPySyntax
	}
	return n, nil
}

func (p *pyParser) skipSpace() {
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == ' ' || c == '\t' || c == '\f' || c == '\r':
			p.i++
		case c == '\n':
			p.i++
		case c == '\\' && p.i+1 < len(p.s) && p.s[p.i+1] == '\n':
			p.i += 2
		case c == '#':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

// skipInline skips spaces; newlines only inside brackets.
func (p *pyParser) skipInline() {
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '\n' && p.depth == 0 {
			return
		}
		if c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n' {
			p.i++
			continue
		}
		if c == '\\' && p.i+1 < len(p.s) && p.s[p.i+1] == '\n' {
			p.i += 2
			continue
		}
		if c == '#' {
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
			continue
		}
		return
	}
}

func (p *pyParser) peek() byte {
	p.skipInline()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *pyParser) eat(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

// expr: a tuple without brackets is not needed by the callers; one
// additive expression is.
func (p *pyParser) expr() (pyNode, error) {
	if p.nest++; p.nest > maxDepth {
		return pyNode{}, errPySyntax
	}
	defer func() { p.nest-- }()
	left, err := p.unary()
	if err != nil {
		return left, err
	}
	for {
		c := p.peek()
		if c != '+' && c != '-' {
			return left, nil
		}
		p.i++
		right, err := p.unary()
		if err != nil {
			return right, err
		}
		left = pyNode{kind: pyBinary, op: c, elts: []pyNode{left, right}}
	}
}

func (p *pyParser) unary() (pyNode, error) {
	c := p.peek()
	if c == '+' || c == '-' {
		p.i++
		x, err := p.unary()
		if err != nil {
			return x, err
		}
		return pyNode{kind: pyUnary, op: c, elts: []pyNode{x}}, nil
	}
	return p.postfix()
}

func (p *pyParser) postfix() (pyNode, error) {
	n, err := p.atom()
	if err != nil {
		return n, err
	}
	for {
		switch p.peek() {
		case '.':
			if n.kind != pyName {
				return n, errPySyntax // attribute of a non-name: unsupported
			}
			p.i++
			p.skipInline()
			id := p.ident()
			if id == "" {
				return n, errPySyntax
			}
			n = pyNode{kind: pyName, name: n.name + "." + id}
		case '(':
			p.i++
			call, err := p.callArgs(n)
			if err != nil {
				return call, err
			}
			n = call
		default:
			return n, nil
		}
	}
}

func (p *pyParser) callArgs(fn pyNode) (pyNode, error) {
	p.depth++
	defer func() { p.depth-- }()
	call := pyNode{kind: pyCall}
	if fn.kind == pyName {
		call.name = fn.name
	}
	for !p.eat(')') {
		save := p.i
		p.skipInline()
		id := p.ident()
		if id != "" && p.peek() == '=' && !strings.HasPrefix(p.s[p.i:], "==") {
			p.i++
			v, err := p.expr()
			if err != nil {
				return v, err
			}
			call.kwNames = append(call.kwNames, id)
			call.elts = append(call.elts, v)
		} else {
			p.i = save
			if len(call.kwNames) > 0 {
				return call, errPySyntax // positional after keyword
			}
			if _, err := p.expr(); err != nil {
				return call, err
			}
		}
		if !p.eat(',') {
			if !p.eat(')') {
				return call, errPySyntax
			}
			break
		}
	}
	return call, nil
}

func (p *pyParser) ident() string {
	start := p.i
	for p.i < len(p.s) {
		r, n := utf8.DecodeRuneInString(p.s[p.i:])
		if r == '_' || unicode.IsLetter(r) || (p.i > start && unicode.IsDigit(r)) {
			p.i += n
			continue
		}
		break
	}
	return p.s[start:p.i]
}

var pyKeywords = map[string]bool{
	"and": true, "as": true, "assert": true, "async": true, "await": true, "break": true,
	"class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true,
	"except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true,
	"or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true,
	"with": true, "yield": true,
}

func (p *pyParser) atom() (pyNode, error) {
	c := p.peek()
	switch {
	case c == '[':
		p.i++
		elts, _, err := p.seq(']')
		return pyNode{kind: pyList, elts: elts}, err
	case c == '(':
		p.i++
		elts, comma, err := p.seq(')')
		if err == nil && len(elts) == 1 && !comma {
			return elts[0], nil
		}
		return pyNode{kind: pyTuple, elts: elts}, err
	case c == '{':
		p.i++
		return p.dictOrSet()
	case c == '.' && strings.HasPrefix(p.s[p.i:], "..."):
		p.i += 3
		return pyNode{kind: pyOpaque}, nil
	case c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	case c == '"' || c == '\'':
		return p.strings("")
	}
	start := p.i
	id := p.ident()
	if id == "" {
		return pyNode{}, errPySyntax
	}
	if p.i < len(p.s) && (p.s[p.i] == '"' || p.s[p.i] == '\'') && len(id) <= 2 {
		p.i = start
		return p.strings("")
	}
	switch id {
	case "True":
		return pyNode{kind: pyConst, val: jval{kind: jBool, b: true}}, nil
	case "False":
		return pyNode{kind: pyConst, val: jval{kind: jBool}}, nil
	case "None":
		return pyNode{kind: pyConst, val: jval{kind: jNull}}, nil
	}
	if pyKeywords[id] {
		return pyNode{}, errPySyntax
	}
	return pyNode{kind: pyName, name: id}, nil
}

// seq reads comma-separated expressions up to close; comma reports a
// trailing or separating comma (a one-element tuple needs it).
func (p *pyParser) seq(close byte) ([]pyNode, bool, error) {
	p.depth++
	defer func() { p.depth-- }()
	var elts []pyNode
	comma := false
	for !p.eat(close) {
		e, err := p.expr()
		if err != nil {
			return nil, false, err
		}
		elts = append(elts, e)
		if p.eat(',') {
			comma = true
			continue
		}
		if !p.eat(close) {
			return nil, false, errPySyntax
		}
		break
	}
	return elts, comma, nil
}

func (p *pyParser) dictOrSet() (pyNode, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.eat('}') {
		return pyNode{kind: pyDict}, nil
	}
	first, err := p.expr()
	if err != nil {
		return first, err
	}
	if !p.eat(':') {
		set := pyNode{kind: pySet, elts: []pyNode{first}}
		for p.eat(',') {
			if p.eat('}') {
				return set, nil
			}
			e, err := p.expr()
			if err != nil {
				return e, err
			}
			set.elts = append(set.elts, e)
		}
		if !p.eat('}') {
			return set, errPySyntax
		}
		return set, nil
	}
	d := pyNode{kind: pyDict}
	key := first
	for {
		v, err := p.expr()
		if err != nil {
			return v, err
		}
		d.keys = append(d.keys, key)
		d.elts = append(d.elts, v)
		if !p.eat(',') {
			break
		}
		if p.eat('}') {
			return d, nil
		}
		if key, err = p.expr(); err != nil {
			return key, err
		}
		if !p.eat(':') {
			return d, errPySyntax
		}
	}
	if !p.eat('}') {
		return d, errPySyntax
	}
	return d, nil
}

func (p *pyParser) number() (pyNode, error) {
	s := p.s
	start := p.i
	j := p.i
	isDigit := func(c byte, base int) bool {
		switch base {
		case 16:
			return (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'f')
		case 8:
			return c >= '0' && c <= '7'
		case 2:
			return c == '0' || c == '1'
		}
		return c >= '0' && c <= '9'
	}
	digits := func(base int) bool { // digits with single underscores between
		k := j
		for j < len(s) && (isDigit(s[j], base) || (s[j] == '_' && j > k && j+1 < len(s) && isDigit(s[j+1], base))) {
			j++
		}
		return j > k
	}
	if s[j] == '0' && j+1 < len(s) && strings.IndexByte("xXoObB", s[j+1]) >= 0 {
		base := map[byte]int{'x': 16, 'o': 8, 'b': 2}[s[j+1]|0x20]
		j += 2
		if j < len(s) && s[j] == '_' {
			j++
		}
		if !digits(base) {
			return pyNode{}, errPySyntax
		}
		p.i = j
		if p.identFollows() {
			return pyNode{}, errPySyntax
		}
		v, ok := new(big.Int).SetString(strings.ReplaceAll(s[start+2:j], "_", ""), base)
		if !ok {
			return pyNode{}, errPySyntax
		}
		return pyNode{kind: pyConst, val: jval{kind: jInt, text: v.String()}, numeric: true}, nil
	}
	intPart := digits(10)
	isFloat := false
	if j < len(s) && s[j] == '.' {
		j++
		isFloat = true
		frac := digits(10)
		if !intPart && !frac {
			return pyNode{}, errPySyntax
		}
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j
		j++
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if !digits(10) {
			j = k
		} else {
			isFloat = true
		}
	}
	text := strings.ReplaceAll(s[start:j], "_", "")
	if j < len(s) && (s[j] == 'j' || s[j] == 'J') {
		p.i = j + 1
		return pyNode{kind: pyOpaque, numeric: true}, nil
	}
	p.i = j
	if p.identFollows() {
		return pyNode{}, errPySyntax
	}
	if !isFloat {
		if len(text) > 1 && text[0] == '0' && strings.Trim(text, "0") != "" {
			return pyNode{}, errPySyntax // leading zeros
		}
		v, _ := new(big.Int).SetString(text, 10)
		return pyNode{kind: pyConst, val: jval{kind: jInt, text: v.String()}, numeric: true}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return pyNode{}, errPySyntax
	}
	return pyNode{kind: pyConst, val: jval{kind: jFloat, num: f}, numeric: true}, nil
}

func (p *pyParser) identFollows() bool {
	if p.i >= len(p.s) {
		return false
	}
	r, _ := utf8.DecodeRuneInString(p.s[p.i:])
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}
