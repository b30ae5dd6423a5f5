package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// The differential tests need node, the npm package tokenizers (Hugging Face's Rust tokenizers
// through its Node binding: the library vLLM runs) and the model files that testdata/fetch.sh
// installs. Outside CI they skip when those are missing; with CI=true they fail.

var models = []string{"llama3_1", "qwen3", "gemma3", "llama2", "deepseek_v3", "gptoss"}

func modelsDir() string {
	if d := os.Getenv("SWITCHYARD_MODELS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "switchyard", "models")
}

// tokenizersModule is the installed npm package tokenizers.
func tokenizersModule() string {
	d := os.Getenv("SWITCHYARD_NODE")
	if d == "" {
		home, _ := os.UserHomeDir()
		d = filepath.Join(home, ".cache", "switchyard", "node")
	}
	return filepath.Join(d, "node_modules", "tokenizers")
}

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing (run tokenizer/testdata/fetch.sh)", what)
	}
	t.Skipf("%s is missing (run tokenizer/testdata/fetch.sh)", what)
}

func requireNode(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		missing(t, "node")
	}
	if _, err := os.Stat(filepath.Join(tokenizersModule(), "package.json")); err != nil {
		missing(t, "the npm package tokenizers")
	}
	return node
}

var loaded sync.Map // model name -> *Tokenizer

func loadModel(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if v, ok := loaded.Load(name); ok {
		return v.(*Tokenizer)
	}
	path := filepath.Join(modelsDir(), name, "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		missing(t, path)
	}
	tk, err := LoadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	loaded.Store(name, tk)
	return tk
}

type refResult struct {
	IDs          []int64           `json:"ids"`
	IDsNoSpecial []int64           `json:"ids_nospecial"`
	Decode       string            `json:"decode"`
	DecodeSkip   string            `json:"decode_skip"`
	Prefixes     []string          `json:"prefixes"`
	Stream       []json.RawMessage `json:"stream"`
	StreamSkip   []json.RawMessage `json:"stream_skip"`
	Primed       []json.RawMessage `json:"primed"`
}

// streamChunks runs a DecodeStream (primed with prompt when non-nil) over ids.
func streamChunks(tk *Tokenizer, skip bool, prompt, ids []int64) []string {
	ds := tk.NewDecodeStream(skip)
	if prompt != nil {
		ds.Prime(prompt)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = ds.Step(id)
	}
	return out
}

// compareChunks reports the first chunk that differs from the reference's.
func compareChunks(got []string, want []json.RawMessage) (int, string, string, bool) {
	for j, raw := range want {
		var w string
		if json.Unmarshal(raw, &w) != nil {
			return j, "", string(raw), false // {"invalid_prefix": true}: never expected
		}
		if j >= len(got) || got[j] != w {
			g := ""
			if j < len(got) {
				g = got[j]
			}
			return j, g, w, false
		}
	}
	return 0, "", "", true
}

func runReference(t testing.TB, node, model string, corpus []byte, mode string) []byte {
	t.Helper()
	f := filepath.Join(t.TempDir(), "corpus.json")
	if err := os.WriteFile(f, corpus, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"testdata/reference.mjs", filepath.Join(modelsDir(), model), f}
	if mode != "" {
		args = append(args, mode)
	}
	// One model's reference run takes 10-60 s on a loaded 2-core machine.
	cmd := testwait.Command(t, 5*time.Minute, node, args...)
	cmd.Env = append(os.Environ(), "SWITCHYARD_TOKENIZERS_MODULE="+tokenizersModule())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference %s: %v\n%s", model, err, stderr.String())
	}
	return out
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func TestDifferential(t *testing.T) {
	node := requireNode(t)
	corpus, err := corpusJSON(hostileCorpus())
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	if err := json.Unmarshal(corpus, &texts); err != nil {
		t.Fatal(err)
	}
	for _, name := range models {
		t.Run(name, func(t *testing.T) {
			tk := loadModel(t, name)
			out := runReference(t, node, name, corpus, "")
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 64<<20)
			i := 0
			fails := 0
			for sc.Scan() {
				var ref refResult
				if err := json.Unmarshal(sc.Bytes(), &ref); err != nil {
					t.Fatal(err)
				}
				text := texts[i]
				i++
				fail := func(format string, args ...any) {
					fails++
					if fails <= 15 {
						t.Errorf("text %d %q: "+format, append([]any{i - 1, short(text)}, args...)...)
					}
				}
				got := tk.Encode(text, true)
				if !slices.Equal(got, ref.IDs) {
					fail("ids\n got %v\nwant %v", head(got), head(ref.IDs))
					continue
				}
				if got := tk.Encode(text, false); !slices.Equal(got, ref.IDsNoSpecial) {
					fail("ids without special tokens\n got %v\nwant %v", head(got), head(ref.IDsNoSpecial))
				}
				if got := tk.Decode(ref.IDs, false); got != ref.Decode {
					fail("decode\n got %q\nwant %q", short(got), short(ref.Decode))
				}
				if got := tk.Decode(ref.IDs, true); got != ref.DecodeSkip {
					fail("decode skip special\n got %q\nwant %q", short(got), short(ref.DecodeSkip))
				}
				if len(ref.Prefixes) != min(len(ref.IDs), 64) {
					fail("reference printed %d prefixes for %d ids", len(ref.Prefixes), len(ref.IDs))
				}
				for k, want := range ref.Prefixes {
					if got := tk.Decode(ref.IDs[:k+1], false); got != want {
						fail("decode of the first %d ids\n got %q\nwant %q", k+1, short(got), short(want))
						break
					}
				}
				chunks := streamChunks(tk, false, nil, ref.IDs)
				if j, g, w, ok := compareChunks(chunks, ref.Stream); !ok {
					fail("stream chunk %d: got %q want %q", j, g, w)
				}
				if cat := strings.Join(chunks, ""); cat != ref.Decode && !endsWithFFFD([]byte(ref.Decode)) {
					fail("stream concatenation\n got %q\nwant %q", short(cat), short(ref.Decode))
				}
				n := min(len(ref.IDs), 3000)
				if j, g, w, ok := compareChunks(streamChunks(tk, true, nil, ref.IDs[:n]), ref.StreamSkip); !ok {
					fail("stream (skip special) chunk %d: got %q want %q", j, g, w)
				}
				h := min(len(ref.IDs)/2, 40)
				cont := ref.IDs[h:min(len(ref.IDs), h+200)]
				if j, g, w, ok := compareChunks(streamChunks(tk, true, ref.IDs[:h], cont), ref.Primed); !ok {
					fail("primed stream chunk %d: got %q want %q", j, g, w)
				}
			}
			if i != len(texts) {
				t.Fatalf("reference printed %d results for %d texts", i, len(texts))
			}
		})
	}
}

func head(ids []int64) []int64 {
	if len(ids) > 40 {
		return ids[:40]
	}
	return ids
}
