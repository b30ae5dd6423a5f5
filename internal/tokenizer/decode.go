package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// decoderStep is one decoder of tokenizers' decode_chain: tokens in, tokens out.
type decoderStep func(toks []string) []string

// decoderPlan is the decoder, compiled. Decoding is hot (DecodeStream re-decodes a small window
// per generated token), so the decoder chains the supported models use run as a plain append
// over per-id precomputed pieces; any other chain runs the general step-by-step form.
type decoderPlan struct {
	kind  int // planNone, planByteLevel, planSentencePiece, planGeneric
	steps []decoderStep

	// planByteLevel: the bytes each id stands for (ByteLevel's char->byte map, or the token's
	// own bytes when it has a char outside the map).
	// planSentencePiece: the token after Replace; isByte/byteVal for <0xXX> tokens.
	pieces  []string
	isByte  []bool
	byteVal []byte
	// planSentencePiece: Strip after Fuse.
	stripChar             rune
	stripStart, stripStop int
}

const (
	planNone = iota // no decoder: tokens joined by " "
	planByteLevel
	planSentencePiece // [Replace(String)], ByteFallback, Fuse, [Strip]
	planGeneric
)

func buildDecoder(c *component) (decoderStep, error) {
	switch c.Type {
	case "Sequence":
		var steps []decoderStep
		for _, raw := range c.Decoders {
			sub, err := parseComponent(raw, "decoder")
			if err != nil {
				return nil, err
			}
			if sub == nil {
				continue
			}
			d, err := buildDecoder(sub)
			if err != nil {
				return nil, err
			}
			steps = append(steps, d)
		}
		return func(toks []string) []string {
			for _, d := range steps {
				toks = d(toks)
			}
			return toks
		}, nil
	case "ByteLevel":
		return func(toks []string) []string {
			var buf []byte
			for _, t := range toks {
				buf = appendByteLevel(buf, t)
			}
			return []string{string(appendLossy(nil, buf))}
		}, nil
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || c.Content == nil || *c.Pattern.String == "" {
			return nil, fmt.Errorf("tokenizer: decoder \"Replace\" with a Regex pattern is not supported")
		}
		from, to := *c.Pattern.String, *c.Content
		return func(toks []string) []string {
			for i, t := range toks {
				toks[i] = strings.ReplaceAll(t, from, to)
			}
			return toks
		}, nil
	case "ByteFallback":
		return byteFallback, nil
	case "Fuse":
		return func(toks []string) []string { return []string{strings.Join(toks, "")} }, nil
	case "Strip":
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
			return nil, fmt.Errorf("tokenizer: decoder \"Strip\" content must be one char")
		}
		ch, _ := utf8.DecodeRuneInString(*c.Content)
		start, stop := deref(c.Start), deref(c.Stop)
		return func(toks []string) []string {
			for i, t := range toks {
				toks[i] = stripToken(t, ch, start, stop)
			}
			return toks
		}, nil
	case "Metaspace":
		repl := c.Replacement
		if utf8.RuneCountInString(repl) != 1 {
			return nil, fmt.Errorf("tokenizer: decoder \"Metaspace\" replacement %q is not one char", repl)
		}
		scheme := c.PrependScheme
		if scheme == "" {
			scheme = "always"
			if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
				scheme = "never"
			}
		}
		return func(toks []string) []string {
			for i, t := range toks {
				// As the Rust decoder: in the first token every replacement char is dropped, not
				// only a leading one (unless the scheme is never); elsewhere each becomes a space.
				if i == 0 && scheme != "never" {
					toks[i] = strings.ReplaceAll(t, repl, "")
				} else {
					toks[i] = strings.ReplaceAll(t, repl, " ")
				}
			}
			return toks
		}, nil
	}
	return nil, fmt.Errorf("tokenizer: decoder %q is not supported", c.Type)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// stripToken is the Strip decoder on one token: up to start leading and stop trailing ch.
func stripToken(t string, ch rune, start, stop int) string {
	rs := []rune(t)
	a := 0
	for a < start && a < len(rs) && rs[a] == ch {
		a++
	}
	b := len(rs)
	for i := 0; i < stop && b > a && rs[b-1] == ch; i++ {
		b--
	}
	return string(rs[a:b])
}

// byteFallback is the ByteFallback decoder: runs of <0xXX> tokens become their bytes when those
// are valid UTF-8, else one U+FFFD per byte.
func byteFallback(toks []string) []string {
	out := make([]string, 0, len(toks))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range toks {
		if b, ok := byteTokenValue(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// appendByteLevel appends the bytes a byte-level token stands for; a token with any char
// outside the byte map (an added token such as "<|eot_id|>") contributes its own bytes.
func appendByteLevel(dst []byte, t string) []byte {
	n := len(dst)
	for _, r := range t {
		if r < 0 || int(r) >= len(runeToByte) || runeToByte[r] < 0 {
			return append(dst[:n], t...)
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst
}

// appendLossy appends src with each maximal invalid UTF-8 subpart replaced by one U+FFFD, as
// Rust's String::from_utf8_lossy (and the WHATWG decoder JS uses) does. Go's own
// strings.ToValidUTF8 merges whole invalid runs instead, so it is not used.
func appendLossy(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c < 0x80 {
			dst = append(dst, c)
			i++
			continue
		}
		need, lo, hi := 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			need = 2
		case c == 0xED:
			need, hi = 2, 0x9F
		case c == 0xF0:
			need, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			need, hi = 3, 0x8F
		default:
			dst = append(dst, "\uFFFD"...)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(src) || src[j] < lo || src[j] > hi {
				ok = false
				break
			}
			lo, hi = 0x80, 0xBF
			j++
		}
		if ok {
			dst = append(dst, src[i:j]...)
		} else {
			dst = append(dst, "\uFFFD"...)
		}
		i = j
	}
	return dst
}
