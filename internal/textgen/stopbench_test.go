package textgen

import (
	"fmt"
	"strings"
	"testing"
)

// benchWords is the vocabulary of the benchmark's text: lower-case words, so the stop
// strings below (a word, '#', digits) share prefixes with the text but never match.
var benchWords = []string{"the", "of", "and", "to", "in", "is", "that", "for", "it", "as",
	"with", "was", "on", "be", "at", "by", "this", "had", "not", "are", "but", "from",
	"or", "have", "an", "they", "which", "one", "you", "were", "her", "all", "she"}

func benchStops(n int) []string {
	stops := make([]string, n)
	for i := range stops {
		stops[i] = fmt.Sprintf(" %s %s#%d", benchWords[i%len(benchWords)], benchWords[(i*7+3)%len(benchWords)], i)
	}
	return stops
}

// benchTokenizer decodes each id to " word" with no work of its own, so the
// benchmark measures the stop-string check.
type benchTokenizer struct{}

func (benchTokenizer) Decode([]int64, bool) string     { return "" }
func (benchTokenizer) NewStream(bool) Stream           { return benchStream{} }
func (benchTokenizer) AddedToken(int64) (string, bool) { return "", false }
func (benchTokenizer) HasAddedTokens() bool            { return false }
func (benchStream) Prime([]int64)                      {}
func (benchStream) AppendStep(dst []byte, id int64) []byte {
	return append(append(dst, ' '), benchWords[id]...)
}

type benchStream struct{}

func benchTok() (Tokenizer, int) { return benchTokenizer{}, len(benchWords) }

// BenchmarkStopStrings is the cost of one token of one choice: its decoding (an
// append here), the stop-string check and the streamed chunk, with n stop strings
// that partly match the text but never end it. Small sets are run with both
// searches, to place minCompiledStops; "long" makes one stop string 12 KiB, so the
// held-back tail is 12 Ki characters.
func BenchmarkStopStrings(b *testing.B) {
	for _, n := range []int{0, 1, 2, 4, 16, 256} {
		for _, search := range []string{"auto", "automaton", "perstring"} {
			if search != "auto" && (n == 0 || n > 4) {
				continue
			}
			b.Run(fmt.Sprintf("stops=%d/%s", n, search), func(b *testing.B) {
				benchStopStrings(b, benchStops(n), search)
			})
		}
	}
	for _, n := range []int{1, 256} {
		stops := benchStops(n)
		stops[0] = strings.Repeat("x", 12<<10)
		b.Run(fmt.Sprintf("stops=%d/long", n), func(b *testing.B) { benchStopStrings(b, stops, "auto") })
	}
}

func benchStopStrings(b *testing.B, stops []string, search string) {
	tok, vocab := benchTok()
	p := Params{Stop: stops, SkipSpecialTokens: true}
	if search == "automaton" {
		p.Stops = compile(p.Stop)
	}
	d := New(tok, nil, p)
	if search == "perstring" {
		d.set = nil
	}
	const window = 64 << 10
	d.text = make([]byte, 0, window+64)
	var out []byte
	ids := make([]int64, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(d.text) >= window {
			benchReset(d)
		}
		ids[0] = int64((i * 13) % vocab)
		if _, stopped := d.Update(ids, false); stopped {
			b.Fatalf("stopped on %q", d.text[max(0, len(d.text)-40):])
		}
		out = d.AppendNext(out[:0], false)
	}
}

// benchReset empties the text without reallocating it.
func benchReset(d *Detokenizer) {
	d.text, d.sent, d.nOut = d.text[:0], 0, 0
	d.node, d.scanned = 0, 0
	d.heldAt, d.heldTo, d.heldRunes = 0, 0, 0
}

// BenchmarkCompileStops is the once-per-request cost of the automaton: the
// benchmark's 256 stop strings, and the largest set (MaxStopSetBytes in 256 strings).
func BenchmarkCompileStops(b *testing.B) {
	largest := make([]string, 256)
	for i := range largest {
		largest[i] = fmt.Sprintf("%03d%s", i, strings.Repeat(benchWords[i%len(benchWords)], 64))[:MaxStopSetBytes/256]
	}
	for _, tc := range []struct {
		name string
		stop []string
	}{{"stops=256", benchStops(256)}, {"largest", largest}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if CompileStops(tc.stop) == nil {
					b.Fatal("not compiled")
				}
			}
		})
	}
}
