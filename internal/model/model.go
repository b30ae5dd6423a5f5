// Package model reads what a frontend needs from a Hugging Face model directory (the
// directory a user gives `vllm serve`): the tokenizer file, the tokenizer config, and,
// when present, the generation config and the model config. It derives the values
// vLLM's frontend derives from them (EOS ids, vocabulary size, max model length, the
// chat template, the special tokens a template sees) and does nothing else: no
// tokenization, no download, no network. Everything is a plain value, so the rules
// are table-tested on small directories.
package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Files a model directory may hold.
const (
	TokenizerFile        = "tokenizer.json"
	TokenizerConfigFile  = "tokenizer_config.json"
	GenerationConfigFile = "generation_config.json"
	ConfigFile           = "config.json"
	ChatTemplateFile     = "chat_template.jinja" // newer transformers save the template beside the config
)

// AddedToken is one entry of tokenizer.json's added_tokens.
type AddedToken struct {
	ID      int64
	Content string
	Special bool
}

// Model is what serve knows of the model it fronts.
type Model struct {
	// Dir is the directory read; Name its base name (the default served name).
	Dir, Name string
	// TokenizerJSON is the raw tokenizer.json, for the tokenizer package.
	TokenizerJSON []byte
	// TokenizerConfigJSON is the raw tokenizer_config.json (nil without one): the
	// tokenizer package applies what transformers takes from it that changes ids
	// (add_bos_token/add_eos_token of the Llama and Gemma classes).
	TokenizerConfigJSON []byte
	// VocabSize bounds token ids: config.json's vocab_size, or, without one, the
	// tokenizer's size (its largest id plus one), as vLLM's tokenizer bound.
	VocabSize int64
	// EOSTokenIDs: the tokenizer's eos_token id first (vLLM's primary EOS), then the
	// generation config's further eos_token_id values (int or list), which vLLM's
	// update_from_generation_config adds to stop_token_ids. Empty: none known.
	EOSTokenIDs []int64
	// BOSTokenID is the tokenizer's bos_token id, -1 when it has none.
	BOSTokenID int64
	// SpecialTokens are the tokenizer config's bos_token, eos_token, pad_token and
	// unk_token (a chat template reads them by these names); absent ones are left out.
	SpecialTokens map[string]string
	// AddedTokens are tokenizer.json's added tokens, by id.
	AddedTokens map[int64]AddedToken
	// MaxModelLen is the context length derived from config.json as vLLM derives it
	// (the smallest of the known position keys, times a rope scaling factor); 0 when
	// there is no config.json, and the engines' registered max_model_len rules.
	MaxModelLen int64
	// ChatTemplate is the default chat template source ("" = none): --chat-template,
	// else chat_template.jinja, else tokenizer_config.json's chat_template (a string,
	// or the entry named "default" of a list).
	ChatTemplate string
	// ChatTemplates are the named templates of a list-valued chat_template ("tool_use", ...).
	ChatTemplates map[string]string
	// GenerationDefaults are the sampling defaults of generation_config.json vLLM
	// applies with its default --generation-config auto (temperature, top_p, top_k,
	// min_p, repetition_penalty, max_new_tokens), by vLLM's request field name.
	GenerationDefaults map[string]float64
}

// ErrNoTokenizer is returned for a directory without tokenizer.json.
var ErrNoTokenizer = errors.New("no tokenizer.json")

// Load reads dir. chatTemplate, when not empty, is a template file that overrides the
// directory's (--chat-template). A directory without tokenizer.json is an error that
// says what is missing: nothing is downloaded.
func Load(dir, chatTemplate string) (*Model, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("model directory %s: %w (give the local directory holding tokenizer.json; nothing is downloaded)", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("model directory %s is not a directory (give the local directory holding tokenizer.json; nothing is downloaded)", dir)
	}
	m, err := LoadFS(os.DirFS(abs), filepath.Base(abs), chatTemplate)
	if err != nil {
		return nil, fmt.Errorf("model directory %s: %w", dir, err)
	}
	m.Dir = abs
	return m, nil
}

