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

// Char classes of the patterns, one bit each; U is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and W is
// [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k), Space is \s (White_Space, as Oniguruma's).
const (
	cL = 1 << iota
	cN
	cSpace
	cU
	cW
	cP
	cS
	cM
)

// bmpClass classifies every char of planes 0-2 (BMP, emoji and historic scripts, CJK
// extension B..F) by table lookup: 192 KiB built from the Unicode range tables at init, in
// about a millisecond. Chars above ask package unicode.
var bmpClass [0x30000]uint8

// asciiClass is the ASCII prefix of bmpClass, kept as its own small array for the hot paths.
var asciiClass [128]uint8

func init() {
	set := func(bit uint8, tabs ...*unicode.RangeTable) {
		for _, t := range tabs {
			for _, r := range t.R16 {
				for c := uint32(r.Lo); c <= uint32(r.Hi); c += uint32(r.Stride) {
					bmpClass[c] |= bit
				}
			}
			for _, r := range t.R32 {
				for c := r.Lo; c <= r.Hi && c < uint32(len(bmpClass)); c += r.Stride {
					bmpClass[c] |= bit
				}
			}
		}
	}
	set(cL, unicode.L)
	set(cN, unicode.N)
	set(cSpace, unicode.White_Space)
	set(cU, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
	set(cW, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
	set(cP, unicode.P)
	set(cS, unicode.S)
	set(cM, unicode.M)
	copy(asciiClass[:], bmpClass[:128])
}

func classOf(r rune) uint8 {
	if r >= 0 && r < rune(len(bmpClass)) {
		return bmpClass[r]
	}
	return slowClass(r)
}

// slowClass is classOf by package unicode (TestClassTable holds the table to it).
func slowClass(r rune) uint8 {
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
	if unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M) {
		k |= cU
	}
	if unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M) {
		k |= cW
	}
	if unicode.IsPunct(r) {
		k |= cP
	}
	if unicode.IsSymbol(r) {
		k |= cS
	}
	if unicode.IsMark(r) {
		k |= cM
	}
	return k
}

func isL(r rune) bool     { return classOf(r)&cL != 0 }
func isN(r rune) bool     { return classOf(r)&cN != 0 }
func isSpace(r rune) bool { return classOf(r)&cSpace != 0 }

// isOther is [^\s\p{L}\p{N}].
func isOther(r rune) bool { return classOf(r)&(cL|cN|cSpace) == 0 }
func isU(r rune) bool     { return classOf(r)&cU != 0 }
func isW(r rune) bool     { return classOf(r)&cW != 0 }
func isPS(r rune) bool    { return classOf(r)&(cP|cS) != 0 }
func isLM(r rune) bool    { return classOf(r)&(cL|cM) != 0 }

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
		if classOf(r)&cL == 0 {
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
		if c := s[i]; c < utf8.RuneSelf && (c < '0' || c > '9') {
			i++
			continue
		}
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
		// Every char of the class is 3 bytes long with a lead byte in E3..E9.
		if c := s[i]; c < 0xE3 || c > 0xE9 {
			i++
			continue
		}
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
