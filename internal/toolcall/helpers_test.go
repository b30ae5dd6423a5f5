package toolcall

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// seqIDs makes deterministic ids.
func seqIDs() func() string {
	n := 0
	return func() string {
		n++
		return fmt.Sprintf("chatcmpl-tool-%016x", n)
	}
}

// tokenize splits text roughly as a BPE tokenizer would: special markers
// (<|...|>, <｜...｜>, <tool_call> style tags) whole, words with their
// leading space, and each other character alone.
func tokenize(text string) []string {
	var out []string
	for len(text) > 0 {
		if n := specialLen(text); n > 0 {
			out = append(out, text[:n])
			text = text[n:]
			continue
		}
		r, n := utf8.DecodeRuneInString(text)
		j := n
		if r == ' ' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			for j < len(text) {
				r2, m := utf8.DecodeRuneInString(text[j:])
				if !(unicode.IsLetter(r2) || unicode.IsDigit(r2) || r2 == '_') {
					break
				}
				j += m
			}
		}
		out = append(out, text[:j])
		text = text[j:]
	}
	return out
}

func specialLen(s string) int {
	for _, p := range [][2]string{{"<|", "|>"}, {"<｜", "｜>"}} {
		if strings.HasPrefix(s, p[0]) {
			if e := strings.Index(s[len(p[0]):], p[1]); e >= 0 && e < 40 {
				return len(p[0]) + e + len(p[1])
			}
		}
	}
	for _, tag := range []string{"<tool_call>", "</tool_call>", "<think>", "</think>", "<function=", "</function>", "<parameter=", "</parameter>"} {
		if strings.HasPrefix(s, tag) {
			return len(tag)
		}
	}
	return 0
}

type chunking struct {
	name  string
	split func(string) [][2]any // text, token count
}

func group(toks []string, k int) [][2]any {
	var out [][2]any
	for i := 0; i < len(toks); i += k {
		j := min(i+k, len(toks))
		out = append(out, [2]any{strings.Join(toks[i:j], ""), j - i})
	}
	return out
}

var chunkings = []chunking{
	{"chars", func(s string) [][2]any {
		var out [][2]any
		for _, r := range s {
			out = append(out, [2]any{string(r), 1})
		}
		return out
	}},
	{"tokens", func(s string) [][2]any { return group(tokenize(s), 1) }},
	{"tokens3", func(s string) [][2]any { return group(tokenize(s), 3) }},
	{"tokens8", func(s string) [][2]any { return group(tokenize(s), 8) }},
	{"whole", func(s string) [][2]any { return [][2]any{{s, len(tokenize(s))}} }},
}

type streamedCall struct {
	id, name string
	args     string
	deltas   int
}

type streamRun struct {
	lax         bool // skip the shape checks
	content     string
	calls       []*streamedCall
	deltas      []*Delta
	toolsCalled bool
}

// runStream feeds chunks, then the usual final engine output: the
// end-of-sequence token, which detokenizes to no text. Finish gets what
// that last Feed returned. Every delta's shape is checked.
func runStream(t *testing.T, p Parser, tools []Tool, chunks [][2]any) streamRun {
	t.Helper()
	st := p.NewStream(tools, seqIDs())
	var r streamRun
	for _, c := range chunks {
		r.add(t, st.Feed(c[0].(string), c[1].(int)))
	}
	final, called := st.Finish(st.Feed("", 1))
	r.add(t, final)
	r.toolsCalled = called
	return r
}

func (r *streamRun) add(t *testing.T, d *Delta) {
	t.Helper()
	if d == nil {
		return
	}
	r.deltas = append(r.deltas, d)
	if d.Content != nil {
		r.content += *d.Content
	}
	for _, c := range d.Calls {
		for len(r.calls) <= c.Index {
			r.calls = append(r.calls, nil)
		}
		sc := r.calls[c.Index]
		if r.lax {
			if sc == nil {
				sc = &streamedCall{}
				r.calls[c.Index] = sc
			}
			sc.args += c.Args
			continue
		}
		if sc == nil {
			if c.ID == "" || c.Type != "function" || c.Name == "" {
				t.Errorf("first delta of call %d lacks id/type/name: %+v", c.Index, c)
			}
			sc = &streamedCall{id: c.ID, name: c.Name}
			r.calls[c.Index] = sc
		} else if c.ID != "" && c.ID != sc.id {
			t.Errorf("call %d got a second id %q", c.Index, c.ID)
		}
		sc.args += c.Args
		sc.deltas++
	}
}

func (r streamRun) args() []string {
	var out []string
	for _, c := range r.calls {
		if c == nil {
			out = append(out, "<missing>")
			continue
		}
		out = append(out, c.args)
	}
	return out
}

func (r streamRun) names() []string {
	var out []string
	for _, c := range r.calls {
		if c != nil {
			out = append(out, c.name)
		}
	}
	return out
}

func callNames(cs []Call) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

func callArgs(cs []Call) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Arguments)
	}
	return out
}

func deref(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

func sp(s string) *string { return &s }
