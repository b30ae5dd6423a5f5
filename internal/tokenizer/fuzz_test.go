package tokenizer

import (
	"encoding/binary"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncodeDecode: no panics; byte-level BPE round-trips any text exactly; DecodeStream's
// chunks concatenate to Decode for every model; arbitrary ids (including invalid ones) decode
// and stream without panicking.
func FuzzEncodeDecode(f *testing.F) {
	var tks []*Tokenizer
	for _, name := range []string{"llama3_1", "llama2", "gptoss"} {
		tks = append(tks, loadModel(f, name))
	}
	for _, s := range hostileCorpus()[:60] {
		f.Add(s)
	}
	f.Add("\xff\xfe<|begin_of_text|>\xe2\x82 ")
	f.Fuzz(func(t *testing.T, s string) {
		valid := string(appendLossy(nil, []byte(s)))
		for i, tk := range tks {
			ids := tk.Encode(s, true)
			full := tk.Decode(ids, false)
			if i != 1 && tk.Decode(tk.Encode(s, false), false) != valid {
				t.Fatalf("model %d: round trip of %q = %q", i, s, tk.Decode(tk.Encode(s, false), false))
			}
			ds := tk.NewDecodeStream(false)
			var cat strings.Builder
			for _, id := range ids {
				cat.WriteString(ds.Step(id))
			}
			if !strings.HasSuffix(full, "\uFFFD") && cat.String() != full {
				t.Fatalf("model %d: stream %q != decode %q", i, cat.String(), full)
			}
			// The fuzz bytes as ids: any int64, mostly near the vocab.
			var raw []int64
			for b := []byte(s); len(b) >= 4; b = b[4:] {
				v := int64(int32(binary.LittleEndian.Uint32(b)))
				raw = append(raw, v%int64(tk.VocabSize()+8))
			}
			out := tk.Decode(raw, true)
			if !utf8.ValidString(out) {
				t.Fatalf("model %d: decode produced invalid UTF-8", i)
			}
			ds = tk.NewDecodeStream(true)
			ds.Prime(raw)
			for _, id := range raw {
				if !utf8.ValidString(ds.Step(id)) {
					t.Fatalf("model %d: stream produced invalid UTF-8", i)
				}
			}
		}
	})
}
