package httpapi

// /detokenize decodes as vLLM's does: transformers' tokenizer.decode, which
// after the tokenizer's own decoding applies clean_up_tokenization_spaces when
// tokenizer_config.json sets it (Llama 3.1 does). Generated text is not
// cleaned: vLLM's incremental detokenizer does not apply it either.

import (
	"encoding/json"
	"strings"
)

// cleanUpSpaces reports tokenizer_config.json's clean_up_tokenization_spaces;
// absent (transformers' default now) or unreadable is false.
func cleanUpSpaces(tokenizerConfigJSON []byte) bool {
	var c struct {
		CleanUp bool `json:"clean_up_tokenization_spaces"`
	}
	return json.Unmarshal(tokenizerConfigJSON, &c) == nil && c.CleanUp
}

// detokenizeText is the text of ids as /detokenize answers it.
func (t *Text) detokenizeText(ids []int64) string {
	s := t.Tokenizer.Decode(ids, false)
	if t.CleanUpTokenizationSpaces {
		s = cleanUpTokenization(s)
	}
	return s
}

// cleanUpTokenization is transformers' clean_up_tokenization: the spaces a
// word-level tokenizer put before punctuation and contractions go, one
// replacement after another over the whole text, as its chain of str.replace.
func cleanUpTokenization(s string) string {
	for _, r := range [][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
		{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}