// LoadFS is Load over a file system (the embedded model); name is the model's name.
func LoadFS(fsys fs.FS, name, chatTemplate string) (*Model, error) {
	m := &Model{Dir: name, Name: name, BOSTokenID: -1, SpecialTokens: map[string]string{}, AddedTokens: map[int64]AddedToken{}}
	var err error
	m.TokenizerJSON, err = fs.ReadFile(fsys, TokenizerFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: switchyard needs the Hugging Face fast tokenizer file (nothing is downloaded)", ErrNoTokenizer)
		}
		return nil, err
	}
	vocab, err := m.readTokenizer()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TokenizerFile, err)
	}
	tcfg, err := readJSON(fsys, TokenizerConfigFile)
	if err != nil {
		return nil, err
	}
	if tcfg != nil {
		if m.TokenizerConfigJSON, err = fs.ReadFile(fsys, TokenizerConfigFile); err != nil {
			return nil, err
		}
	}
	cfg, err := readJSON(fsys, ConfigFile)
	if err != nil {
		return nil, err
	}
	gen, err := readJSON(fsys, GenerationConfigFile)
	if err != nil {
		return nil, err
	}
	m.specialTokens(tcfg, vocab)
	m.VocabSize = vocabSize(cfg, vocab)
	m.eos(tcfg, gen, cfg, vocab)
	m.MaxModelLen = maxModelLen(cfg)
	m.GenerationDefaults = generationDefaults(gen)
	if err := m.chatTemplate(fsys, tcfg, chatTemplate); err != nil {
		return nil, err
	}
	return m, nil
}

