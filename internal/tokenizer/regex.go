package tokenizer

import (
	"fmt"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

// regexMatcher returns the matcher for a Split/ByteLevel regex: a hand-written scanner for the
// patterns the supported models use (see fastsplit.go; each is checked against regexp2 and
// the reference), regexp2 for any other pattern.
func regexMatcher(pattern string) (matcher, error) {
	if m := knownPattern(pattern); m != nil {
		return m, nil
	}
	re, err := regexp2.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: regex %q: %v", pattern, err)
	}
	return &regexp2Matcher{re: re}, nil
}

// regexp2Matcher runs a pattern with regexp2 in its default (.NET) mode, whose \s, \d, \w and
// \p{..} are Unicode-aware like Oniguruma's.
type regexp2Matcher struct{ re *regexp2.Regexp }

func (m *regexp2Matcher) appendMatches(s string, dst []int) []int {
	runes := []rune(s)
	// rune index -> byte offset
	offs := make([]int, len(runes)+1)
	o := 0
	for i, r := range runes {
		offs[i] = o
		if r == utf8.RuneError {
			// s is valid UTF-8 (Encode makes it so), so this is a literal U+FFFD.
			o += 3
		} else {
			o += utf8.RuneLen(r)
		}
	}
	offs[len(runes)] = o
	_ = m.re.FindRunesMatches(runes, 0, func(v regexp2.MatchView) bool {
		idx, n, _ := v.GroupRange(0)
		dst = append(dst, offs[idx], offs[idx+n])
		return true
	})
	return dst
}
