package toolcall

import (
	"math/rand"
	"testing"
	"unicode/utf8"
)

// FuzzParsers runs every parser over arbitrary text, whole and streamed
// in pieces cut where the fuzzer says. Nothing may panic, and the output
// stays within a linear bound of the input (number conversion can turn
// "1e300" into 301 digits, hence the large factor).
func FuzzParsers(f *testing.F) {
	seeds := []string{
		`<tool_call>{"name": "f", "arguments": {"a": [1, 2.5, "x"]}}</tool_call>`,
		"<tool_call>\n<function=f>\n<parameter=a>\n1e300\n</parameter>\n</function>\n</tool_call>",
		`<|python_tag|>{"name": "f", "parameters": {"a": "b"}}; {"name": "g", "parameters": {}}`,
		`[f(a='x', b={'k': [1, None]}), g()]`,
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\"a\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>",
		`[f(a="(", b=')')]`, `{"name": "f", "parameters": {"a": "\ud800"}}`, "[[[[[[", "{{{{{{",
	}
	for _, s := range seeds {
		f.Add(s, uint64(0x0123456789abcdef))
	}
	tools := []Tool{{Name: "f", Parameters: []byte(`{"properties": {"a": {"type": "number"}, "b": {"type": "object"}}}`)}}
	f.Fuzz(func(t *testing.T, text string, cuts uint64) {
		if !utf8.ValidString(text) || len(text) > 4096 {
			return
		}
		limit := 400*len(text) + 4096
		for _, name := range Names() {
			p, _ := Lookup(name)
			r := p.Parse(text, tools, nil)
			n := len(deref(r.Content))
			for _, c := range r.Calls {
				n += len(c.Name) + len(c.Arguments)
			}
			if n > limit {
				t.Fatalf("%s: Parse output %d bytes for %d input", name, n, len(text))
			}
			st := p.NewStream(tools, nil)
			out, deltas := 0, 0
			count := func(d *Delta) {
				if d == nil {
					return
				}
				deltas++
				if d.Content != nil {
					out += len(*d.Content)
				}
				for _, c := range d.Calls {
					out += len(c.Name) + len(c.Args) + len(c.ID)
				}
			}
			rest, k := text, cuts
			for rest != "" {
				size := int(k%7) + 1
				k = k/7 + 1
				i := 0
				for j := 0; j < size && i < len(rest); j++ {
					_, w := utf8.DecodeRuneInString(rest[i:])
					i += w
				}
				count(st.Feed(rest[:i], size))
				rest = rest[i:]
			}
			final, _ := st.Finish(st.Feed("", 1))
			count(final)
			if out > limit+64*deltas {
				t.Fatalf("%s: stream output %d bytes for %d input", name, out, len(text))
			}
		}
	})
}

// FuzzValidJSON: the validator agrees with the decoder.
func FuzzValidJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5e3, "x\u00e9", null, true, NaN, -Infinity]}`, `"\ud800"`, `[1,]`, `{"a" 1}`, "\"\x01\"", `-`, `01`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := pyLoads(s)
		if got := validJSON(s); got != (err == nil) {
			t.Fatalf("validJSON(%q) = %v, decoder err %v", s, got, err)
		}
		if isCompleteJSON(s) != (err == nil) {
			t.Fatalf("isCompleteJSON(%q) disagrees with the decoder (err %v)", s, err)
		}
	})
}

// TestMarkerSoup streams random sequences of each parser's own markers and
// fragments, the inputs byte-level fuzzing rarely builds, and checks that
// nothing panics (a deepseek index bug hid there).
func TestMarkerSoup(t *testing.T) {
	pieces := []string{
		"<tool_call>", "</tool_call>", "<function=", "f>", "</function>", "<parameter=", "a>", "</parameter>",
		"<|python_tag|>", `{"name": "f", `, `"arguments": `, `"parameters": `, `{"a": 1}`, "}", "; ", "[", "]", "f(", ")", "a=", "'x'",
		"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>",
		"function", "\n```json\n", "\n```", `"}`, "<|channel|>", "commentary to=functions.f", "<|message|>", "<|call|>", "<|end|>",
		"<|start|>", "assistant", "final", "analysis", " ", "\n", "x", `"`, "{", ":", ",", "ü",
	}
	deepseek := []string{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
		"<｜tool▁sep｜>", "function", "f", "\n```json\n", `{"a": "b"}`, "\n```", " ", "\n", `"}`}
	r := rand.New(rand.NewSource(1))
	for _, name := range Names() {
		p, _ := Lookup(name)
		pieces := pieces
		if p.Name() == "deepseek_v3" || p.Name() == "deepseek_v31" {
			pieces = deepseek
		}
		for k := 0; k < 3000; k++ {
			st := p.NewStream(qcTools, nil)
			text := ""
			for j := 1 + r.Intn(16); j > 0; j-- {
				piece := pieces[r.Intn(len(pieces))]
				text += piece
				st.Feed(piece, 1+r.Intn(2))
			}
			st.Finish(st.Feed("", 1))
			p.Parse(text, qcTools, nil)
		}
	}
}
