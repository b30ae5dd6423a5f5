package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Hand-written scanners for the Split regexes of the supported models. Each is the exact
// pattern, alternative by alternative, with the backtracking the pattern implies worked out by
// hand; TestFastMatchersAgreeWithRegexp2 and FuzzFastMatchers hold them to regexp2, and the
// differential test to the reference. They run ~50x faster than a backtracking engine and do
// not allocate.

const (
	// Llama 3 (tiktoken cl100k-style, digits in threes).
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen 2.5 / 3: the same with single digits.
	patQwen = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// GPT-OSS (o200k).
	patO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// DeepSeek V3: three Splits in sequence.
	patDigits3   = `\p{N}{1,3}`
	patDeepSeekC = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	patDeepSeek  = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// knownPattern returns a hand-written matcher for a regex the supported models use, or nil.
func knownPattern(pattern string) matcher {
	if fastDisabled {
		return nil
	}
	switch pattern {
	case patLlama3:
		return cl100kMatcher{maxDigits: 3}
	case patQwen:
		return cl100kMatcher{maxDigits: 1}
	case patO200k:
		return o200kMatcher{}
	case patDigits3:
		return digitsMatcher{}
	case patDeepSeekC:
		return deepseekCJKMatcher{}
	case patDeepSeek:
		return deepseekMatcher{}
	}
	return nil
}

// fastDisabled forces regexp2 for every pattern (tests compare the two).
var fastDisabled = false

const (
	cL = 1 << iota
	cN
	cSpace
	cLu
	cLl
	cP
	cS
)

var asciiClass [128]uint8

func init() {
	for c := range 128 {
		r := rune(c)
		var k uint8
		if unicode.IsLetter(r) {
			k |= cL
		}
		if unicode.IsNumber(r) {
			k |= cN
		}
		if unicode.IsSpace(r) {
			k |= cSpace
		}
		if unicode.IsUpper(r) {
			k |= cLu
		}
		if unicode.IsLower(r) {
			k |= cLl
		}
		if unicode.IsPunct(r) {
			k |= cP
		}
		if unicode.IsSymbol(r) {
			k |= cS
		}
		asciiClass[c] = k
	}
}

func isL(r rune) bool {
	if r < 128 {
		return asciiClass[r]&cL != 0
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < 128 {
		return asciiClass[r]&cN != 0
	}
	return unicode.IsNumber(r)
}

func isSpace(r rune) bool {
	if r < 128 {
		return asciiClass[r]&cSpace != 0
	}
	return unicode.IsSpace(r)
}

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool {
	if r < 128 {
		return asciiClass[r]&(cL|cN|cSpace) == 0
	}
	return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r)
}

// isU is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]; isW is [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func isU(r rune) bool {
	if r < 128 {
		return asciiClass[r]&cLu != 0
	}
	return unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
}

func isW(r rune) bool {
	if r < 128 {
		return asciiClass[r]&cLl != 0
	}
	return unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
}

func isPS(r rune) bool {
	if r < 128 {
		return asciiClass[r]&(cP|cS) != 0
	}
	return unicode.IsPunct(r) || unicode.IsSymbol(r)
}

func isLM(r rune) bool {
	if r < 128 {
		return asciiClass[r]&cL != 0
	}
	return unicode.IsLetter(r) || unicode.IsMark(r)
}

func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// scanL is scan(s, i, isL) with the ASCII case inline: it is the innermost loop of encoding.
func scanL(s string, i int) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if asciiClass[c]&cL == 0 {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) {
			return i
		}
		i += n
	}
	return i
}

