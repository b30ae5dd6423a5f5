package tokenizer

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// tiny builds a small tokenizer.json: a SentencePiece-style BPE with byte fallback (the
// Llama 2 pipeline) over a handful of tokens, overridable per test.
func tiny(t *testing.T, edit func(m map[string]any)) *Tokenizer {
	t.Helper()
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "a": 4, "b": 5, "▁a": 6, "ab": 7, "▁ab": 8, "c": 9}
	for i := range 256 {
		vocab[strings.ToUpper(strings.Replace(
			"<0x"+string("0123456789abcdef"[i>>4])+string("0123456789abcdef"[i&15])+">", "0X", "0x", 1))] = 10 + i
	}
	// the loop above uppercases "0x" too; put it back
	fixed := map[string]int{}
	for k, v := range vocab {
		fixed[strings.Replace(k, "<0X", "<0x", 1)] = v
	}
	m := map[string]any{
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "<unk>", "special": true},
			map[string]any{"id": 1, "content": "<s>", "special": true},
			map[string]any{"id": 2, "content": "</s>", "special": true},
		},
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"pre_tokenizer": nil,
		"model": map[string]any{"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
			"vocab": fixed, "merges": []any{"a b", "▁ a", "▁a b"}},
		"post_processor": map[string]any{"type": "TemplateProcessing",
			"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
			"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []any{1}, "tokens": []any{"<s>"}}}},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestTinySentencePiece(t *testing.T) {
	tk := tiny(t, nil)
	cases := []struct {
		in   string
		want []int64
	}{
		// "a b" outranks "▁ a", so "▁ab" never forms from ▁, a, b.
		{"ab", []int64{1, 3, 7}},
		{"ab ab", []int64{1, 3, 7, 3, 7}},
		{"a", []int64{1, 6}},
		{"a<s>b", []int64{1, 6, 1, 3, 5}},
		{"é", []int64{1, 3, 10 + 0xC3, 10 + 0xA9}},
	}
	for _, c := range cases {
		if got := tk.Encode(c.in, true); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := tk.Decode([]int64{1, 8, 8, 3, 10 + 0xC3, 10 + 0xA9}, false); got != "<s> ab ab é" {
		t.Errorf("decode = %q", got)
	}
	if got := tk.Decode([]int64{1, 8, 8}, true); got != "ab ab" {
		t.Errorf("decode skip = %q", got)
	}
	// An invalid byte run becomes one U+FFFD per byte (ByteFallback), ids out of range nothing.
	if got := tk.Decode([]int64{4, 10 + 0xC3, 99999, -1, 5}, false); got != "a\uFFFDb" {
		t.Errorf("decode invalid = %q", got)
	}
}

func TestUnkFusedWithoutByteFallback(t *testing.T) {
	tk := tiny(t, func(m map[string]any) { m["model"].(map[string]any)["byte_fallback"] = false })
	if got := tk.Encode("xyz a", false); !slices.Equal(got, []int64{3, 0, 6}) {
		t.Errorf("fused unk: %v", got)
	}
	tk = tiny(t, func(m map[string]any) {
		m["model"].(map[string]any)["byte_fallback"] = false
		m["model"].(map[string]any)["fuse_unk"] = false
	})
	if got := tk.Encode("xyz a", false); !slices.Equal(got, []int64{3, 0, 0, 0, 6}) {
		t.Errorf("unfused unk: %v", got)
	}
}

func TestLoadRefusesByName(t *testing.T) {
	cases := []struct {
		edit func(m map[string]any)
		want string
	}{
		{func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Foo"} }, `pre_tokenizer "Foo" is not supported`},
		{func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Precompiled"} }, `normalizer "Precompiled" is not supported`},
		{func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder "WordPiece" is not supported`},
		{func(m map[string]any) { m["post_processor"] = map[string]any{"type": "Bar"} }, `post_processor "Bar" is not supported`},
		{func(m map[string]any) { m["model"].(map[string]any)["type"] = "Unigram" }, `model "Unigram" is not supported`},
		{func(m map[string]any) { m["model"].(map[string]any)["dropout"] = 0.1 }, `dropout is not supported`},
		{func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"String": "x"}, "behavior": "Sideways"}
		}, `split behavior "Sideways" is not supported`},
	}
	for _, c := range cases {
		m := map[string]any{}
		base := tiny(t, func(mm map[string]any) { m = mm })
		_ = base
		c.edit(m)
		b, _ := json.Marshal(m)
		_, err := Load(b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load: err = %v, want it to contain %q", err, c.want)
		}
	}
}

func TestAppendLossyMaximalSubparts(t *testing.T) {
	cases := []struct{ in, want string }{
		{"abc", "abc"},
		{"\xE2\x82", "\uFFFD"},                 // truncated 3-byte sequence: one replacement
		{"\xE2\x82A", "\uFFFDA"},               //
		{"\x80\x80", "\uFFFD\uFFFD"},           // lone continuation bytes: one each
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED is not followed by A0
		{"\xF0\x9F\x98", "\uFFFD"},             //
		{"\xF0\x9F\x98\x80", "😀"},              //
		{"\xC0\xAF", "\uFFFD\uFFFD"},           // overlong
		{"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
	}
	for _, c := range cases {
		if got := string(appendLossy(nil, []byte(c.in))); got != c.want {
			t.Errorf("appendLossy(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestMetaspaceDecoderDropsEveryReplacementInFirstToken(t *testing.T) {
	tk := tiny(t, func(m map[string]any) {
		m["decoder"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
	})
	// "▁a" then "▁ab": the first token loses its ▁, the second turns it into a space.
	if got := tk.Decode([]int64{6, 8, 3}, false); got != "a ab " {
		t.Errorf("got %q", got)
	}
}

func TestInvalidUTF8EncodesAsReplaced(t *testing.T) {
	tk := loadModel(t, "llama3_1")
	in := "a\xE2\x82b\x80\x80c"
	if got, want := tk.Encode(in, false), tk.Encode("a\uFFFDb\uFFFD\uFFFDc", false); !slices.Equal(got, want) {
		t.Errorf("got %v want %v", got, want)
	}
}

func TestDecodeStreamHoldsIncompleteUTF8(t *testing.T) {
	tk := loadModel(t, "llama3_1")
	ids := tk.Encode("x 😀 y", false)
	ds := tk.NewDecodeStream(false)
	var chunks []string
	for _, id := range ids {
		chunks = append(chunks, ds.Step(id))
	}
	if strings.Join(chunks, "") != "x 😀 y" {
		t.Fatalf("chunks %q", chunks)
	}
	for _, c := range chunks {
		if strings.ContainsRune(c, '\uFFFD') {
			t.Fatalf("a chunk has U+FFFD: %q", chunks)
		}
	}
	ds.Reset()
	if got := ds.Step(ids[0]); got != "x" {
		t.Fatalf("after Reset: %q", got)
	}
}

func TestDecodeStreamPrime(t *testing.T) {
	tk := loadModel(t, "llama2")
	prompt := tk.Encode("Hello there, my friend", true)
	out := tk.Encode("How are you?", false) // "▁How ...": the leading ▁ is the space
	ds := tk.NewDecodeStream(true)
	ds.Prime(prompt)
	var got strings.Builder
	for _, id := range out {
		got.WriteString(ds.Step(id))
	}
	// Primed, the leading space of the continuation survives the Strip decoder.
	if got.String() != " How are you?" {
		t.Fatalf("primed stream = %q", got.String())
	}
}

func TestConcurrentEncode(t *testing.T) {
	tk := loadModel(t, "qwen3")
	texts := hostileCorpus()[:60]
	want := make([][]int64, len(texts))
	for i, s := range texts {
		want[i] = tk.Encode(s, true)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range texts {
				j := (i + g*7) % len(texts)
				if got := tk.Encode(texts[j], true); !slices.Equal(got, want[j]) {
					t.Errorf("text %d differs under concurrency", j)
				}
			}
		}()
	}
	testwait.Wait(t, &wg, "the concurrent encoders")
}

func TestAPI(t *testing.T) {
	tk := loadModel(t, "llama3_1")
	if tk.VocabSize() != 128256 {
		t.Errorf("VocabSize = %d", tk.VocabSize())
	}
	if id, ok := tk.TokenToID("<|begin_of_text|>"); !ok || id != 128000 || !tk.IsSpecial(id) {
		t.Errorf("TokenToID = %d %v", id, ok)
	}
	if tok, ok := tk.IDToToken(9906); !ok || tok != "Hello" {
		t.Errorf("IDToToken = %q %v", tok, ok)
	}
	if _, ok := tk.IDToToken(1 << 40); ok {
		t.Error("IDToToken out of range")
	}
	if tk.IsSpecial(9906) || tk.IsSpecial(-1) {
		t.Error("IsSpecial")
	}
}

func TestAddedTokenStripAndSingleWord(t *testing.T) {
	withAdded := func(tok map[string]any) *Tokenizer {
		return tiny(t, func(m map[string]any) {
			tok["id"], tok["content"] = 300, "<x>"
			m["added_tokens"] = append(m["added_tokens"].([]any), tok)
		})
	}
	// Without strip flags the spaces around the token stay in the neighbouring text.
	tk := withAdded(map[string]any{})
	if got := tk.Encode("ab <x> ab", false); !slices.Equal(got, []int64{3, 7, 3, 300, 3, 3, 7}) {
		t.Errorf("plain: %v", got)
	}
	// lstrip/rstrip: the token swallows the whitespace on its side.
	tk = withAdded(map[string]any{"lstrip": true, "rstrip": true})
	if got := tk.Encode("ab <x> ab", false); !slices.Equal(got, []int64{3, 7, 300, 3, 7}) {
		t.Errorf("strip: %v", got)
	}
	// single_word: not matched inside a word.
	tk = withAdded(map[string]any{"single_word": true})
	if got := tk.Encode("a<x>", false); slices.Contains(got, 300) {
		t.Errorf("single_word matched inside a word: %v", got)
	}
	if got := tk.Encode("a <x> b", false); !slices.Contains(got, 300) {
		t.Errorf("single_word not matched between spaces: %v", got)
	}
	// normalized: matched after the normalizer ran (its pattern normalized too: "▁<x>").
	tk = withAdded(map[string]any{"normalized": true})
	if got := tk.Encode("<x>", false); !slices.Equal(got, []int64{300}) {
		t.Errorf("normalized: %v", got)
	}
}

func TestLoadBounds(t *testing.T) {
	if _, err := LoadFile("/nonexistent/tokenizer.json"); err == nil {
		t.Error("LoadFile of a missing file succeeded")
	}
	m := map[string]any{}
	tiny(t, func(mm map[string]any) { m = mm })
	m["added_tokens"] = []any{map[string]any{"id": 1 << 30, "content": "<big>"}}
	b, _ := json.Marshal(m)
	if _, err := Load(b); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("huge id: %v", err)
	}
	if _, err := Load([]byte("{")); err == nil {
		t.Error("truncated JSON loaded")
	}
}

// LoadDir applies transformers' update_post_processor for the Llama/Gemma classes: DeepSeek
// V3 (LlamaTokenizerFast, add_bos_token true) gains its BOS; the others keep what
// tokenizer.json says, which for Llama 2 and Gemma 3 is already the same BOS.
func TestLoadDirAppliesTransformersPostProcessor(t *testing.T) {
	want := map[string][]int64{"deepseek_v3": {0}, "llama2": {1}, "gemma3": {2}, "qwen3": nil, "llama3_1": {128000}, "gptoss": nil}
	for name, prefix := range want {
		loadModel(t, name) // skips or fails (CI) when the files are missing
		tk, err := LoadDir(filepath.Join(modelsDir(), name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := tk.Encode("hi", true)
		plain := tk.Encode("hi", false)
		if !slices.Equal(got[:len(got)-len(plain)], prefix) || !slices.Equal(got[len(prefix):], plain) {
			t.Errorf("%s: Encode(hi, true) = %v, want prefix %v then %v", name, got, prefix, plain)
		}
	}
}
