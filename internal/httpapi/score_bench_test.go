package httpapi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkRerankPrompts: the CPU of turning one rerank request (a query and 100
// documents of ~60 words) into its 100 engine prompts on Qwen 3's tokenizer, through
// a RoBERTa-style pair template and joined as one text (an LLM reranker). Reported per
// document (ns/pair).
func BenchmarkRerankPrompts(b *testing.B) {
	root := os.Getenv("SWITCHYARD_MODELS")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "switchyard", "models")
	}
	text, _, err := LoadText(filepath.Join(root, "qwen3"), "", "")
	if err != nil {
		b.Skipf("qwen3: %v", err)
	}
	query := "What is the capital of France, and how long has it been the capital?"
	docs := make([]string, 100)
	for i := range docs {
		docs[i] = strings.Repeat("The capital of France is Paris, on the Seine; it has been the capital for centuries. ", 4) + string(rune('a'+i%26))
	}
	for _, c := range []struct{ name, config string }{{"pair", ""}, {"joined", `{"use_sep_token": false}`}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			if c.config != "" {
				_ = os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.config), 0o644)
			}
			t := *text
			t.Root = dir
			a := &API{text: &t, now: time.Now, contextLen: func(int) int64 { return 8192 }}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				plan := &scorePlan{kind: scoreKind{cross: true, task: "classify"}}
				if e := a.crossPrompts(context.Background(), plan, []string{query}, docs, &tokParams{maxLen: 8192}, 0, 0); e != nil {
					b.Fatal(e)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(docs)), "ns/pair")
		})
	}
}
