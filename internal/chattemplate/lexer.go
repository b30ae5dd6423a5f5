package chattemplate

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer reproduces jinja2's, configured as transformers configures it:
// trim_blocks and lstrip_blocks on, keep_trailing_newline off, newlines
// normalised to "\n". Whitespace control is resolved here, so the parser
// only ever sees final text.

type tokKind uint8

const (
	tText tokKind = iota
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
	tEOF
)

type token struct {
	kind tokKind
	val  string // text, name, operator, decoded string literal, number text
	line int
}

func (t token) String() string {
	switch t.kind {
	case tEOF:
		return "end of template"
	case tText:
		return "template text"
	case tVarEnd:
		return "'}}'"
	case tBlockEnd:
		return "'%}'"
	}
	return fmt.Sprintf("%q", t.val)
}

type lexer struct {
	src   string
	pos   int
	line  int
	toks  []token
	depth []byte // open brackets inside a tag, as jinja's balancing stack
}

// normalizeSource applies what jinja2's tokeniter does before lexing.
func normalizeSource(src string) string {
	if strings.Contains(src, "\r") {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

func lex(src string) ([]token, error) {
	l := &lexer{src: normalizeSource(src), line: 1}
	if err := l.run(); err != nil {
		return nil, err
	}
	return l.toks, nil
}

func (l *lexer) errf(format string, a ...any) error {
	return fmt.Errorf("line %d: %s", l.line, fmt.Sprintf(format, a...))
}

func (l *lexer) emit(k tokKind, v string) { l.toks = append(l.toks, token{k, v, l.line}) }

// run lexes the root state: text up to the next tag opener.
func (l *lexer) run() error {
	lineStarting := true
	for l.pos < len(l.src) {
		i := indexTagStart(l.src[l.pos:])
		if i < 0 {
			l.emitText(l.src[l.pos:])
			l.pos = len(l.src)
			break
		}
		start := l.pos + i
		kind := l.src[start+1] // '{', '%' or '#'
		sign := byte(0)
		if start+2 < len(l.src) && (l.src[start+2] == '-' || l.src[start+2] == '+') {
			sign = l.src[start+2]
		}
		text := l.src[l.pos:start]
		isRaw := kind == '%' && l.isRawBegin(start, sign)
		text = stripBefore(text, sign, kind != '{', lineStarting)
		l.emitText(text)
		l.line += strings.Count(l.src[l.pos:start], "\n")
		l.pos = start + 2
		if sign != 0 {
			l.pos++
		}
		var err error
		switch {
		case isRaw:
			err = l.lexRaw()
		case kind == '#':
			err = l.lexComment()
		case kind == '{':
			l.emit(tVarBegin, "")
			err = l.lexTag("}}", tVarEnd)
		default:
			l.emit(tBlockBegin, "")
			err = l.lexTag("%}", tBlockEnd)
		}
		if err != nil {
			return err
		}
		lineStarting = l.pos > 0 && l.src[l.pos-1] == '\n'
	}
	l.emit(tEOF, "")
	return nil
}

func indexTagStart(s string) int {
	off := 0
	for {
		i := strings.IndexByte(s[off:], '{')
		if i < 0 || off+i+1 >= len(s) {
			return -1
		}
		c := s[off+i+1]
		if c == '{' || c == '%' || c == '#' {
			return off + i
		}
		off += i + 1
	}
}

// stripBefore applies "-" (strip all whitespace) and lstrip_blocks (strip the
// blanks between the line start and a block or comment tag) to the text that
// precedes a tag, as jinja2's OptionalLStrip does.
func stripBefore(text string, sign byte, blockOrComment, lineStarting bool) string {
	if sign == '-' {
		return strings.TrimRightFunc(text, isPySpace)
	}
	if sign == '+' || !blockOrComment {
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	if lpos > 0 || lineStarting {
		rest := text[lpos:]
		if rest != "" && strings.TrimLeftFunc(rest, isPySpace) == "" {
			return text[:lpos]
		}
	}
	return text
}

// isPySpace is Python's str.isspace / regex \s for one rune.
func isPySpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\f', '\v', 0x1c, 0x1d, 0x1e, 0x1f, 0x85:
		return true
	}
	return r > 0x7f && unicode.IsSpace(r)
}

func (l *lexer) emitText(s string) {
	if s != "" {
		l.emit(tText, s)
	}
}

// afterEnd applies whitespace control after a tag's end marker: "-" eats all
// following whitespace, "+" keeps it, otherwise trim_blocks eats one newline
// (block and comment tags only).
func (l *lexer) afterEnd(sign byte, trim bool) {
	switch {
	case sign == '-':
		rest := l.src[l.pos:]
		trimmed := strings.TrimLeftFunc(rest, isPySpace)
		l.line += strings.Count(rest[:len(rest)-len(trimmed)], "\n")
		l.pos += len(rest) - len(trimmed)
	case sign == 0 && trim && l.pos < len(l.src) && l.src[l.pos] == '\n':
		l.pos++
		l.line++
	}
}

func (l *lexer) isRawBegin(start int, sign byte) bool {
	p := start + 2
	if sign != 0 {
		p++
	}
	rest := strings.TrimLeftFunc(l.src[p:], isPySpace)
	if !strings.HasPrefix(rest, "raw") {
		return false
	}
	rest = strings.TrimLeftFunc(rest[3:], isPySpace)
	return strings.HasPrefix(rest, "%}") || strings.HasPrefix(rest, "-%}")
}

func (l *lexer) lexRaw() error {
	// Skip "raw" and the end of the opening tag; no trim_blocks here (jinja's
	// raw_begin rule has no newline suffix).
	e := strings.Index(l.src[l.pos:], "%}")
	sign := byte(0)
	if e > 0 && l.src[l.pos+e-1] == '-' {
		sign = '-'
	}
	l.pos += e + 2
	l.afterEnd(sign, false)
	for off := l.pos; ; {
		i := strings.Index(l.src[off:], "{%")
		if i < 0 {
			return l.errf("missing end of raw directive")
		}
		tag := off + i
		p := tag + 2
		s := byte(0)
		if p < len(l.src) && (l.src[p] == '-' || l.src[p] == '+') {
			s = l.src[p]
			p++
		}
		rest := strings.TrimLeftFunc(l.src[p:], isPySpace)
		if strings.HasPrefix(rest, "endraw") {
			rest2 := strings.TrimLeftFunc(rest[6:], isPySpace)
			es := byte(0)
			if len(rest2) > 0 && (rest2[0] == '-' || rest2[0] == '+') {
				es, rest2 = rest2[0], rest2[1:]
			}
			if strings.HasPrefix(rest2, "%}") {
				text := stripBefore(l.src[l.pos:tag], s, true, false)
				l.emitText(text)
				l.line += strings.Count(l.src[l.pos:tag], "\n")
				l.pos = len(l.src) - len(rest2) + 2
				l.afterEnd(es, true)
				return nil
			}
		}
		off = tag + 2
	}
}

func (l *lexer) lexComment() error {
	i := strings.Index(l.src[l.pos:], "#}")
	if i < 0 {
		return l.errf("missing end of comment tag")
	}
	body := l.src[l.pos : l.pos+i]
	sign := byte(0)
	if strings.HasSuffix(body, "-") || strings.HasSuffix(body, "+") {
		sign = body[len(body)-1]
	}
	l.line += strings.Count(body, "\n")
	l.pos += i + 2
	l.afterEnd(sign, true)
	return nil
}

const opChars = "+-/*%~[](){}><=.:|,;!"

func (l *lexer) lexTag(end string, endKind tokKind) error {
	for {
		if l.pos >= len(l.src) {
			return l.errf("unexpected end of template, expected %q", end)
		}
		rest := l.src[l.pos:]
		if len(l.depth) == 0 {
			if strings.HasPrefix(rest, end) {
				l.pos += 2
				l.emit(endKind, "")
				l.afterEnd(0, endKind == tBlockEnd)
				return nil
			}
			if len(rest) > 2 && (rest[0] == '-' || (rest[0] == '+' && endKind == tBlockEnd)) && strings.HasPrefix(rest[1:], end) {
				l.pos += 3
				l.emit(endKind, "")
				l.afterEnd(rest[0], endKind == tBlockEnd)
				return nil
			}
		}
		c := rest[0]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '\'' || c == '"':
			s, n, err := lexString(rest)
			if err != nil {
				return l.errf("%v", err)
			}
			l.line += strings.Count(rest[:n], "\n")
			l.emit(tString, s)
			l.pos += n
		case c >= '0' && c <= '9':
			kind, n := lexNumber(rest)
			l.emit(kind, strings.ReplaceAll(rest[:n], "_", ""))
			l.pos += n
		case c == '_' || isLetter(c) || c >= 0x80:
			n := 0
			for n < len(rest) {
				r, sz := utf8.DecodeRuneInString(rest[n:])
				if r == '_' || unicode.IsLetter(r) || (n > 0 && unicode.IsDigit(r)) {
					n += sz
					continue
				}
				break
			}
			if n == 0 {
				return l.errf("unexpected char %q", rest[:1])
			}
			l.emit(tName, rest[:n])
			l.pos += n
		case strings.IndexByte(opChars, c) >= 0:
			op := rest[:1]
			if len(rest) > 1 {
				switch rest[:2] {
				case "//", "**", "==", "!=", ">=", "<=":
					op = rest[:2]
				}
			}
			if op == "!" {
				return l.errf("unexpected char '!'")
			}
			switch op {
			case "(", "[", "{":
				l.depth = append(l.depth, op[0])
			case ")", "]", "}":
				want := map[string]byte{")": '(', "]": '[', "}": '{'}[op]
				if len(l.depth) == 0 || l.depth[len(l.depth)-1] != want {
					return l.errf("unexpected %q", op)
				}
				l.depth = l.depth[:len(l.depth)-1]
			}
			l.emit(tOp, op)
			l.pos += len(op)
		default:
			return l.errf("unexpected char %q", rest[:1])
		}
	}
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func lexNumber(s string) (tokKind, int) {
	digits := func(i int) int {
		for i < len(s) && (isDigit(s[i]) || (s[i] == '_' && i+1 < len(s) && isDigit(s[i+1]))) {
			i++
		}
		return i
	}
	n := digits(0)
	kind := tInt
	if n+1 < len(s) && s[n] == '.' && isDigit(s[n+1]) {
		n = digits(n + 1)
		kind = tFloat
	}
	if n < len(s) && (s[n] == 'e' || s[n] == 'E') {
		m := n + 1
		if m < len(s) && (s[m] == '+' || s[m] == '-') {
			m++
		}
		if m < len(s) && isDigit(s[m]) {
			n = digits(m)
			kind = tFloat
		}
	}
	return kind, n
}

// lexString decodes a quoted literal the way jinja2 does: the body goes
// through Python's "unicode-escape" codec (after backslashreplace, so
// non-ASCII text survives), so \n, \t, \xNN, \uNNNN ... are decoded and
// unknown escapes are kept verbatim.
func lexString(s string) (string, int, error) {
	q := s[0]
	i := 1
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
			continue
		case q:
			return unescapePy(s[1:i]), i + 1, nil
		}
		i++
	}
	return "", 0, fmt.Errorf("unterminated string")
}

func unescapePy(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if v, ok := hexVal(s[i+1:], n); ok {
				b.WriteRune(rune(v))
				i += n
			} else {
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, j := 0, i
			for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
				v = v*8 + int(s[j]-'0')
				j++
			}
			b.WriteRune(rune(v))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String()
}

func hexVal(s string, n int) (int, bool) {
	if len(s) < n {
		return 0, false
	}
	v := 0
	for i := 0; i < n; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v*16 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, v <= unicode.MaxRune
}
