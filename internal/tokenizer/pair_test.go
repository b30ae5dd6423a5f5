package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

type pairCase struct {
	A        string `json:"a"`
	B        string `json:"b"`
	Pair     bool   `json:"pair"`
	Add      bool   `json:"add"`
	Max      int    `json:"max"`
	Strategy string `json:"strategy"`
	Left     bool   `json:"left"`
}

// pairPostProcessors are the pair templates cross-encoders ship, put on qwen3's vocabulary
// (no reranker's tokenizer is fetchable here; the templates are what is under test).
var pairPostProcessors = map[string]any{
	"roberta": map[string]any{"type": "RobertaProcessing", "sep": []any{"<|endoftext|>", 151643},
		"cls": []any{"<|im_start|>", 151644}, "trim_offsets": true, "add_prefix_space": false},
	"bert": map[string]any{"type": "BertProcessing", "sep": []any{"<|endoftext|>", 151643},
		"cls": []any{"<|im_start|>", 151644}},
	// ModernBERT's shape: [CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1, inside a Sequence with ByteLevel.
	"template": map[string]any{"type": "Sequence", "processors": []any{
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		map[string]any{"type": "TemplateProcessing",
			"single": []any{st("<|im_start|>", 0), sq("A", 0), st("<|endoftext|>", 0)},
			"pair":   []any{st("<|im_start|>", 0), sq("A", 0), st("<|endoftext|>", 0), sq("B", 1), st("<|endoftext|>", 1)},
			"special_tokens": map[string]any{
				"<|im_start|>":  map[string]any{"id": "<|im_start|>", "ids": []any{151644}, "tokens": []any{"<|im_start|>"}},
				"<|endoftext|>": map[string]any{"id": "<|endoftext|>", "ids": []any{151643}, "tokens": []any{"<|endoftext|>"}},
			}},
	}},
	"none": nil,
}

func init() {
	seq := pairPostProcessors["template"].(map[string]any)["processors"].([]any)
	pairPostProcessors["template_bare"] = seq[1]
	pairPostProcessors["bert_in_sequence"] = map[string]any{"type": "Sequence", "processors": []any{pairPostProcessors["bert"]}}
}

func st(id string, ty int) any {
	return map[string]any{"SpecialToken": map[string]any{"id": id, "type_id": ty}}
}
func sq(id string, ty int) any {
	return map[string]any{"Sequence": map[string]any{"id": id, "type_id": ty}}
}

func pairCases() []pairCase {
	texts := []string{
		"What is the capital of France?",
		"The capital of France is Paris. It has been the capital since the 10th century, more or less.",
		"",
		"x",
		"Grüße aus Köln 🚀 — 東京は首都です。",
	}
	var cs []pairCase
	for _, add := range []bool{true, false} {
		for i, a := range texts {
			for j, b := range texts {
				cs = append(cs, pairCase{A: a, B: b, Pair: true, Add: add})
				for _, m := range []int{4, 5, 6, 9, 12, 17, 40} {
					for _, s := range []string{"LongestFirst", "OnlyFirst", "OnlySecond"} {
						cs = append(cs, pairCase{A: a, B: b, Pair: true, Add: add, Max: m, Strategy: s, Left: (i+j+m)%2 == 1})
					}
				}
			}
			cs = append(cs, pairCase{A: a, Add: add})
			for _, m := range []int{3, 7, 12} {
				cs = append(cs, pairCase{A: a, Add: add, Max: m, Strategy: "LongestFirst", Left: m == 7})
			}
		}
	}
	return cs
}

var strategies = map[string]TruncationStrategy{"LongestFirst": LongestFirst, "OnlyFirst": OnlyFirst, "OnlySecond": OnlySecond}

