package tokenizer

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	hfapi "github.com/gomlx/go-huggingface/tokenizers/api"
	sugar "github.com/sugarme/tokenizer"
	"github.com/sugarme/tokenizer/pretrained"

	ours "github.com/switchyard-llm/switchyard/internal/tokenizer"
)

// TestSugarme loads each model with github.com/sugarme/tokenizer v0.3.0 and
// counts the texts whose ids (special tokens added) equal ours.
func TestSugarme(t *testing.T) {
	texts := shortCorpus(t)
	for _, m := range models {
		path := filepath.Join(modelsDir(), m, "tokenizer.json")
		mine, err := ours.LoadFile(path)
		if err != nil {
			t.Logf("%s: skipped, ours cannot load %s: %v", m, path, err)
			continue
		}
		tk, err := sugarLoad(path)
		if err != nil {
			t.Logf("sugarme %-11s load failed: %.160v", m, err)
			continue
		}
		agree, panics, firstMiss := 0, 0, ""
		for _, s := range texts {
			got, err := sugarEncode(tk, s)
			if err != nil {
				panics++
			}
			if want := mine.Encode(s, true); err == nil && slices.Equal(got, want) {
				agree++
			} else if firstMiss == "" {
				firstMiss = fmt.Sprintf("%.40q: got %v, ours %v (%v)", s, head(got), head(want), err)
			}
		}
		t.Logf("sugarme %-11s agrees on %d/%d texts, %d encode errors/panics; first miss %s", m, agree, len(texts), panics, firstMiss)
	}
}

// head keeps a failure line short.
func head(ids []int64) []int64 { return ids[:min(len(ids), 8)] }

func sugarLoad(path string) (tk *sugar.Tokenizer, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return pretrained.FromFile(path)
}

func sugarEncode(tk *sugar.Tokenizer, s string) (ids []int64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	en, err := tk.EncodeSingle(s, true)
	if err != nil {
		return nil, err
	}
	for _, id := range en.Ids {
		ids = append(ids, int64(id))
	}
	return ids, nil
}

// TestGoHuggingface records why github.com/gomlx/go-huggingface v0.3.1 is
// not compared: its tokenizers package builds only from a Hub repository
// (it downloads tokenizer_config.json and a SentencePiece tokenizer.model)
// and knows one class; it has no reader for tokenizer.json. The test shows
// which of the local models' classes it would accept at all.
func TestGoHuggingface(t *testing.T) {
	for _, m := range models {
		cfg, err := hfapi.ParseConfigFile(filepath.Join(modelsDir(), m, "tokenizer_config.json"))
		if err != nil {
			t.Logf("go-huggingface %-11s: config: %v", m, err)
			continue
		}
		t.Logf("go-huggingface %-11s: tokenizer_class %q, supported: %v (and only from tokenizer.model)",
			m, cfg.TokenizerClass, cfg.TokenizerClass == "GemmaTokenizer")
	}
}
