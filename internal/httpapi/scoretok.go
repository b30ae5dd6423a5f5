package httpapi

// What /score, /rerank and /classify need to know of the model beyond the
// engines' tasks (config.json's labels, the tokenizer class's token type ids and
// truncation side) and how they tokenize: vLLM's TokenizeParams for pooling
// (truncate_prompt_tokens, truncation_side, max_model_len + 1 as the default cut)
// applied through the tokenizer's own truncation, so special tokens survive it, and
// text pairs through the tokenizer's pair template, as transformers'
// tokenizer(text=query, text_pair=document) does for a cross-encoder.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/switchyard-llm/switchyard/internal/tokenizer"
)

// pairTokenizer is a tokenizer that encodes text pairs and truncates as the Rust
// library does (*tokenizer.Tokenizer through hfTokenizer).
type pairTokenizer interface {
	EncodePair(a, b string, addSpecial bool, tr tokenizer.Truncation) ([]int64, []uint8, error)
	EncodeTruncated(text string, addSpecial bool, tr tokenizer.Truncation) ([]int64, error)
	NumSpecialTokensToAdd(pair bool) int
	TokenID(tok string) (int64, bool)
}

func (h *hfTokenizer) EncodePair(a, b string, addSpecial bool, tr tokenizer.Truncation) ([]int64, []uint8, error) {
	return h.t.EncodePair(a, b, addSpecial, tr)
}
func (h *hfTokenizer) EncodeTruncated(s string, addSpecial bool, tr tokenizer.Truncation) ([]int64, error) {
	return h.t.EncodeTruncated(s, addSpecial, tr)
}
func (h *hfTokenizer) NumSpecialTokensToAdd(pair bool) int { return h.t.NumSpecialTokensToAdd(pair) }
func (h *hfTokenizer) TokenID(tok string) (int64, bool)    { return h.t.TokenToID(tok) }

// poolModel is what the model directory says that the pooling answers depend on.
type poolModel struct {
	known     bool // config.json was read
	numLabels int  // transformers' num_labels: len(id2label), else num_labels, else 2
	id2label  map[int]string
	arch      string
	// typeIDs: the tokenizer class returns token_type_ids (transformers'
	// model_input_names), so vLLM sends a pair's type ids to the engine.
	typeIDs   bool
	truncLeft bool // tokenizer_config.json truncation_side "left"
	// sepToken: pairs go through the tokenizer's pair template (config.json's
	// use_sep_token, default true); false joins query and document as one text.
	sepToken bool
	padID    int64 // the pad token's id, -1 without one
}

var poolModels sync.Map // model dir -> *poolModel

// noTypeIDClasses are transformers tokenizer classes whose model_input_names leave
// token_type_ids out; every other class (BERT's, DeBERTa's, PreTrainedTokenizerFast,
// transformers' default) returns them.
var noTypeIDClasses = []string{"Llama", "CodeLlama", "Gemma", "Qwen2", "GPT2", "Roberta", "XLMRoberta",
	"Camembert", "Bloom", "GPTNeoX", "DistilBert", "MPNet", "Bart", "T5", "Mistral", "Cohere", "Whisper", "Nllb", "Mbart"}

// poolModelInfo reads (once per directory) the model's config.json and
// tokenizer_config.json; the embedded model and a missing file give transformers'
// defaults (two labels, no type ids).
func (a *API) poolModelInfo() *poolModel {
	root := ""
	if a.text != nil {
		root = a.text.Root
	}
	if v, ok := poolModels.Load(root); ok {
		return v.(*poolModel)
	}
	m := &poolModel{numLabels: 2, padID: -1, sepToken: true}
	if st, err := os.Stat(root); root != "" && err == nil && st.IsDir() {
		m.readConfig(filepath.Join(root, "config.json"))
		m.readTokenizerConfig(filepath.Join(root, "tokenizer_config.json"))
	}
	if a.text != nil {
		if pt, ok := a.text.Tokenizer.(pairTokenizer); ok {
			if p := a.text.SpecialTokens["pad_token"]; p != "" {
				if id, ok := pt.TokenID(p); ok {
					m.padID = id
				}
			}
		}
	}
	v, _ := poolModels.LoadOrStore(root, m)
	return v.(*poolModel)
}

// readSmallJSON reads a config file of at most 4 MiB into v; false when absent or bad.
func readSmallJSON(path string, v any) bool {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 4<<20 {
		return false
	}
	return json.Unmarshal(b, v) == nil
}

func (m *poolModel) readConfig(path string) {
	var cfg struct {
		ID2Label      map[string]string `json:"id2label"`
		NumLabels     *int              `json:"num_labels"`
		Architectures []string          `json:"architectures"`
		UseSepToken   *bool             `json:"use_sep_token"`
		UsePadToken   *bool             `json:"use_pad_token"` // the deprecated name
	}
	if !readSmallJSON(path, &cfg) {
		return
	}
	m.known = true
	switch {
	case cfg.UsePadToken != nil:
		m.sepToken = *cfg.UsePadToken
	case cfg.UseSepToken != nil:
		m.sepToken = *cfg.UseSepToken
	}
	if len(cfg.Architectures) > 0 {
		m.arch = cfg.Architectures[0]
	}
	if len(cfg.ID2Label) > 0 {
		m.id2label = make(map[int]string, len(cfg.ID2Label))
		for k, v := range cfg.ID2Label {
			if i, err := strconv.Atoi(k); err == nil {
				m.id2label[i] = v
			}
		}
		m.numLabels = len(m.id2label)
	} else if cfg.NumLabels != nil {
		m.numLabels = *cfg.NumLabels
	}
}

