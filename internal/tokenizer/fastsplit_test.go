package tokenizer

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
)

var fastPatterns = []string{patLlama3, patQwen, patO200k, patDigits3, patDeepSeekC, patDeepSeek}

var slowCache sync.Map

func slowMatcher(t testing.TB, p string) matcher {
	if m, ok := slowCache.Load(p); ok {
		return m.(matcher)
	}
	re, err := regexp2.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := &regexp2Matcher{re: re}
	slowCache.Store(p, m)
	return m
}

func checkFast(t *testing.T, s string) {
	for _, p := range fastPatterns {
		fast := knownPattern(p)
		if fast == nil {
			t.Fatalf("no fast matcher for %q", p)
		}
		got := fast.appendMatches(s, nil)
		want := slowMatcher(t, p).appendMatches(s, nil)
		if !slices.Equal(got, want) {
			t.Fatalf("pattern %.40q on %q:\n got %v\nwant %v", p, s, got, want)
		}
	}
}

func TestFastMatchersAgreeWithRegexp2(t *testing.T) {
	for _, s := range hostileCorpus() {
		if len(s) > 5000 {
			s = s[:5000]
			for !utf8.ValidString(s) {
				s = s[:len(s)-1]
			}
		}
		checkFast(t, s)
	}
	// Every pair of interesting chars, to reach each backtracking branch.
	alphabet := []string{"ſ", "K", "a", "A", "ǅ", "ʰ", "中", "\u0301", "1", "٣", "Ⅻ", " ", "\t", "\n", "\r", "\u3000", "'", "s", "S", "l", "L", "e", "!", "/", "$", "é", "ア", "あ", "_", "ß"}
	for _, a := range alphabet {
		for _, b := range alphabet {
			for _, c := range alphabet {
				checkFast(t, a+b+c)
				checkFast(t, a+b+c+a+b)
			}
		}
	}
}

func FuzzFastMatchers(f *testing.F) {
	for _, s := range hostileCorpus()[:60] {
		f.Add(s)
	}
	f.Add("x'Ll 'RE  \n\n  A\u0301bcDEf")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, utf8.RuneError) {
			return
		}
		checkFast(t, s)
	})
}

func TestClassTable(t *testing.T) {
	for r := rune(0); r < rune(len(bmpClass)); r++ {
		if bmpClass[r] != slowClass(r) {
			t.Fatalf("%U: table %08b, unicode %08b", r, bmpClass[r], slowClass(r))
		}
	}
}