func scan(s string, i int, f func(rune) bool) int {
	for i < len(s) {
		r, n := runeAt(s, i)
		if !f(r) {
			break
		}
		i += n
	}
	return i
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, returning its length or 0. Case
// folding is Unicode's: U+017F (long s) folds to s; no other char folds to these letters.
func contraction(s string, i int) int {
	if i >= len(s) || s[i] != '\'' || i+1 >= len(s) {
		return 0
	}
	if s[i+1] == 0xC5 && i+2 < len(s) && s[i+2] == 0xBF {
		return 3
	}
	switch s[i+1] | 0x20 {
	case 's', 't', 'm', 'd':
		return 2
	case 'r', 'v':
		if i+2 < len(s) && s[i+2]|0x20 == 'e' {
			return 3
		}
	case 'l':
		if i+2 < len(s) && s[i+2]|0x20 == 'l' {
			return 3
		}
	}
	return 0
}

// whitespaceTail matches \s*[\r\n]+|\s+(?!\S)|\s+ at i (s[i] is whitespace).
func whitespaceTail(s string, i int) int {
	e := i
	lastNL := -1
	last := i
	for e < len(s) {
		r, n := runeAt(s, e)
		if !isSpace(r) {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = e
		}
		last = e
		e += n
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	if e == len(s) || last == i {
		return e
	}
	return last
}

// cl100kMatcher is patLlama3 (maxDigits 3) or patQwen (maxDigits 1). Its alternatives cover
// every char, so matches tile the input.
type cl100kMatcher struct{ maxDigits int }

func (m cl100kMatcher) appendMatches(s string, dst []int) []int {
	for i := 0; i < len(s); {
		e := m.matchAt(s, i)
		dst = append(dst, i, e)
		i = e
	}
	return dst
}

func (m cl100kMatcher) matchAt(s string, i int) int {
	r, n := runeAt(s, i)
	if r == '\'' {
		if k := contraction(s, i); k > 0 {
			return i + k
		}
	}
	if isL(r) {
		return scanL(s, i+n)
	}
	if r != '\r' && r != '\n' && !isN(r) && i+n < len(s) {
		if r2, n2 := runeAt(s, i+n); isL(r2) {
			return scanL(s, i+n+n2)
		}
	}
	if isN(r) {
		j := i + n
		for k := 1; k < m.maxDigits && j < len(s); k++ {
			r2, n2 := runeAt(s, j)
			if !isN(r2) {
				break
			}
			j += n2
		}
		return j
	}
	if j, ok := spaceOthers(s, i, r, n); ok {
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	return whitespaceTail(s, i)
}

// spaceOthers matches ` ?[^\s\p{L}\p{N}]+` at i (r, n: the rune at i).
func spaceOthers(s string, i int, r rune, n int) (int, bool) {
	j := i
	if r == ' ' {
		if i+n >= len(s) {
			return 0, false
		}
		j = i + 1
		r, _ = runeAt(s, j)
	}
	if !isOther(r) {
		return 0, false
	}
	return scan(s, j, isOther), true
}

// o200kMatcher is patO200k; its matches tile the input too.
type o200kMatcher struct{}

func (o200kMatcher) appendMatches(s string, dst []int) []int {
	for i := 0; i < len(s); {
		e := o200kAt(s, i)
		dst = append(dst, i, e)
		i = e
	}
	return dst
}

// isP200 is [^\r\n\p{L}\p{N}].
func isP200(r rune) bool { return r != '\r' && r != '\n' && !isL(r) && !isN(r) }

// upperThenLower matches [U]*[W]+ at i: U* greedy, then backtracking to the last position
// where W+ can start.
func upperThenLower(s string, i int) (int, bool) {
	e := i
	lastW, lastWn := -1, 0
	for e < len(s) {
		r, n := runeAt(s, e)
		if !isU(r) {
			break
		}
		if isW(r) {
			lastW, lastWn = e, n
		}
		e += n
	}
	if e < len(s) {
		if r, _ := runeAt(s, e); isW(r) {
			return scan(s, e, isW), true
		}
	}
	if lastW >= 0 {
		return lastW + lastWn, true
	}
	return 0, false
}

func o200kAt(s string, i int) int {
	r, n := runeAt(s, i)
	p := isP200(r)
	// Alternative 1: P? U* W+ C?
	if p {
		if e, ok := upperThenLower(s, i+n); ok {
			return e + contraction(s, e)
		}
	}
	if e, ok := upperThenLower(s, i); ok {
		return e + contraction(s, e)
	}
	// Alternative 2: P? U+ W* C?
	if p {
		if e := scan(s, i+n, isU); e > i+n {
			e = scan(s, e, isW)
			return e + contraction(s, e)
		}
	}
	if e := scan(s, i, isU); e > i {
		e = scan(s, e, isW)
		return e + contraction(s, e)
	}
	if isN(r) {
		j := i + n
		for k := 1; k < 3 && j < len(s); k++ {
			r2, n2 := runeAt(s, j)
			if !isN(r2) {
				break
			}
			j += n2
		}
		return j
	}
	if j, ok := spaceOthers(s, i, r, n); ok {
		for j < len(s) && (s[j] == '\r' || s[j] == '\n' || s[j] == '/') {
			j++
		}
		return j
	}
	return whitespaceTail(s, i)
}

// digitsMatcher is \p{N}{1,3}.
type digitsMatcher struct{}

func (digitsMatcher) appendMatches(s string, dst []int) []int {
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		if !isN(r) {
			i += n
			continue
		}
		j := i + n
		for k := 1; k < 3 && j < len(s); k++ {
			r2, n2 := runeAt(s, j)
			if !isN(r2) {
				break
			}
			j += n2
		}
		dst = append(dst, i, j)
		i = j
	}
	return dst
}

func isDeepSeekCJK(r rune) bool {
	return (r >= 0x4e00 && r <= 0x9fa5) || (r >= 0x3040 && r <= 0x309f) || (r >= 0x30a0 && r <= 0x30ff)
}

// deepseekCJKMatcher is patDeepSeekC.
type deepseekCJKMatcher struct{}

func (deepseekCJKMatcher) appendMatches(s string, dst []int) []int {
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		if !isDeepSeekCJK(r) {
			i += n
			continue
		}
		j := scan(s, i+n, isDeepSeekCJK)
		dst = append(dst, i, j)
		i = j
	}
	return dst
}

// deepseekMatcher is patDeepSeek. Unlike the others it can fail at a position (a digit not
// followed by a letter), which then belongs to no match.
type deepseekMatcher struct{}

func (deepseekMatcher) appendMatches(s string, dst []int) []int {
	for i := 0; i < len(s); {
		if e := deepseekAt(s, i); e > i {
			dst = append(dst, i, e)
			i = e
			continue
		}
		_, n := runeAt(s, i)
		i += n
	}
	return dst
}

func isASCIILetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }

func deepseekAt(s string, i int) int {
	r, n := runeAt(s, i)
	// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
	if r < 128 && asciiClass[r]&(cP|cS) != 0 && i+1 < len(s) && isASCIILetter(s[i+1]) {
		j := i + 2
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j
	}
	// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
	if r != '\r' && r != '\n' && !isL(r) && !isPS(r) && i+n < len(s) {
		if r2, n2 := runeAt(s, i+n); isLM(r2) {
			return scan(s, i+n+n2, isLM)
		}
	}
	if isLM(r) {
		return scan(s, i+n, isLM)
	}
	//  ?[\p{P}\p{S}]+[\r\n]*
	j := i
	r2 := r
	if r == ' ' && i+1 < len(s) {
		j = i + 1
		r2, _ = runeAt(s, j)
	}
	if isPS(r2) {
		j = scan(s, j, isPS)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	if isPS(r) {
		j = scan(s, i, isPS)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	if isSpace(r) {
		return whitespaceTail(s, i)
	}
	return i
}
