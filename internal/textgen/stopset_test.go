package textgen

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The automaton is checked against CheckStopStrings, the per-string search that
// follows vLLM's check_stop_strings line by line: same stop string, same truncation,
// on every text, stop list and split of the text into steps.

// stopAlphabet mixes one-byte and multi-byte characters, so stop strings overlap,
// share prefixes and end inside characters of one another in bytes.
var stopAlphabet = []string{"a", "b", "ab", "é", "€", "😀", "\n", " ", "e\u0301"}

// brokenUTF8 are pieces of text that are not UTF-8 (no decoder writes them, but
// CheckStopStrings has an answer for them, and so must the automaton).
var brokenUTF8 = []string{"\xff", "\xe2\x82", "\x82", "\xac\xac", "\xc3"}

func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(stopAlphabet[r.IntN(len(stopAlphabet))])
	}
	return b.String()
}

// randStops draws stop strings from the text itself (so they match), from the
// alphabet, as prefixes and extensions of one another, and repeated.
func randStops(r *rand.Rand, text string, n int) []string {
	stops := make([]string, 0, n)
	for range n {
		var s string
		switch k := r.IntN(5); {
		case k == 0 && len(stops) > 0:
			s = stops[r.IntN(len(stops))] // repeated
		case k == 1 && len(stops) > 0:
			p := stops[r.IntN(len(stops))]
			s = p + randText(r, 1+r.IntN(2)) // an extension of another
		case k == 2 && len(text) > 0:
			i, j := r.IntN(len(text)+1), r.IntN(len(text)+1)
			s = text[min(i, j):max(i, j)] // a piece of the text, maybe cut inside a character
		default:
			s = randText(r, 1+r.IntN(4))
		}
		if s == "" {
			s = "a"
		}
		stops = append(stops, s)
	}
	return stops
}

func checkSame(t *testing.T, text []byte, newBytes int, stops []string, include bool) {
	t.Helper()
	set := compile(stops)
	if set == nil {
		return // a stop string that is not UTF-8: the per-string search serves it
	}
	ws, wt, wok := CheckStopStrings(text, newBytes, stops, include)
	gs, gt, gok := set.Check(text, newBytes, include)
	if gs != ws || gt != wt || gok != wok {
		t.Fatalf("text %q new %d stops %q include %v: automaton %q %d %v, per-string %q %d %v",
			text, newBytes, stops, include, gs, gt, gok, ws, wt, wok)
	}
}

