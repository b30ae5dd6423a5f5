package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMaxTokenBytesTiny(t *testing.T) {
	model := func(k string, v any) func(m map[string]any) {
		return func(m map[string]any) { m["model"].(map[string]any)[k] = v }
	}
	cases := []struct {
		name string
		edit func(m map[string]any)
		want int
	}{
		{"byte fallback: the longest vocab entry, <0xAB>", nil, 6},
		{"fused unk covers any run of chars", model("byte_fallback", false), 0},
		{"unk per char", func(m map[string]any) { model("byte_fallback", false)(m); model("fuse_unk", false)(m) }, 6},
		{"strip deletes text", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Strip"} }, 0},
		{"NFC shrinks", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFC"} }, 24},
		{"replace shrinking 4 to 1", func(m map[string]any) {
			m["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"String": "aaaa"}, "content": "b"}
		}, 24},
		{"lstrip swallows whitespace", func(m map[string]any) {
			m["added_tokens"] = append(m["added_tokens"].([]any), map[string]any{"id": 4, "content": "a", "lstrip": true})
		}, 0},
		{"removed split", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"String": "a"}, "behavior": "Removed"}
		}, 0},
	}
	for _, c := range cases {
		if got := tiny(t, c.edit).MaxTokenBytes(); got != c.want {
			t.Errorf("%s: MaxTokenBytes = %d, want %d", c.name, got, c.want)
		}
	}
	// Text already in the normalizer's form is not shrunk by it.
	nfc := tiny(t, func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFC"} })
	if got := nfc.MaxTokenBytesOf("ab é"); got != 6 {
		t.Errorf("NFC text: MaxTokenBytesOf = %d, want 6", got)
	}
	if got := nfc.MaxTokenBytesOf("e\u0301"); got != 24 {
		t.Errorf("text NFC composes: MaxTokenBytesOf = %d, want 24", got)
	}
	if got := tiny(t, nil).MaxTokenBytesOf("ab"); got != 6 {
		t.Errorf("no form: MaxTokenBytesOf = %d, want 6", got)
	}
}

// TestMaxTokenBytesBoundsRealModels holds the bound to the real tokenizers: no text
// encodes to fewer than ceil(len / MaxTokenBytes) tokens, on the texts most likely to
// break it (long runs one token covers, combining marks NFC composes, added tokens).
func TestMaxTokenBytesBoundsRealModels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{
		strings.Repeat(" ", 1500), strings.Repeat("-", 1500), strings.Repeat("=", 1000), strings.Repeat("\n", 1000),
		strings.Repeat("ι\u0308\u0301", 1000), strings.Repeat("\u1100\u1161\u11a8", 1000), strings.Repeat("<|endoftext|>", 300),
		strings.Repeat("<s>", 300), strings.Repeat("\t", 1000), strings.Repeat("ab", 1000),
	}
	for range 8 {
		var b strings.Builder
		for range 1000 {
			b.WriteRune(rune(rng.IntN(0x3000)))
		}
		texts = append(texts, b.String())
	}
	for _, name := range models {
		tk := loadModel(t, name)
		l := tk.MaxTokenBytes()
		t.Logf("%s: MaxTokenBytes %d, of ASCII text %d", name, l, tk.MaxTokenBytesOf("hello"))
		if l <= 0 {
			t.Errorf("%s: no bound", name)
			continue
		}
		for _, s := range texts {
			lt := tk.MaxTokenBytesOf(s)
			if n := len(tk.Encode(s, false)); n*lt < len(s) || lt > l {
				t.Errorf("%s: %d bytes encode to %d tokens, fewer than %d/%d (MaxTokenBytes %d)", name, len(s), n, len(s), lt, l)
			}
		}
	}
}
