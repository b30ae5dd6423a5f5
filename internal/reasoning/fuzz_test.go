package reasoning

import (
	"testing"
	"unicode/utf8"
)

// FuzzParsers: no panics, and the split never says more than the text:
// reasoning plus content, whole or streamed, is at most the input.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{"<think>a</think>b", "a</think>b<tool_call>c", "<think><think></think>", "x<tool_call>y</tool_call></think>"} {
		f.Add(s, uint64(12345))
	}
	kwargs := []map[string]any{nil, {"enable_thinking": false}, {"thinking": true}}
	f.Fuzz(func(t *testing.T, text string, cuts uint64) {
		if !utf8.ValidString(text) {
			return
		}
		for _, name := range Names() {
			for _, kw := range kwargs {
				p, _ := Lookup(name, Options{ChatTemplateKwargs: kw})
				r, c := p.Split(text)
				if n := plen(r) + plen(c); n > len(text) {
					t.Fatalf("%s: split %d bytes of %d", name, n, len(text))
				}
				p.PromptEndsReasoning(text)
				st := p.NewStream()
				out := 0
				rest, k := text, cuts
				for rest != "" {
					size := min(int(k%9)+1, len(rest))
					for !utf8.ValidString(rest[:size]) {
						size++
					}
					k = k/9 + 1
					d, _ := st.Feed(rest[:size])
					if d != nil {
						out += plen(d.Reasoning) + plen(d.Content)
					}
					rest = rest[size:]
				}
				if out > len(text) {
					t.Fatalf("%s: stream %d bytes of %d", name, out, len(text))
				}
			}
		}
	})
}

func plen(p *string) int {
	if p == nil {
		return 0
	}
	return len(*p)
}
