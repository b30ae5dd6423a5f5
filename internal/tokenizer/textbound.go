package tokenizer

// The most input bytes one token can stand for, so a server can refuse a text that
// is certainly longer than a context without encoding it: a text of B bytes encodes
// to at least ceil(B / MaxTokenBytes()) tokens.

import "golang.org/x/text/unicode/norm"

// MaxTokenBytes is the most bytes of Encode's input one token of its output can
// stand for, or 0 when this tokenizer has no such bound: a normalizer that deletes
// text (Strip, Replace with ""), a Split that removes what it matches, added tokens
// that swallow the whitespace around them (lstrip, rstrip), or chars the model
// drops or fuses into one unk token. A text of B bytes encodes to at least
// ceil(B / MaxTokenBytes()) tokens (the post-processor's only add to that).
func (t *Tokenizer) MaxTokenBytes() int { return t.maxTokenBytes }

// MaxTokenBytesOf is MaxTokenBytes for one text, tighter when the normalizer is
// one Unicode normalization form (Qwen's NFC) and text is already in that form:
// then normalizing leaves every piece of it as it is, and only the longest token
// counts. Checking the form is linear and far cheaper than encoding.
func (t *Tokenizer) MaxTokenBytesOf(text string) int {
	if t.boundForm != nil && t.maxTokenBytes > 0 && t.boundForm.IsNormalString(text) {
		return t.maxTokenBytes / normShrink(&component{Type: t.boundFormName})
	}
	return t.maxTokenBytes
}

// tokenBound computes MaxTokenBytes at Load: the longest token in the bytes the model
// sees (raw bytes for byte-level, normalized text otherwise), times the most a
// normalizer can shrink text.
func (t *Tokenizer) tokenBound(nc, pc *component, added []addedTokenJSON) int {
	shrink := normShrink(nc)
	if shrink == 0 || preDrops(pc) {
		return 0
	}
	longest := t.model.longestToken()
	if longest == 0 {
		return 0
	}
	for _, a := range added {
		if a.LStrip || a.RStrip {
			return 0
		}
		n := len(a.Content)
		if a.Normalized && t.norm != nil {
			n = max(n, len(t.norm(a.Content)))
		}
		longest = max(longest, n)
	}
	if nc != nil {
		// The form alone, or in a Sequence of just it.
		name := nc.Type
		if name == "Sequence" && len(nc.Normalizers) == 1 {
			if sub, err := parseComponent(nc.Normalizers[0], "normalizer"); err == nil && sub != nil {
				name = sub.Type
			}
		}
		if f, ok := unicodeForms[name]; ok {
			t.boundForm, t.boundFormName = &f, name
		}
	}
	return longest * shrink
}

var unicodeForms = map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}

// longestToken is the most bytes of a word one model token covers, or 0 when a
// char can vanish (no unk, no byte for it) or a run of chars can fuse into one unk.
func (b *bpe) longestToken() int {
	n := 0
	if b.byteLevel {
		for raw := range b.rawVocab {
			n = max(n, len(raw))
		}
		for _, id := range b.byteID {
			if id < 0 && b.unk < 0 {
				return 0 // the byte is dropped
			}
		}
		return max(n, 1)
	}
	for tok := range b.vocab {
		// The prefix and suffix are not input, so this overstates: safe.
		n = max(n, len(tok))
	}
	allBytes := b.byteFallback
	for _, id := range b.byteTok {
		allBytes = allBytes && id >= 0
	}
	if !allBytes {
		// A char outside the vocab becomes unk: one char (at most 4 bytes) unless
		// runs of them fuse, and without unk it is dropped.
		if b.unk < 0 || b.fuseUnk {
			return 0
		}
		n = max(n, 4)
	}
	return n
}

// normShrink is the most a normalizer can shrink text (input bytes per output
// byte), 0 when it can delete text. Unicode normalization shrinks a char at most
// 3× (NFC: U+0390 from 6 bytes decomposed to 2; Lowercase: U+212A 3 bytes to 1)
// and the compatibility forms 4× (NFKC: U+107A5, 4 bytes to 1); the factors
// here double the compatibility one and round the others up to 4 for margin.
func normShrink(c *component) int {
	if c == nil {
		return 1
	}
	switch c.Type {
	case "Sequence":
		f := 1
		for _, raw := range c.Normalizers {
			sub, err := parseComponent(raw, "normalizer")
			if err != nil {
				return 0
			}
			f *= normShrink(sub)
		}
		return f
	case "Prepend":
		return 1
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || c.Content == nil || *c.Content == "" {
			return 0
		}
		from, to := len(*c.Pattern.String), len(*c.Content)
		return max(1, (from+to-1)/to)
	case "NFC", "NFD", "Lowercase":
		return 4
	case "NFKC", "NFKD":
		return 8
	}
	return 0 // Strip, and anything unknown
}

// preDrops reports whether a pre-tokenizer can remove text (Split with behavior
// Removed).
func preDrops(c *component) bool {
	if c == nil {
		return false
	}
	switch c.Type {
	case "Sequence":
		for _, raw := range c.PreTokenizers {
			sub, err := parseComponent(raw, "pre_tokenizer")
			if err != nil || preDrops(sub) {
				return true
			}
		}
	case "Split":
		return c.Behavior == "Removed"
	}
	return false
}
