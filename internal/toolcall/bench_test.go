package toolcall

import (
	"strings"
	"testing"
)

// benchStream feeds one answer token by token; b.N answers.
func benchStream(b *testing.B, name, text string) {
	p, _ := Lookup(name)
	toks := tokenize(text)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		st := p.NewStream(qcTools, seqIDs())
		for _, tok := range toks {
			st.Feed(tok, 1)
		}
		st.Finish(st.Feed("", 1))
	}
	b.ReportMetric(float64(len(toks)), "tokens/answer")
}

func longArgs() string {
	return strings.Repeat("lorem ipsum dolor sit amet ", 40)
}

func BenchmarkHermesStream(b *testing.B) {
	benchStream(b, "hermes", `Let me look.<tool_call>{"name": "write", "arguments": {"path": "a.txt", "text": "`+longArgs()+`"}}</tool_call>`)
}

func BenchmarkQwen3CoderStream(b *testing.B) {
	benchStream(b, "qwen3_coder", "<tool_call>\n<function=write>\n<parameter=path>\na.txt\n</parameter>\n<parameter=text>\n"+longArgs()+"\n</parameter>\n</function>\n</tool_call>")
}

func BenchmarkLlama3JSONStream(b *testing.B) {
	benchStream(b, "llama3_json", `{"name": "write", "parameters": {"path": "a.txt", "text": "`+longArgs()+`"}}`)
}

func BenchmarkPythonicStream(b *testing.B) {
	benchStream(b, "pythonic", `[write(path='a.txt', text='`+longArgs()+`')]`)
}

func BenchmarkDeepSeekV31Stream(b *testing.B) {
	benchStream(b, "deepseek_v31", `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>write<｜tool▁sep｜>{"path": "a.txt", "text": "`+longArgs()+`"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>`)
}

func BenchmarkContentOnlyHermes(b *testing.B) {
	benchStream(b, "hermes", longArgs())
}