// readTokenizer collects the token-to-id map (model vocab and added tokens) the
// other files name tokens by, and the added tokens.
func (m *Model) readTokenizer() (map[string]int64, error) {
	var tj struct {
		AddedTokens []struct {
			ID      int64  `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
	}
	if err := json.Unmarshal(m.TokenizerJSON, &tj); err != nil {
		return nil, err
	}
	vocab := map[string]int64{}
	v := bytes.TrimSpace(tj.Model.Vocab)
	switch {
	case len(v) > 0 && v[0] == '{': // BPE, WordPiece, WordLevel: {token: id}
		if err := json.Unmarshal(v, &vocab); err != nil {
			return nil, fmt.Errorf("model.vocab: %w", err)
		}
	case len(v) > 0 && v[0] == '[': // Unigram: [[piece, score], ...], the id is the index
		var pieces [][2]any
		if err := json.Unmarshal(v, &pieces); err != nil {
			return nil, fmt.Errorf("model.vocab: %w", err)
		}
		for i, p := range pieces {
			if s, ok := p[0].(string); ok {
				vocab[s] = int64(i)
			}
		}
	}
	for _, a := range tj.AddedTokens {
		vocab[a.Content] = a.ID
		m.AddedTokens[a.ID] = AddedToken{ID: a.ID, Content: a.Content, Special: a.Special}
	}
	if len(vocab) == 0 {
		return nil, errors.New("no vocabulary (model.vocab and added_tokens are empty)")
	}
	return vocab, nil
}

// readJSON reads an optional JSON object file; a missing file is nil.
func readJSON(fsys fs.FS, path string) (map[string]any, error) {
	b, err := fs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// tokenName is a tokenizer config token: a string or an AddedToken dict {"content": ...}.
func tokenName(v any) (string, bool) {
	switch t := v.(type) {
	case string:
		return t, true
	case map[string]any:
		s, ok := t["content"].(string)
		return s, ok
	}
	return "", false
}

func (m *Model) specialTokens(tcfg map[string]any, vocab map[string]int64) {
	for _, k := range []string{"bos_token", "eos_token", "pad_token", "unk_token"} {
		if s, ok := tokenName(tcfg[k]); ok {
			m.SpecialTokens[k] = s
		}
	}
	if s, ok := m.SpecialTokens["bos_token"]; ok {
		if id, ok := vocab[s]; ok {
			m.BOSTokenID = id
		}
	}
}

// vocabSize is config.json's vocab_size (or its text_config's, for multimodal
// models), else the tokenizer's largest id plus one.
func vocabSize(cfg map[string]any, vocab map[string]int64) int64 {
	for _, c := range []map[string]any{cfg, textConfig(cfg)} {
		if n, ok := intOf(c["vocab_size"]); ok && n > 0 {
			return n
		}
	}
	var top int64 = -1
	for _, id := range vocab {
		top = max(top, id)
	}
	return top + 1
}

func textConfig(cfg map[string]any) map[string]any {
	tc, _ := cfg["text_config"].(map[string]any)
	return tc
}

// eos derives the EOS ids as vLLM does: the tokenizer's eos_token is the primary
// (sent as _eos_token_id); the generation config's eos_token_id (int or list;
// without generation_config.json, config.json's, as transformers' GenerationConfig
// falls back to the model config) adds the others.
func (m *Model) eos(tcfg, gen, cfg map[string]any, vocab map[string]int64) {
	if s, ok := m.SpecialTokens["eos_token"]; ok {
		if id, ok := vocab[s]; ok {
			m.EOSTokenIDs = append(m.EOSTokenIDs, id)
		}
	}
	src := gen
	if src == nil {
		src = cfg
	}
	var more []int64
	switch v := src["eos_token_id"].(type) {
	case json.Number:
		if n, ok := intOf(v); ok {
			more = append(more, n)
		}
	case []any:
		for _, e := range v {
			if n, ok := intOf(e); ok {
				more = append(more, n)
			}
		}
	}
	for _, id := range more {
		if id >= 0 && !slices.Contains(m.EOSTokenIDs, id) {
			m.EOSTokenIDs = append(m.EOSTokenIDs, id)
		}
	}
}

func intOf(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if i, err := n.Int64(); err == nil {
		return i, true
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
		return 0, false
	}
	return int64(f), true
}

func floatOf(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// positionKeys are the config keys vLLM's _get_and_verify_max_len reads; the
// smallest present wins.
var positionKeys = []string{
	"max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
	"model_max_length", "max_sequence_length", "max_seq_length", "seq_len",
}

// maxModelLen derives the context length from config.json as vLLM does: the
// smallest position key, scaled by rope_scaling's factor unless the scaling type
// already accounts for it (su, longrope, llama3, mrope); yarn scales
// original_max_position_embeddings. 0 = unknown.
func maxModelLen(cfg map[string]any) int64 {
	c := cfg
	if tc := textConfig(cfg); tc != nil {
		c = tc
	}
	if c == nil {
		return 0
	}
	var derived float64 = math.Inf(1)
	for _, k := range positionKeys {
		if f, ok := floatOf(c[k]); ok {
			derived = min(derived, f)
		}
	}
	if math.IsInf(derived, 1) {
		return 0
	}
	rs, _ := c["rope_scaling"].(map[string]any)
	if rs == nil {
		rs, _ = c["rope_parameters"].(map[string]any)
	}
	if rs != nil {
		typ, _ := rs["rope_type"].(string)
		if typ == "" {
			typ, _ = rs["type"].(string)
		}
		switch typ {
		case "su", "longrope", "llama3", "mrope", "default", "":
		default:
			if f, ok := floatOf(rs["factor"]); ok && f > 0 {
				if strings.Contains(typ, "yarn") {
					if o, ok := floatOf(rs["original_max_position_embeddings"]); ok {
						derived = o
					}
				}
				derived *= f
			}
		}
	}
	return int64(derived)
}

// generationDefaults are vLLM's get_diff_sampling_param: the sampling fields of
// generation_config.json, renamed to the request's names.
func generationDefaults(gen map[string]any) map[string]float64 {
	if gen == nil {
		return nil
	}
	out := map[string]float64{}
	for src, dst := range map[string]string{
		"repetition_penalty": "repetition_penalty", "temperature": "temperature", "top_k": "top_k",
		"top_p": "top_p", "min_p": "min_p", "max_new_tokens": "max_tokens",
	} {
		if f, ok := floatOf(gen[src]); ok {
			out[dst] = f
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// chatTemplate picks the default template: the override file, else
// chat_template.jinja, else tokenizer_config.json's chat_template.
func (m *Model) chatTemplate(fsys fs.FS, tcfg map[string]any, override string) error {
	if override != "" {
		b, err := os.ReadFile(override)
		if err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		m.ChatTemplate = string(b)
		return nil
	}
	if b, err := fs.ReadFile(fsys, ChatTemplateFile); err == nil {
		m.ChatTemplate = string(b)
		return nil
	}
	switch t := tcfg["chat_template"].(type) {
	case string:
		m.ChatTemplate = t
	case []any:
		m.ChatTemplates = map[string]string{}
		for _, e := range t {
			em, _ := e.(map[string]any)
			name, _ := em["name"].(string)
			src, _ := em["template"].(string)
			if name == "" {
				continue
			}
			m.ChatTemplates[name] = src
			if name == "default" {
				m.ChatTemplate = src
			}
		}
	}
	return nil
}
