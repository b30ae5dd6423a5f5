package textgen

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// fakeTok is a byte-level stand-in: each id is a byte string; the stream emits the
// longest valid UTF-8 prefix of what it holds, as a byte-level decoder does.
type fakeTok struct {
	pieces map[int64]string
	added  map[int64]string // added tokens (special)
}

func (f *fakeTok) piece(id int64, skip bool) string {
	if a, ok := f.added[id]; ok {
		if skip {
			return ""
		}
		return a
	}
	return f.pieces[id]
}

func (f *fakeTok) Decode(ids []int64, skip bool) string {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(f.piece(id, skip))
	}
	return strings.ToValidUTF8(b.String(), "\uFFFD")
}

func (f *fakeTok) NewStream(skip bool) Stream { return &fakeStream{t: f, skip: skip} }

func (f *fakeTok) AddedToken(id int64) (string, bool) { a, ok := f.added[id]; return a, ok }
func (f *fakeTok) HasAddedTokens() bool               { return len(f.added) > 0 }

type fakeStream struct {
	t       *fakeTok
	skip    bool
	pending []byte
	lastAdd bool
}

func (s *fakeStream) AppendStep(dst []byte, id int64) []byte {
	p := s.t.piece(id, s.skip)
	_, isAdded := s.t.added[id]
	if isAdded && !s.skip && s.lastAdd {
		p = " " + p // the decoder's space between special tokens
	}
	s.lastAdd = isAdded
	s.pending = append(s.pending, p...)
	n := 0
	for n < len(s.pending) {
		r, size := utf8.DecodeRune(s.pending[n:])
		if r == utf8.RuneError && size <= 1 {
			if !utf8.FullRune(s.pending[n:]) {
				break
			}
		}
		n += size
	}
	dst = append(dst, s.pending[:n]...)
	s.pending = s.pending[n:]
	return dst
}

func (s *fakeStream) Prime(ids []int64) {
	for _, id := range ids {
		s.AppendStep(nil, id)
	}
}

func words() *fakeTok {
	return &fakeTok{pieces: map[int64]string{
		1: "Hello", 2: ",", 3: " world", 4: " how", 5: " are", 6: " you", 7: "?", 8: " I", 9: " am", 10: " fine",
		11: "\xe2\x82", 12: "\xac", // "€" split across two tokens
		13: " S", 14: "TOP", 15: " ST", 16: "OP",
	}, added: map[int64]string{100: "<a>", 101: "<b>"}}
}

// run feeds steps and collects what a stream would send.
func run(d *Detokenizer, steps [][]int64, lastStop bool) (chunks []string, stop string, stopped bool) {
	for i, s := range steps {
		st, ok := d.Update(s, lastStop && i == len(steps)-1)
		finished := ok || i == len(steps)-1
		if c := d.Next(finished); c != "" {
			chunks = append(chunks, c)
		}
		if ok {
			return chunks, st, true
		}
	}
	return chunks, "", false
}

