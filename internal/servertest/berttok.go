package servertest

import "encoding/json"

// BertPairTokenizerJSON is a tiny character-level tokenizer.json with BERT's pair
// template: [CLS] A [SEP] B [SEP], type ids 0 then 1. Its vocabulary is [CLS],
// [SEP], [UNK], [PAD], then a-z, space, '?' and '.'.
func BertPairTokenizerJSON() []byte {
	vocab := map[string]int{"[CLS]": 0, "[SEP]": 1, "[UNK]": 2, "[PAD]": 3}
	for i, c := range "abcdefghijklmnopqrstuvwxyz ?." {
		vocab[string(c)] = 4 + i
	}
	b, _ := json.Marshal(map[string]any{
		"added_tokens": []any{
			map[string]any{"id": 0, "content": "[CLS]", "special": true},
			map[string]any{"id": 1, "content": "[SEP]", "special": true},
			map[string]any{"id": 3, "content": "[PAD]", "special": true},
		},
		"model":          map[string]any{"type": "BPE", "unk_token": "[UNK]", "vocab": vocab, "merges": []any{}},
		"post_processor": map[string]any{"type": "BertProcessing", "cls": []any{"[CLS]", 0}, "sep": []any{"[SEP]", 1}},
	})
	return b
}