func TestStopSetCheck(t *testing.T) {
	for _, tc := range []struct {
		text  string
		newB  int
		stops []string
	}{
		{"abcdef", 3, []string{"cd"}},
		{"abcdef", 2, []string{"cd"}},
		{"abcdef", 3, []string{"ef", "cd"}},          // list order, not position
		{"abcdef", 3, []string{"cdef", "de", "d"}},   // prefixes and suffixes of one another
		{"abcabc", 3, []string{"bca", "abc", "abc"}}, // repeated; leftmost occurrence in the window
		{"aaaa", 1, []string{"aaa", "aa"}},           // overlaps of itself
		{"héllo wörld", 6, []string{"ö", "ld", "w"}}, // characters, not bytes
		{"x€y", 1, []string{"€y", "\x82\xacy"}},      // a stop string that is not UTF-8
		{"x€y", 2, []string{"€y"}},                   // new text starting inside a character
		{"\xff€y", 1, []string{"€y", "y"}},           // text that is not UTF-8
		{"abc", 0, []string{"a"}},
		{"", 0, []string{"a"}},
		{"ab", 2, []string{"", "b"}}, // an empty stop string is skipped
	} {
		for _, include := range []bool{false, true} {
			checkSame(t, []byte(tc.text), tc.newB, tc.stops, include)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		text := []byte(randText(r, r.IntN(12)))
		if r.IntN(4) == 0 && len(text) > 0 { // bytes that are not UTF-8
			i := r.IntN(len(text))
			text = append(text[:i:i], append([]byte(brokenUTF8[r.IntN(len(brokenUTF8))]), text[i:]...)...)
		}
		stops := randStops(r, string(text), 1+r.IntN(8))
		checkSame(t, text, r.IntN(len(text)+1), stops, r.IntN(2) == 0)
	}
}

// runPair feeds the same steps to a detokenizer with the automaton and one with the
// per-string search and compares every step's result and streamed text (the second
// also finds the held-back tail by walking back, the first by moving forward).
func runPair(t *testing.T, pieces []string, stops []string, cuts []int, include bool, minTokens int64, lastStop bool) {
	t.Helper()
	tok := &fakeTok{pieces: map[int64]string{}}
	ids := make([]int64, len(pieces))
	for i, p := range pieces {
		tok.pieces[int64(i)] = p
		ids[i] = int64(i)
	}
	p := Params{Stop: stops, IncludeStopStrInOutput: include, MinTokens: minTokens, SkipSpecialTokens: true}
	p.Stops = compile(stops)
	fast := New(tok, nil, p)
	p.Stops = nil
	slow := New(tok, nil, p)
	slow.set = nil
	slow.heldBad = true // the hold-back walked back over the text each step
	for i, start := 0, 0; start < len(ids); i++ {
		end := len(ids)
		if i < len(cuts) {
			end = min(len(ids), start+1+cuts[i])
		}
		last := lastStop && end == len(ids)
		fs, fok := fast.Update(ids[start:end], last)
		ss, sok := slow.Update(ids[start:end], last)
		finished := fok || end == len(ids)
		fn, sn := fast.Next(finished), slow.Next(finished)
		if fs != ss || fok != sok || fn != sn || fast.Text() != slow.Text() {
			t.Fatalf("pieces %q stops %q cuts %v include %v min %d: step %d: automaton %q %v %q %q, per-string %q %v %q %q",
				pieces, stops, cuts, include, minTokens, i, fs, fok, fn, fast.Text(), ss, sok, sn, slow.Text())
		}
		if fok {
			return
		}
		start = end
	}
}

func TestStopSetDetokenizer(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 5000 {
		pieces := make([]string, 1+r.IntN(10))
		var whole strings.Builder
		for i := range pieces {
			pieces[i] = randText(r, r.IntN(3))
			whole.WriteString(pieces[i])
		}
		// A character split across tokens, as a byte-level tokenizer splits it.
		if i := r.IntN(len(pieces)); len(pieces[i]) > 1 && r.IntN(3) == 0 && i+1 < len(pieces) {
			k := 1 + r.IntN(len(pieces[i])-1)
			pieces[i], pieces[i+1] = pieces[i][:k], pieces[i][k:]+pieces[i+1]
		}
		stops := randStops(r, whole.String(), 1+r.IntN(8))
		cuts := make([]int, len(pieces))
		for i := range cuts {
			cuts[i] = r.IntN(3)
		}
		runPair(t, pieces, stops, cuts, r.IntN(2) == 0, int64(r.IntN(3)), r.IntN(4) == 0)
	}
}

// FuzzStopSet compares the automaton with the per-string search on the fuzzer's
// text, stop strings (split at '|') and steps (each byte of cuts a step length).
func FuzzStopSet(f *testing.F) {
	f.Add("Hello, world! How are you?", "o|wor|world!|How are|?", []byte{0, 3, 1, 2}, false, uint8(0))
	f.Add("aaaa€€aé", "aa|€a|é|aaa", []byte{1, 1, 0, 2}, true, uint8(1))
	f.Add("x\xe2\x82\xacy", "€y|\x82\xacy|y", []byte{0, 0}, false, uint8(0))
	f.Fuzz(func(t *testing.T, text, stopList string, cuts []byte, include bool, minTokens uint8) {
		if len(text) > 256 || len(stopList) > 256 || len(cuts) > 64 {
			return
		}
		stops := strings.Split(stopList, "|")
		for i := range len(text) + 1 {
			checkSame(t, []byte(text), i, stops, include)
		}
		// Tokens of up to 3 bytes, so characters are split across them.
		var pieces []string
		for i := 0; i < len(text); i += 3 {
			pieces = append(pieces, text[i:min(len(text), i+3)])
		}
		steps := make([]int, len(cuts))
		for i, c := range cuts {
			steps[i] = int(c % 4)
		}
		runPair(t, pieces, stops, steps, include, int64(minTokens%4), len(cuts)%2 == 1)
	})
}

func TestCompileStopsBounds(t *testing.T) {
	if CompileStops([]string{"a"}) != nil {
		t.Error("one stop string compiled; the per-string search is as fast there")
	}
	if CompileStops([]string{strings.Repeat("a", 65)}) == nil {
		t.Error("one long stop string not compiled; the per-string search walks it back each token")
	}
	if CompileStops([]string{"a", "b", "c", "\xff"}) != nil {
		t.Error("a stop string that is not UTF-8 compiled")
	}
	big := []string{"a", "b", "c", strings.Repeat("€", MaxStopSetBytes/3)}
	if CompileStops(big) != nil {
		t.Error("more than MaxStopSetBytes compiled")
	}
	big[3] = strings.Repeat("x", MaxStopSetBytes-3)
	s := CompileStops(big)
	if s == nil || len(s.fail) != MaxStopSetBytes+1 {
		t.Fatalf("the largest stop set: %v", s != nil)
	}
}

// No allocation per step once the text's buffer has room.
func TestStopSetNoAllocs(t *testing.T) {
	tok, vocab := benchTok()
	d := New(tok, nil, Params{Stop: benchStops(256), SkipSpecialTokens: true})
	if d.set == nil {
		t.Fatal("256 stop strings not compiled")
	}
	d.text = make([]byte, 0, 1<<20)
	ids := []int64{0}
	var out []byte
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		ids[0] = int64(i % vocab)
		i++
		d.Update(ids, false)
		out = d.AppendNext(out[:0], false)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per step", allocs)
	}
}
