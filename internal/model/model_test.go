package model

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// write makes a model directory from name -> content.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny-model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const tinyTokenizer = `{"added_tokens":[{"id":5,"content":"<s>","special":true},{"id":6,"content":"</s>","special":true},{"id":7,"content":"<eot>","special":true}],
"model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"d":3,"e":4}}}`

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		eos      []int64
		vocab    int64
		maxLen   int64
		template string
		bos      int64
	}{
		{name: "tokenizer only", files: map[string]string{TokenizerFile: tinyTokenizer},
			eos: nil, vocab: 8, bos: -1},
		{name: "tokenizer config eos and bos", files: map[string]string{TokenizerFile: tinyTokenizer,
			TokenizerConfigFile: `{"bos_token":"<s>","eos_token":{"content":"</s>"},"chat_template":"{{ messages }}"}`},
			eos: []int64{6}, vocab: 8, template: "{{ messages }}", bos: 5},
		{name: "generation config adds eos ids, primary first, no duplicates", files: map[string]string{TokenizerFile: tinyTokenizer,
			TokenizerConfigFile:  `{"eos_token":"</s>"}`,
			GenerationConfigFile: `{"eos_token_id":[7,6]}`,
			ConfigFile:           `{"vocab_size":32,"max_position_embeddings":4096,"eos_token_id":3}`},
			eos: []int64{6, 7}, vocab: 32, maxLen: 4096, bos: -1},
		{name: "config eos when no generation config; int form", files: map[string]string{TokenizerFile: tinyTokenizer,
			ConfigFile: `{"eos_token_id":7,"max_position_embeddings":8192,"n_positions":2048}`},
			eos: []int64{7}, vocab: 8, maxLen: 2048, bos: -1},
		{name: "rope scaling factor, yarn from original", files: map[string]string{TokenizerFile: tinyTokenizer,
			ConfigFile: `{"max_position_embeddings":131072,"rope_scaling":{"type":"yarn","factor":4,"original_max_position_embeddings":32768}}`},
			vocab: 8, maxLen: 131072, bos: -1},
		{name: "llama3 rope is not scaled again", files: map[string]string{TokenizerFile: tinyTokenizer,
			ConfigFile: `{"max_position_embeddings":131072,"rope_scaling":{"rope_type":"llama3","factor":8}}`},
			vocab: 8, maxLen: 131072, bos: -1},
		{name: "named templates", files: map[string]string{TokenizerFile: tinyTokenizer,
			TokenizerConfigFile: `{"chat_template":[{"name":"default","template":"D"},{"name":"tool_use","template":"T"}]}`},
			vocab: 8, template: "D", bos: -1},
		{name: "chat_template.jinja wins", files: map[string]string{TokenizerFile: tinyTokenizer,
			TokenizerConfigFile: `{"chat_template":"old"}`, ChatTemplateFile: "new"},
			vocab: 8, template: "new", bos: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(write(t, tc.files), "")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.EOSTokenIDs, tc.eos) || m.VocabSize != tc.vocab || m.MaxModelLen != tc.maxLen ||
				m.ChatTemplate != tc.template || m.BOSTokenID != tc.bos || m.Name != "tiny-model" {
				t.Fatalf("got eos %v vocab %d maxlen %d template %q bos %d name %q", m.EOSTokenIDs, m.VocabSize, m.MaxModelLen, m.ChatTemplate, m.BOSTokenID, m.Name)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := write(t, map[string]string{ConfigFile: `{}`})
	if _, err := Load(dir, ""); err == nil || !strings.Contains(err.Error(), "no tokenizer.json") || !strings.Contains(err.Error(), "nothing is downloaded") {
		t.Fatalf("no tokenizer: %v", err)
	}
	if _, err := Load("meta-llama/Llama-3.1-8B-Instruct", ""); err == nil || !strings.Contains(err.Error(), "nothing is downloaded") {
		t.Fatalf("a hub name: %v", err)
	}
	dir = write(t, map[string]string{TokenizerFile: tinyTokenizer})
	tmpl := filepath.Join(t.TempDir(), "t.jinja")
	os.WriteFile(tmpl, []byte("X"), 0o644)
	m, err := Load(dir, tmpl)
	if err != nil || m.ChatTemplate != "X" {
		t.Fatalf("--chat-template: %v %q", err, m.ChatTemplate)
	}
	if _, err := Load(dir, tmpl+".missing"); err == nil || !strings.Contains(err.Error(), "--chat-template") {
		t.Fatalf("missing --chat-template: %v", err)
	}
}

// TestRealModels reads the cached real tokenizer directories when present.
func TestRealModels(t *testing.T) {
	root := os.Getenv("SWITCHYARD_MODELS")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "switchyard", "models")
	}
	for _, tc := range []struct {
		dir   string
		eos   int64
		vocab int64
	}{{"qwen3", 151645, 151669}, {"llama3_1", 128009, 128256}} {
		m, err := Load(filepath.Join(root, tc.dir), "")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: %v (fetched by .ci/run)", tc.dir, err)
			}
			t.Skipf("%s: %v", tc.dir, err)
		}
		if len(m.EOSTokenIDs) == 0 || m.EOSTokenIDs[0] != tc.eos || m.VocabSize != tc.vocab || m.ChatTemplate == "" {
			t.Errorf("%s: eos %v vocab %d template %d bytes", tc.dir, m.EOSTokenIDs, m.VocabSize, len(m.ChatTemplate))
		}
	}
}
