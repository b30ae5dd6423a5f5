package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
)

// englishText is plain English prose (repeated: the word cache is part of what is measured,
// as it is in a server encoding similar prompts all day).
func englishText() string {
	return strings.Repeat("The committee met on Tuesday to discuss the budget for next year. "+
		"Several members argued that spending on infrastructure should increase, while others "+
		"wanted to reduce taxes. After three hours of debate, they agreed to postpone the vote "+
		"until more data was available from the finance department, which promised a report by "+
		"the end of the month. ", 200)
}

func mixedText() string {
	var b strings.Builder
	for _, s := range hostileCorpus()[:60] {
		b.WriteString(s)
	}
	return strings.Repeat(b.String(), 10)
}

func benchEncode(b *testing.B, text string) {
	for _, name := range models {
		b.Run(name, func(b *testing.B) {
			tk := loadModel(b, name)
			dst := tk.AppendEncode(nil, text, false)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				dst = tk.AppendEncode(dst[:0], text, false)
			}
		})
	}
}

func BenchmarkEncodeEnglish(b *testing.B) { benchEncode(b, englishText()) }
func BenchmarkEncodeMixed(b *testing.B)   { benchEncode(b, mixedText()) }

// BenchmarkEncodeReference runs the reference's encode (Rust tokenizers through its Node
// binding, one call at a time) on the same texts in the same run and reports its MB/s, so the
// ratio is measured, not remembered.
func BenchmarkEncodeReference(b *testing.B) {
	node := requireNode(b)
	for _, kind := range []struct {
		name string
		text string
	}{{"English", englishText()}, {"Mixed", mixedText()}} {
		corpus, _ := json.Marshal([]string{kind.text})
		for _, name := range models {
			b.Run(kind.name+"/"+name, func(b *testing.B) {
				out := runReference(b, node, name, corpus, "bench")
				var r struct {
					MBPerS float64 `json:"mb_per_s"`
				}
				if err := json.Unmarshal(out, &r); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
				}
				b.ReportMetric(r.MBPerS, "ref-MB/s")
			})
		}
	}
}

func BenchmarkDecodeStreamStep(b *testing.B) {
	for _, name := range models {
		b.Run(name, func(b *testing.B) {
			tk := loadModel(b, name)
			ids := tk.Encode(mixedText(), false)
			ds := tk.NewDecodeStream(false)
			buf := make([]byte, 0, 256)
			for _, id := range ids[:1000] {
				buf = ds.AppendStep(buf[:0], id)
			}
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				buf = ds.AppendStep(buf[:0], ids[i])
				i++
				if i == len(ids) {
					i = 0
				}
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, name := range models {
		b.Run(name, func(b *testing.B) {
			tk := loadModel(b, name)
			ids := tk.Encode(englishText(), false)
			var scratch, dst []byte
			b.SetBytes(int64(len(englishText())))
			b.ReportAllocs()
			for b.Loop() {
				dst = tk.appendDecode(dst[:0], &scratch, ids, false)
			}
		})
	}
}
