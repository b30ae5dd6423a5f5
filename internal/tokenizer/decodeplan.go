package tokenizer

import (
	"strings"
	"unicode/utf8"
)

func (t *Tokenizer) buildDecoderPlan(c *component) error {
	p := &t.dec
	if c == nil {
		p.kind = planNone
		return nil
	}
	step, err := buildDecoder(c)
	if err != nil {
		return err
	}
	p.kind, p.steps = planGeneric, []decoderStep{step}
	switch {
	case c.Type == "ByteLevel":
		p.kind = planByteLevel
		p.pieces = make([]string, len(t.idToTok))
		for id, tok := range t.idToTok {
			p.pieces[id] = string(appendByteLevel(nil, tok))
		}
	case c.Type == "Sequence":
		var subs []*component
		for _, raw := range c.Decoders {
			sub, _ := parseComponent(raw, "decoder")
			if sub != nil {
				subs = append(subs, sub)
			}
		}
		if sp := sentencePiecePlan(subs); sp != nil {
			p.kind = planSentencePiece
			p.stripChar, p.stripStart, p.stripStop = sp.stripChar, sp.stripStart, sp.stripStop
			p.pieces = make([]string, len(t.idToTok))
			p.isByte = make([]bool, len(t.idToTok))
			p.byteVal = make([]byte, len(t.idToTok))
			for id, tok := range t.idToTok {
				if sp.from != "" {
					tok = strings.ReplaceAll(tok, sp.from, sp.to)
				}
				p.pieces[id] = tok
				p.byteVal[id], p.isByte[id] = byteTokenValue(tok)
			}
		}
	}
	return nil
}

type spPlan struct {
	from, to              string
	stripChar             rune
	stripStart, stripStop int
}

// sentencePiecePlan recognises [Replace(String)], ByteFallback, Fuse, [Strip(char)]: the
// Llama 2 / Mistral / Gemma decoder.
func sentencePiecePlan(subs []*component) *spPlan {
	sp := &spPlan{stripChar: -1}
	i := 0
	if i < len(subs) && subs[i].Type == "Replace" {
		r := subs[i]
		if r.Pattern == nil || r.Pattern.String == nil || r.Content == nil || *r.Pattern.String == "" {
			return nil
		}
		sp.from, sp.to = *r.Pattern.String, *r.Content
		// A replacement touching "<0x..>" would change what ByteFallback sees per token.
		if strings.ContainsAny(sp.from, "<>0123456789ABCDEFx") {
			return nil
		}
		i++
	}
	if i+1 >= len(subs) || subs[i].Type != "ByteFallback" || subs[i+1].Type != "Fuse" {
		return nil
	}
	i += 2
	if i < len(subs) && subs[i].Type == "Strip" {
		s := subs[i]
		if s.Content == nil || utf8.RuneCountInString(*s.Content) != 1 {
			return nil
		}
		sp.stripChar, _ = utf8.DecodeRuneInString(*s.Content)
		sp.stripStart, sp.stripStop = deref(s.Start), deref(s.Stop)
		i++
	}
	if i != len(subs) {
		return nil
	}
	return sp
}

// keep reports whether id takes part in a decode.
func (t *Tokenizer) keep(id int64, skip bool) bool {
	return id >= 0 && id < int64(len(t.hasID)) && t.hasID[id] && !(skip && t.skippable[id])
}

// appendDecode appends the decode of ids to dst; scratch is reused between calls so that the
// planned decoders do not allocate.
func (t *Tokenizer) appendDecode(dst []byte, scratch *[]byte, ids []int64, skip bool) []byte {
	p := &t.dec
	switch p.kind {
	case planByteLevel:
		buf := (*scratch)[:0]
		for _, id := range ids {
			if t.keep(id, skip) {
				buf = append(buf, p.pieces[id]...)
			}
		}
		*scratch = buf
		return appendLossy(dst, buf)
	case planSentencePiece:
		base := len(dst)
		pending := -1
		flush := func() {
			if pending >= 0 && !utf8.Valid(dst[pending:]) {
				n := len(dst) - pending
				dst = dst[:pending]
				for range n {
					dst = append(dst, "\uFFFD"...)
				}
			}
			pending = -1
		}
		for _, id := range ids {
			if !t.keep(id, skip) {
				continue
			}
			if p.isByte[id] {
				if pending < 0 {
					pending = len(dst)
				}
				dst = append(dst, p.byteVal[id])
				continue
			}
			flush()
			dst = append(dst, p.pieces[id]...)
		}
		flush()
		if p.stripChar >= 0 {
			dst = stripBytes(dst, base, p.stripChar, p.stripStart, p.stripStop)
		}
		return dst
	}
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if t.keep(id, skip) {
			toks = append(toks, t.idToTok[id])
		}
	}
	if p.kind == planNone {
		return append(dst, strings.Join(toks, " ")...)
	}
	for _, s := range p.steps {
		toks = s(toks)
	}
	for _, s := range toks {
		dst = append(dst, s...)
	}
	return dst
}

// stripBytes is the Strip decoder applied to the single fused token dst[base:].
func stripBytes(dst []byte, base int, ch rune, start, stop int) []byte {
	var enc [4]byte
	n := utf8.EncodeRune(enc[:], ch)
	c := enc[:n]
	a := base
	for i := 0; i < start && len(dst)-a >= n && string(dst[a:a+n]) == string(c); i++ {
		a += n
	}
	if a > base {
		dst = append(dst[:base], dst[a:]...)
	}
	for i := 0; i < stop && len(dst)-base >= n && string(dst[len(dst)-n:]) == string(c); i++ {
		dst = dst[:len(dst)-n]
	}
	return dst
}
