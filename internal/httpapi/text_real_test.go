package httpapi

import (
	"os"
	"path/filepath"
	"testing"
)

// A model directory's tokenizer_config.json changes ids as transformers (what
// vLLM runs) applies it: DeepSeek V3's tokenizer.json adds no BOS, its
// LlamaTokenizerFast config does; Qwen 3's adds none either way.
func TestLoadTextAppliesTokenizerConfig(t *testing.T) {
	root := os.Getenv("SWITCHYARD_MODELS")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".cache", "switchyard", "models")
	}
	for _, tc := range []struct {
		dir   string
		first int64 // the first id of "Hello" with special tokens; -1: no BOS
	}{{"deepseek_v3", 0}, {"qwen3", -1}} {
		txt, _, err := LoadText(filepath.Join(root, tc.dir), "", "")
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s: %v (fetched by .ci/run)", tc.dir, err)
			}
			t.Skipf("%s: %v", tc.dir, err)
		}
		with, without := txt.Tokenizer.Encode("Hello", true), txt.Tokenizer.Encode("Hello", false)
		if tc.first >= 0 && (len(with) != len(without)+1 || with[0] != tc.first) {
			t.Errorf("%s: with special tokens %v, without %v: want BOS %d first", tc.dir, with, without, tc.first)
		}
		if tc.first < 0 && len(with) != len(without) {
			t.Errorf("%s: with special tokens %v, without %v: want no BOS", tc.dir, with, without)
		}
	}
}
