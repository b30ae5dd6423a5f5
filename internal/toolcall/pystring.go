package toolcall

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// strings reads adjacent string literals and joins them.
func (p *pyParser) strings(string) (pyNode, error) {
	var b strings.Builder
	kind := -1 // 0 str, 1 bytes
	for {
		save := p.i
		p.skipInline()
		prefStart := p.i
		for p.i < len(p.s) && p.i-prefStart < 2 && strings.IndexByte("rRuUbBfF", p.s[p.i]) >= 0 {
			p.i++
		}
		if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\'') {
			p.i = save
			break
		}
		prefix := strings.ToLower(p.s[prefStart:p.i])
		switch prefix {
		case "", "r", "u", "b", "br", "rb":
		default:
			return pyNode{}, errPySyntax // f-strings and bad prefixes
		}
		k := 0
		if strings.Contains(prefix, "b") {
			k = 1
		}
		if kind >= 0 && kind != k {
			return pyNode{}, errPySyntax
		}
		kind = k
		s, err := p.strBody(strings.Contains(prefix, "r"), k == 1)
		if err != nil {
			return pyNode{}, err
		}
		b.WriteString(s)
	}
	if kind < 0 {
		return pyNode{}, errPySyntax
	}
	if kind == 1 {
		return pyNode{kind: pyOpaque}, nil
	}
	return pyNode{kind: pyConst, val: jval{kind: jString, text: b.String()}}, nil
}

func (p *pyParser) strBody(raw, bytesLit bool) (string, error) {
	s := p.s
	q := s[p.i : p.i+1]
	if strings.HasPrefix(s[p.i:], q+q+q) {
		q = q + q + q
	}
	p.i += len(q)
	var b strings.Builder
	for p.i < len(s) {
		if strings.HasPrefix(s[p.i:], q) {
			p.i += len(q)
			return b.String(), nil
		}
		c := s[p.i]
		if c == '\n' && len(q) == 1 {
			return "", errPySyntax
		}
		if c != '\\' {
			r, n := utf8.DecodeRuneInString(s[p.i:])
			if bytesLit && r > 0x7f {
				return "", errPySyntax
			}
			b.WriteString(s[p.i : p.i+n])
			p.i += n
			continue
		}
		if p.i+1 >= len(s) {
			return "", errPySyntax
		}
		if raw {
			b.WriteString(s[p.i : p.i+2])
			p.i += 2
			continue
		}
		if err := p.escape(&b, bytesLit); err != nil {
			return "", err
		}
	}
	return "", errPySyntax
}

func (p *pyParser) escape(b *strings.Builder, bytesLit bool) error {
	s := p.s
	e := s[p.i+1]
	p.i += 2
	simple := map[byte]string{'\\': "\\", '\'': "'", '"': "\"", 'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n", 'r': "\r", 't': "\t", 'v': "\v", '\n': ""}
	if v, ok := simple[e]; ok {
		b.WriteString(v)
		return nil
	}
	hexN := map[byte]int{'x': 2, 'u': 4, 'U': 8}
	if n, ok := hexN[e]; ok && !(bytesLit && e != 'x') {
		if p.i+n > len(s) {
			return errPySyntax
		}
		v, err := strconv.ParseUint(s[p.i:p.i+n], 16, 32)
		if err != nil || v > unicode.MaxRune {
			return errPySyntax
		}
		p.i += n
		b.WriteRune(rune(v))
		return nil
	}
	if e >= '0' && e <= '7' {
		v := int(e - '0')
		for k := 0; k < 2 && p.i < len(s) && s[p.i] >= '0' && s[p.i] <= '7'; k++ {
			v = v*8 + int(s[p.i]-'0')
			p.i++
		}
		b.WriteRune(rune(v))
		return nil
	}
	if e == 'N' && !bytesLit {
		return errPySyntax // named escapes are not supported here
	}
	b.WriteByte('\\')
	p.i-- // an unknown escape keeps its backslash and character
	return nil
}
