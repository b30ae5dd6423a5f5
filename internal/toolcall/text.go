package toolcall

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

// pyStrip, pyLStrip and pyRStrip are str.strip, lstrip and rstrip.
func pyStrip(s string) string  { return strings.TrimFunc(s, isPySpace) }
func pyLStrip(s string) string { return strings.TrimLeftFunc(s, isPySpace) }
func pyRStrip(s string) string { return strings.TrimRightFunc(s, isPySpace) }

// partialTagOverlap is the length of the longest proper prefix of tag
// that ends text (vLLM's partial_tag_overlap), in bytes.
func partialTagOverlap(text, tag string) int {
	k := len(tag) - 1
	if len(text) < k {
		k = len(text)
	}
	for ; k > 0; k-- {
		if strings.HasSuffix(text, tag[:k]) {
			return k
		}
	}
	return 0
}

// skipRegexSpace skips what a Unicode regex \s matches.
func skipRegexSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isPySpace(r) {
			break
		}
		i += n
	}
	return i
}

// afterKey finds the first `"key"\s*:\s*` in s and returns the offset just
// past it, or -1.
func afterKey(s, quotedKey string) int {
	from := 0
	for {
		k := strings.Index(s[from:], quotedKey)
		if k < 0 {
			return -1
		}
		j := skipRegexSpace(s, from+k+len(quotedKey))
		if j < len(s) && s[j] == ':' {
			return skipRegexSpace(s, j+1)
		}
		from += k + 1
	}
}

// textBuf accumulates a stream's text. Appending is amortized and reading
// the whole text does not copy it, where `s += delta` copies every time.
type textBuf struct{ b strings.Builder }

func (t *textBuf) add(delta string) string {
	t.b.WriteString(delta)
	return t.b.String()
}
