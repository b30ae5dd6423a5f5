package openaijson

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestAppendCompletionMatchesEncodingJSON: the hand-written answer is byte for byte
// what encoding/json writes (json.Marshal for SSE chunks, the Encoder without HTML
// escaping for JSON answers), and anything it cannot write goes to the fallback.
func TestAppendCompletionMatchesEncodingJSON(t *testing.T) {
	str := func(s string) *string { return &s }
	rng := rand.New(rand.NewPCG(1, 2))
	ids := func() []int64 {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []int64{}
		}
		out := make([]int64, rng.IntN(20))
		for i := range out {
			out[i] = rng.Int64N(1<<40) - 1<<20
		}
		return out
	}
	stops := []any{nil, int64(2), int64(-7), "stop here", "<tag>", "quote\"", 3.5}
	finishes := []*string{nil, str("length"), str("stop"), str("abort"), str("a&b")}
	names := []string{"", "cmpl-3f9a", "model/x:1", "é", "a<b", "line\nbreak", "tab\t", "\u2028"}
	for i := range 2000 {
		var chs []Choice
		if rng.IntN(10) > 0 {
			chs = make([]Choice, rng.IntN(3))
		}
		for j := range chs {
			chs[j] = Choice{Index: j, TokenIDs: ids(), FinishReason: finishes[rng.IntN(len(finishes))],
				StopReason: stops[rng.IntN(len(stops))]}
			if rng.IntN(20) == 0 {
				chs[j].Logprobs = map[string]any{"x": 1}
			}
			if rng.IntN(20) == 0 {
				chs[j].Text = names[rng.IntN(len(names))]
			}
		}
		var u *Usage
		if rng.IntN(2) == 0 {
			u = &Usage{PromptTokens: rng.IntN(1000), CompletionTokens: rng.IntN(100), TotalTokens: rng.IntN(1100)}
		}
		id, model := names[rng.IntN(len(names))], names[rng.IntN(len(names))]
		created := rng.Int64N(2e9)
		v := &CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: model, Choices: chs, Usage: u}
		marshaled, _ := json.Marshal(v)
		var enc bytes.Buffer
		e := json.NewEncoder(&enc)
		e.SetEscapeHTML(false)
		_ = e.Encode(v)
		encoded := bytes.TrimSuffix(enc.Bytes(), []byte("\n"))

		got, ok := AppendCompletion([]byte("data: "), id, model, created, chs, u)
		if ok {
			if string(got[6:]) != string(marshaled) || string(got[6:]) != string(encoded) {
				t.Fatalf("case %d:\n got %s\nwant %s\n(no HTML escaping: %s)", i, got[6:], marshaled, encoded)
			}
		} else if string(got) != "data: " {
			t.Fatalf("case %d: a refusal changed dst to %q", i, got)
		}
		if fb := MarshalCompletion(nil, id, model, created, chs, u, true); string(fb) != string(marshaled) {
			t.Fatalf("case %d: fallback %s, want %s", i, fb, marshaled)
		}
		if fb := MarshalCompletion(nil, id, model, created, chs, u, false); string(fb) != string(encoded) {
			t.Fatalf("case %d: fallback without HTML escaping %s, want %s", i, fb, encoded)
		}
	}
}

// BenchmarkSSEChunk is one streamed chunk's JSON: by hand against encoding/json.
func BenchmarkSSEChunk(b *testing.B) {
	fr := "length"
	chs := []Choice{{TokenIDs: []int64{12345}, FinishReason: &fr}}
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			buf, _ = AppendCompletion(buf[:0], "cmpl-0123456789abcdef", "model", 1795984272, chs, nil)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&CompletionResponse{ID: "cmpl-0123456789abcdef", Object: "text_completion", Created: 1795984272,
				Model: "model", Choices: []Choice{chs[0]}})
		}
	})
}