func (m *poolModel) readTokenizerConfig(path string) {
	var tc struct {
		Class           string   `json:"tokenizer_class"`
		ModelInputNames []string `json:"model_input_names"`
		TruncationSide  string   `json:"truncation_side"`
	}
	if !readSmallJSON(path, &tc) {
		return
	}
	m.truncLeft = tc.TruncationSide == "left"
	if tc.ModelInputNames != nil {
		m.typeIDs = slices.Contains(tc.ModelInputNames, "token_type_ids")
		return
	}
	base := strings.TrimSuffix(strings.TrimSuffix(tc.Class, "Fast"), "Tokenizer")
	m.typeIDs = tc.Class != "" && !slices.Contains(noTypeIDClasses, base)
}

// label is id2label[i], as the answer's label; nil when the config names none.
func (m *poolModel) label(i int) *string {
	if m.id2label != nil {
		if s, ok := m.id2label[i]; ok {
			return &s
		}
		return nil
	}
	if i < m.numLabels { // transformers' default names
		s := "LABEL_" + strconv.Itoa(i)
		return &s
	}
	return nil
}

// tokParams is vLLM's TokenizeParams for a pooling request: the context bound, the
// client's truncate_prompt_tokens and truncation_side.
type tokParams struct {
	maxLen   int64 // max_model_len; 0 = unknown (no cut, no check)
	truncate *int64
	side     string // "", "left", "right"
	tokLeft  bool   // the tokenizer's own truncation_side is left
}

// validate is vLLM's check of truncate_prompt_tokens and truncation_side.
func (p *tokParams) validate() *APIError {
	if s := p.side; s != "" && s != "left" && s != "right" {
		return badRequest("truncation_side", "`truncation_side` must be either 'left' or 'right'.")
	}
	if k := p.truncate; k != nil {
		if *k < -1 {
			return badRequest("truncate_prompt_tokens", "truncate_prompt_tokens must be greater than or equal to -1")
		}
		if p.maxLen > 0 && *k > p.maxLen {
			return badRequest("truncate_prompt_tokens", "truncate_prompt_tokens value is greater than max_model_len. Please request a smaller truncation size.")
		}
	}
	return nil
}

// cut is the tokenizer's truncation for one call (get_encode_kwargs): k tokens
// when truncate_prompt_tokens is k (-1: the context), else max_model_len + 1 so an
// over-long prompt still fails the length check; none when the client named a side
// (vLLM then slices after tokenizing, see after).
func (p *tokParams) cut() tokenizer.Truncation {
	if p.truncate != nil && p.side != "" {
		return tokenizer.Truncation{}
	}
	tr := tokenizer.Truncation{Left: p.tokLeft}
	switch {
	case p.truncate != nil && *p.truncate >= 0:
		tr.MaxLength = int(*p.truncate)
	case p.maxLen > 0:
		tr.MaxLength = int(p.maxLen)
		if p.truncate == nil {
			tr.MaxLength++
		}
	}
	return tr
}

// after applies the slicing and length check vLLM runs on the ids
// (apply_post_tokenization); types, when not nil, is cut alongside.
func (p *tokParams) after(ids []int64, types []uint8) ([]int64, []uint8, *APIError) {
	if k := p.truncate; k != nil {
		n := *k
		if n < 0 {
			n = p.maxLen // -1: the context; unknown (0) leaves the ids alone
		}
		if (*k >= 0 || n > 0) && int64(len(ids)) > n {
			left := p.side == "left" || (p.side == "" && p.tokLeft)
			lo, hi := int64(0), n
			if left {
				lo, hi = int64(len(ids))-n, int64(len(ids))
			}
			ids = ids[lo:hi]
			if types != nil {
				types = types[lo:hi]
			}
		}
	}
	if p.maxLen > 0 && int64(len(ids)) > p.maxLen {
		q := ""
		if int64(len(ids)) == p.maxLen+1 {
			q = "at least "
		}
		return nil, nil, badRequest("input_tokens", "This model's maximum context length is %d tokens. However, you requested 0 output tokens and your prompt contains %s%d input tokens, for a total of %s%d tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
			p.maxLen, q, len(ids), q, len(ids))
	}
	return ids, types, nil
}

// encodeOne tokenizes one text of a pooling request (render_cmpl's path).
func (a *API) encodeOne(param, text string, addSpecial bool, p *tokParams) ([]int64, *APIError) {
	pt, ok := a.pairTok()
	if !ok {
		return nil, errNeedsTokenizer(param)
	}
	if p.truncate == nil {
		if e := a.checkTextLen(param, text); e != nil {
			return nil, e
		}
	}
	ids, err := pt.EncodeTruncated(text, addSpecial, p.cut())
	if err != nil {
		return nil, badRequest(param, "%v", err)
	}
	ids, _, e := p.after(ids, nil)
	if e == nil && len(ids) == 0 {
		e = badRequest(param, "The decoder prompt cannot be empty")
	}
	return ids, e
}

func (a *API) pairTok() (pairTokenizer, bool) {
	if a.text == nil {
		return nil, false
	}
	pt, ok := a.text.Tokenizer.(pairTokenizer)
	return pt, ok
}

// errTypeIDs is vLLM's refusal of type ids that are not zeros then ones.
const errTypeIDs = "Token type ids are expected to be a sequence of zeros followed by a sequence of ones"

// typeSplit is vLLM's compress_token_type_ids: the index of the first type-1 token
// (len when none); false for anything but zeros then ones.
func typeSplit(types []uint8) (int, bool) {
	first := len(types)
	for i, t := range types {
		switch {
		case t > 1, t == 0 && first < i:
			return 0, false
		case t == 1 && first > i:
			first = i
		}
	}
	return first, true
}
