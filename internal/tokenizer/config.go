package tokenizer

import (
	"encoding/json"
	"fmt"
)

// The tokenizer.json schema, as far as this package reads it. Fields a component has but this
// package does not implement make Load fail (see the checks in the builders), so nothing is
// silently approximated.

type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	Model         json.RawMessage  `json:"model"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
}

type addedTokenJSON struct {
	ID         int64  `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int32 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// mergePairs reads merges in either form tokenizers writes: "a b" strings (split at the first
// space, as the Rust deserializer does) or ["a", "b"] pairs.
func (m *modelJSON) mergePairs() ([][2]string, error) {
	if len(m.Merges) == 0 || string(m.Merges) == "null" {
		return nil, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(m.Merges, &pairs); err == nil {
		return pairs, nil
	}
	var strs []string
	if err := json.Unmarshal(m.Merges, &strs); err != nil {
		return nil, fmt.Errorf("tokenizer: BPE merges: %v", err)
	}
	pairs = make([][2]string, len(strs))
	for i, s := range strs {
		j := -1
		for k := 0; k < len(s); k++ {
			if s[k] == ' ' {
				j = k
				break
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("tokenizer: BPE merge %q is not of the form \"a b\"", s)
		}
		pairs[i] = [2]string{s[:j], s[j+1:]}
	}
	return pairs, nil
}

// component is the superset of the fields of every normalizer, pre-tokenizer, post-processor
// and decoder this package supports; "type" says which one it is.
type component struct {
	Type string `json:"type"`

	// Sequence
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`

	// Replace, Split
	Pattern  *patternJSON `json:"pattern"`
	Content  *string      `json:"content"`
	Behavior string       `json:"behavior"`
	Invert   bool         `json:"invert"`

	// Prepend
	Prepend string `json:"prepend"`

	// Strip (normalizer)
	StripLeft  *bool `json:"strip_left"`
	StripRight *bool `json:"strip_right"`
	// Strip (decoder)
	Start *int `json:"start"`
	Stop  *int `json:"stop"`

	// ByteLevel
	AddPrefixSpace *bool `json:"add_prefix_space"`
	TrimOffsets    *bool `json:"trim_offsets"`
	UseRegex       *bool `json:"use_regex"`

	// Digits
	IndividualDigits bool `json:"individual_digits"`

	// Metaspace
	Replacement   string `json:"replacement"`
	PrependScheme string `json:"prepend_scheme"`
	Split         *bool  `json:"split"`

	// TemplateProcessing
	Single        []templateItem                `json:"single"`
	Pair          []templateItem                `json:"pair"`
	SpecialTokens map[string]templateSpecialTok `json:"special_tokens"`

	// RobertaProcessing, BertProcessing
	Sep *[2]json.RawMessage `json:"sep"`
	Cls *[2]json.RawMessage `json:"cls"`
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type templateItem struct {
	SpecialToken *struct {
		ID     string `json:"id"`
		TypeID uint32 `json:"type_id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID     string `json:"id"`
		TypeID uint32 `json:"type_id"`
	} `json:"Sequence"`
}

type templateSpecialTok struct {
	ID  string  `json:"id"`
	IDs []int64 `json:"ids"`
}

func parseComponent(raw json.RawMessage, kind string) (*component, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %v", kind, err)
	}
	return &c, nil
}