func TestDetokenizer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p        Params
		steps    [][]int64
		lastStop bool // the engine finished with reason stop (EOS/stop id) on the last step
		chunks   []string
		text     string
		stop     string
	}{
		{name: "plain", p: Params{SkipSpecialTokens: true}, steps: [][]int64{{1}, {2, 3}, {4}},
			chunks: []string{"Hello", ", world", " how"}, text: "Hello, world how"},
		{name: "utf-8 split across steps is never broken", p: Params{SkipSpecialTokens: true}, steps: [][]int64{{1}, {11}, {12}},
			chunks: []string{"Hello", "€"}, text: "Hello€"},
		{name: "stop string in one step, excluded, held back", p: Params{Stop: []string{" are"}, SkipSpecialTokens: true},
			steps: [][]int64{{1}, {4}, {5}, {6}}, chunks: []string{"He", "llo ", "how"}, text: "Hello how", stop: " are"},
		{name: "stop string split across steps", p: Params{Stop: []string{"STOP"}, SkipSpecialTokens: true},
			steps: [][]int64{{1}, {15}, {16}, {3}}, chunks: []string{"He", "llo", " "}, text: "Hello ", stop: "STOP"},
		{name: "include_stop_str_in_output keeps it and holds nothing back", p: Params{Stop: []string{"STOP"}, IncludeStopStrInOutput: true, SkipSpecialTokens: true},
			steps: [][]int64{{1}, {15}, {16, 3}}, chunks: []string{"Hello", " ST", "OP"}, text: "Hello STOP", stop: "STOP"},
		{name: "include_stop_str_in_output truncates after the stop string", p: Params{Stop: []string{"ST"}, IncludeStopStrInOutput: true, SkipSpecialTokens: true},
			steps: [][]int64{{1}, {15, 16}}, chunks: []string{"Hello", " ST"}, text: "Hello ST", stop: "ST"},
		{name: "first stop string of the list wins", p: Params{Stop: []string{"fine", " I"}, SkipSpecialTokens: true},
			steps: [][]int64{{1}, {8, 9, 10}}, chunks: []string{"He", "llo I am "}, text: "Hello I am ", stop: "fine"},
		{name: "min_tokens: a stop string inside the first tokens is not a stop", p: Params{Stop: []string{" how"}, MinTokens: 2, SkipSpecialTokens: true},
			steps: [][]int64{{4}, {5}, {4}}, chunks: []string{" ", "how ", "are"}, text: " how are", stop: " how"},
		{name: "min_tokens counted within one step", p: Params{Stop: []string{" how"}, MinTokens: 1, SkipSpecialTokens: true},
			steps: [][]int64{{4, 5, 4}}, chunks: []string{" how are"}, text: " how are", stop: " how"},
		{name: "stop-terminated step: the stop token is not decoded", p: Params{SkipSpecialTokens: true},
			steps: [][]int64{{1}, {3, 7}}, lastStop: true, chunks: []string{"Hello", " world"}, text: "Hello world"},
		{name: "special tokens skipped", p: Params{SkipSpecialTokens: true}, steps: [][]int64{{1, 100, 101, 3}},
			chunks: []string{"Hello world"}, text: "Hello world"},
		{name: "special tokens kept, spaces between them", p: Params{SpacesBetweenSpecialTokens: true}, steps: [][]int64{{1, 100, 101}},
			chunks: []string{"Hello<a> <b>"}, text: "Hello<a> <b>"},
		{name: "special tokens kept, no spaces between them", p: Params{}, steps: [][]int64{{1, 100, 101}},
			chunks: []string{"Hello<a><b>"}, text: "Hello<a><b>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(words(), []int64{1, 2, 3, 4, 5, 6}, tc.p)
			chunks, stop, _ := run(d, tc.steps, tc.lastStop)
			if strings.Join(chunks, "|") != strings.Join(tc.chunks, "|") || d.Text() != tc.text || stop != tc.stop {
				t.Fatalf("chunks %q text %q stop %q; want %q %q %q", chunks, d.Text(), stop, tc.chunks, tc.text, tc.stop)
			}
			if strings.Join(chunks, "") != d.Text() {
				t.Fatalf("chunks %q do not add up to the text %q", chunks, d.Text())
			}
		})
	}
}

func TestCheckStopStrings(t *testing.T) {
	for _, tc := range []struct {
		text    string
		newB    int
		stop    []string
		include bool
		s       string
		trunc   int
		ok      bool
	}{
		{"abcdef", 3, []string{"cd"}, false, "cd", 2, true}, // overlaps the new text
		{"abcdef", 2, []string{"cd"}, false, "", -1, false}, // ends before the new text
		{"abcdef", 1, []string{"cd"}, false, "", -1, false}, // searched before: not found again
		{"abcdef", 1, []string{"ef"}, true, "ef", -1, true}, // at the end: no truncation
		{"abcdef", 3, []string{"de"}, true, "de", 5, true},
		{"héllo wörld", len(" wörld"), []string{"ö"}, false, "ö", len("héllo w"), true},
		{"abc", 0, []string{"a"}, false, "", -1, false},
	} {
		s, tr, ok := CheckStopStrings([]byte(tc.text), tc.newB, tc.stop, tc.include)
		if s != tc.s || tr != tc.trunc || ok != tc.ok {
			t.Errorf("%q new %d %q: got %q %d %v", tc.text, tc.newB, tc.stop, s, tr, ok)
		}
	}
}
