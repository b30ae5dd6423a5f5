package httpapi

// Loading serve's text model from a model directory: the model package reads the
// files, the tokenizer and chattemplate packages compile them, and a thin adapter
// gives the server and the text core the interfaces they use.

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/switchyard-llm/switchyard/internal/chattemplate"
	"github.com/switchyard-llm/switchyard/internal/minitok"
	"github.com/switchyard-llm/switchyard/internal/model"
	"github.com/switchyard-llm/switchyard/internal/textgen"
	"github.com/switchyard-llm/switchyard/internal/tokenizer"
)

// hfTokenizer adapts *tokenizer.Tokenizer to TextTokenizer.
type hfTokenizer struct {
	t     *tokenizer.Tokenizer
	added map[int64]model.AddedToken
}

func (h *hfTokenizer) Encode(s string, addSpecial bool) []int64 { return h.t.Encode(s, addSpecial) }
func (h *hfTokenizer) Decode(ids []int64, skipSpecial bool) string {
	return h.t.Decode(ids, skipSpecial)
}
func (h *hfTokenizer) NewStream(skipSpecial bool) textgen.Stream {
	return h.t.NewDecodeStream(skipSpecial)
}
func (h *hfTokenizer) AddedToken(id int64) (string, bool) {
	a, ok := h.added[id]
	return a.Content, ok
}
func (h *hfTokenizer) HasAddedTokens() bool         { return len(h.added) > 0 }
func (h *hfTokenizer) MaxTokenBytesOf(s string) int { return h.t.MaxTokenBytesOf(s) }
func (h *hfTokenizer) IDToToken(id int64) string {
	s, _ := h.t.IDToToken(id)
	return s
}

// NewTokenizer compiles a tokenizer.json for serve, with its tokenizer_config.json
// (nil: none) applied as transformers applies it, so ids are vLLM's (DeepSeek V3
// gets its BOS); added lists its added tokens.
func NewTokenizer(tokenizerJSON, tokenizerConfigJSON []byte, added map[int64]model.AddedToken) (TextTokenizer, error) {
	t, err := tokenizer.LoadWithConfig(tokenizerJSON, tokenizerConfigJSON)
	if err != nil {
		return nil, err
	}
	return &hfTokenizer{t: t, added: added}, nil
}

// LoadText reads the model directory dir (serve --tokenizer) with an optional
// --chat-template file and served name (empty = the directory's base name). It
// returns the model's files as read, for the EOS ids and vocabulary bounds.
func LoadText(dir, chatTemplate, servedName string) (*Text, *model.Model, error) {
	m, err := model.Load(dir, chatTemplate)
	if err != nil {
		return nil, nil, err
	}
	tok, err := NewTokenizer(m.TokenizerJSON, m.TokenizerConfigJSON, m.AddedTokens)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", filepath.Join(dir, model.TokenizerFile), err)
	}
	t := &Text{Name: servedName, Root: dir, MaxModelLen: m.MaxModelLen, Tokenizer: tok,
		SpecialTokens: m.SpecialTokens, DefaultSampling: m.GenerationDefaults,
		CleanUpTokenizationSpaces: cleanUpSpaces(m.TokenizerConfigJSON),
		Parse:                     func(src string) (ChatTemplate, error) { return chattemplate.Parse(src) }}
	if t.Name == "" {
		t.Name = m.Name
	}
	if chatTemplate != "" {
		tmpl, err := chattemplate.Parse(m.ChatTemplate)
		if err != nil {
			return nil, nil, fmt.Errorf("--chat-template %s: %w", chatTemplate, err)
		}
		t.Template, t.ScoreTemplate = tmpl, tmpl
	} else if _, err := os.Stat(filepath.Join(m.Dir, model.TokenizerConfigFile)); err == nil {
		def, named, special, err := chattemplate.LoadDir(m.Dir)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: chat template: %w", dir, err)
		}
		if def != nil {
			t.Template = def
		}
		t.Templates = make(map[string]ChatTemplate, len(named))
		for k, v := range named {
			t.Templates[k] = v
		}
		if len(special) > 0 {
			t.SpecialTokens = special
		}
	}
	return t, m, nil
}

// LoadEmbeddedText is the tokenizer built into the binary (internal/minitok) for
// the embedded default: text requests get text (and the mock engines, given
// words, answer with sentences), token-id requests are answered as without a
// tokenizer (TokenCompat). name is the served model name.
func LoadEmbeddedText(name string) (*Text, error) {
	m, err := model.LoadFS(minitok.FS, minitok.Name, "")
	if err != nil {
		return nil, err
	}
	tok, err := NewTokenizer(m.TokenizerJSON, m.TokenizerConfigJSON, m.AddedTokens)
	if err != nil {
		return nil, err
	}
	cfg, err := minitok.FS.ReadFile(model.TokenizerConfigFile)
	if err != nil {
		return nil, err
	}
	tmpls, special, err := chattemplate.FromTokenizerConfig(cfg)
	if err != nil {
		return nil, err
	}
	t := &Text{Name: name, Root: minitok.Name, Tokenizer: tok, SpecialTokens: special, EOSTokenIDs: m.EOSTokenIDs,
		TokenCompat: true, Parse: func(src string) (ChatTemplate, error) { return chattemplate.Parse(src) }}
	if d, ok := tmpls["default"]; ok {
		t.Template = d
	}
	return t, nil
}
