package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// LoadDir loads dir/tokenizer.json and, when present, applies dir/tokenizer_config.json as
// LoadWithConfig does.
func LoadDir(dir string) (*Tokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if os.IsNotExist(err) {
		return Load(tj)
	}
	if err != nil {
		return nil, err
	}
	return LoadWithConfig(tj, cfg)
}

// LoadWithConfig is Load plus the one thing transformers' AutoTokenizer (what vLLM runs) does
// with tokenizer_config.json that changes ids: for the Llama, CodeLlama and Gemma tokenizer
// classes, whose fast __init__ calls update_post_processor, the post-processor becomes
// [bos] A [eos] per add_bos_token (default true) and add_eos_token (default false). DeepSeek
// V3 is such a case: its tokenizer.json adds no BOS, served through transformers it gets one.
// Other classes (Qwen2, PreTrainedTokenizerFast, ...) keep tokenizer.json's post-processor.
func LoadWithConfig(tokenizerJSON, tokenizerConfigJSON []byte) (*Tokenizer, error) {
	t, err := Load(tokenizerJSON)
	if err != nil || len(tokenizerConfigJSON) == 0 {
		return t, err // no tokenizer_config.json: tokenizer.json alone, as transformers
	}
	var c struct {
		Class       string          `json:"tokenizer_class"`
		AddBOSToken *bool           `json:"add_bos_token"`
		AddEOSToken *bool           `json:"add_eos_token"`
		BOSToken    json.RawMessage `json:"bos_token"`
		EOSToken    json.RawMessage `json:"eos_token"`
	}
	if err := json.Unmarshal(tokenizerConfigJSON, &c); err != nil {
		return nil, fmt.Errorf("tokenizer: tokenizer_config.json: %v", err)
	}
	switch c.Class {
	case "LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
		"GemmaTokenizer", "GemmaTokenizerFast":
	default:
		return t, nil
	}
	addBOS := c.AddBOSToken == nil || *c.AddBOSToken
	addEOS := c.AddEOSToken != nil && *c.AddEOSToken
	special := func(raw json.RawMessage, what string) (int64, error) {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(raw, &obj) != nil || obj.Content == "" {
				return 0, fmt.Errorf("tokenizer: add_%s_token = true but %s_token is not set", what, what)
			}
			s = obj.Content
		}
		id, ok := t.TokenToID(s)
		if !ok {
			return 0, fmt.Errorf("tokenizer: %s_token %q is not in the vocab", what, s)
		}
		return id, nil
	}
	t.prefixIDs, t.suffixIDs = nil, nil
	if addBOS {
		id, err := special(c.BOSToken, "bos")
		if err != nil {
			return nil, err
		}
		t.prefixIDs = []int64{id}
	}
	if addEOS {
		id, err := special(c.EOSToken, "eos")
		if err != nil {
			return nil, err
		}
		t.suffixIDs = []int64{id}
	}
	t.post = llamaPost(t.prefixIDs, t.suffixIDs)
	return t, nil
}