// knownDifference: when one text alone has max_length tokens or more, the tokenizers 0.23
// Node binding sometimes splits the room differently from utils/truncation.rs (which
// EncodePair follows: the source of the Rust library transformers runs), so those cases are
// left out. vLLM reaches them only with a truncate_prompt_tokens smaller than the query.
//
// TestEncodePairMatchesReference holds EncodePair and EncodeTruncated to Rust's tokenizers on
// Roberta, Bert and template pair post-processors and none, with every truncation strategy,
// both directions, lengths that cut one text, both or neither.
func TestEncodePairMatchesReference(t *testing.T) {
	node := requireNode(t)
	base := filepath.Join(modelsDir(), "qwen3", "tokenizer.json")
	raw, err := os.ReadFile(base)
	if err != nil {
		missing(t, base)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	cases := pairCases()
	casesJSON, _ := json.Marshal(cases)
	dir := t.TempDir()
	casesPath := filepath.Join(dir, "cases.json")
	if err := os.WriteFile(casesPath, casesJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, pp := range pairPostProcessors {
		t.Run(name, func(t *testing.T) {
			doc["post_processor"] = pp
			tj, _ := json.Marshal(doc)
			path := filepath.Join(dir, name+".json")
			if err := os.WriteFile(path, tj, 0o644); err != nil {
				t.Fatal(err)
			}
			tk, err := Load(tj)
			if err != nil {
				t.Fatal(err)
			}
			cmd := testwait.Command(t, 5*time.Minute, node, "testdata/pair_reference.mjs", path, casesPath)
			cmd.Env = append(os.Environ(), "SWITCHYARD_TOKENIZERS_MODULE="+tokenizersModule())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("reference: %v\n%s", err, stderr.String())
			}
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<20)
			i, bad, skipped := 0, 0, 0
			for ; sc.Scan(); i++ {
				var want struct {
					IDs     []int64 `json:"ids"`
					TypeIDs []uint8 `json:"type_ids"`
					Error   string  `json:"error"`
				}
				if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
					t.Fatal(err)
				}
				c := cases[i]
				if c.Max > 0 && (len(tk.Encode(c.A, false)) >= c.Max || len(tk.Encode(c.B, false)) >= c.Max) {
					skipped++ // see knownDifference
					continue
				}
				tr := Truncation{MaxLength: c.Max, Strategy: strategies[c.Strategy], Left: c.Left}
				var ids []int64
				var types []uint8
				if c.Pair {
					ids, types, err = tk.EncodePair(c.A, c.B, c.Add, tr)
				} else {
					ids, err = tk.EncodeTruncated(c.A, c.Add, tr)
					types = want.TypeIDs // single-text type ids are all 0 and not returned
				}
				got := fmt.Sprint(ids, types, err != nil)
				exp := fmt.Sprint(want.IDs, want.TypeIDs, want.Error != "")
				if want.Error != "" {
					got, exp = fmt.Sprint(err != nil), "true"
				}
				if got != exp && bad < 10 {
					bad++
					t.Errorf("case %d %+v:\n got %s (err %v)\nwant %s %s", i, c, got, err, exp, want.Error)
				}
			}
			if i != len(cases) {
				t.Fatalf("reference printed %d results for %d cases", i, len(cases))
			}
			t.Logf("%d cases compared, %d left out (a text alone reaches max_length)", i-skipped, skipped)
		})
	}
}

func TestNumSpecialTokensToAdd(t *testing.T) {
	for _, c := range []struct {
		pp           any
		single, pair int
	}{
		{pairPostProcessors["roberta"], 2, 4},
		{pairPostProcessors["bert"], 2, 3},
		{pairPostProcessors["template"], 2, 3},
		{nil, 0, 0},
	} {
		tk := pairTestTokenizer(t, c.pp)
		if s, p := tk.NumSpecialTokensToAdd(false), tk.NumSpecialTokensToAdd(true); s != c.single || p != c.pair {
			t.Errorf("%v: got %d/%d, want %d/%d", c.pp, s, p, c.single, c.pair)
		}
	}
}

// TestLlamaClassPairTemplate: the Llama/Gemma classes' rebuilt post-processor joins a pair as
// transformers' update_post_processor does: bos A bos(type 1) B.
func TestLlamaClassPairTemplate(t *testing.T) {
	var doc map[string]any
	tiny(t, func(m map[string]any) { doc = m })
	tj, _ := json.Marshal(doc)
	tk, err := LoadWithConfig(tj, []byte(`{"tokenizer_class":"LlamaTokenizerFast","bos_token":"<s>"}`))
	if err != nil {
		t.Fatal(err)
	}
	bos, _ := tk.TokenToID("<s>")
	ids, types, err := tk.EncodePair("ab", "ba", true, Truncation{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := tk.Encode("ab", false), tk.Encode("ba", false)
	want := slices.Concat([]int64{bos}, a, []int64{bos}, b)
	if !slices.Equal(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	for i, ty := range types {
		if exp := uint8(0); i > len(a) {
			exp = 1
			if ty != exp {
				t.Fatalf("type ids %v", types)
			}
		} else if ty != exp {
			t.Fatalf("type ids %v", types)
		}
	}
}

func pairTestTokenizer(t *testing.T, pp any) *Tokenizer {
	t.Helper()
	return tiny(t, func(m map[string]any) { m["post_processor"] = pp })
}
