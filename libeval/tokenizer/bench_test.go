package tokenizer

import (
	"path/filepath"
	"strings"
	"testing"

	ours "github.com/switchyard-llm/switchyard/internal/tokenizer"
)

// english is the paragraph tokenizer's BenchmarkEncodeEnglish repeats, 20
// times here (sugarme is slow enough that 200 would dominate the run).
var english = strings.Repeat("The committee met on Tuesday to discuss the budget for next year. "+
	"Several members argued that spending on infrastructure should increase, while others "+
	"wanted to reduce taxes. After three hours of debate, they agreed to postpone the vote "+
	"until more data was available from the finance department, which promised a report by "+
	"the end of the month. ", 20)

// BenchmarkEncodeEnglish encodes the same text with ours and with sugarme,
// for the models sugarme loads (its ids differ from ours on some texts).
func BenchmarkEncodeEnglish(b *testing.B) {
	for _, m := range []string{"llama2", "gemma3"} {
		path := filepath.Join(modelsDir(), m, "tokenizer.json")
		mine, err := ours.LoadFile(path)
		if err != nil {
			b.Skipf("%s: %v", m, err)
		}
		b.Run("ours/"+m, func(b *testing.B) {
			b.SetBytes(int64(len(english)))
			b.ReportAllocs()
			for b.Loop() {
				mine.Encode(english, false)
			}
		})
		tk, err := sugarLoad(path)
		if err != nil {
			b.Fatalf("sugarme %s: %v", m, err)
		}
		b.Run("sugarme/"+m, func(b *testing.B) {
			b.SetBytes(int64(len(english)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tk.EncodeSingle(english, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
