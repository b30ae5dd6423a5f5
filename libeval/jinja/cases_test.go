package jinja

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/chattemplate"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// ctDir is chattemplate's folder: its testdata is read in place.
var ctDir = filepath.Join("..", "..", "chattemplate")

const pinnedUnix = 1721995200 + 3723 // the clock chattemplate's tests pin

var pinned = time.Unix(pinnedUnix, 0).UTC()

var handSpecial = map[string]string{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}

// refCase is one case in reference.py's input shape.
type refCase struct {
	Template            string            `json:"template"`
	Messages            json.RawMessage   `json:"messages"`
	Tools               json.RawMessage   `json:"tools,omitempty"`
	Documents           json.RawMessage   `json:"documents,omitempty"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Special             map[string]string `json:"special,omitempty"`
	Kwargs              json.RawMessage   `json:"kwargs,omitempty"`
	Now                 int64             `json:"now"`
	label               string
}

type refResult struct {
	Out   *string `json:"out"`
	Error *string `json:"error"`
}

type namedTemplate struct {
	name, src string
	special   map[string]string
}

func modelsDir() string {
	if d := os.Getenv("SWITCHYARD_MODELS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "switchyard", "models")
}

// templates returns the fetched models' templates and chattemplate's
// hand-written ones, as chattemplate's TestDifferentialTemplates finds them.
func templates(t *testing.T) []namedTemplate {
	var out []namedTemplate
	for _, m := range []string{"llama3_1", "qwen3", "gemma3", "llama2", "deepseek_v3", "gptoss"} {
		def, named, special, err := chattemplate.LoadDir(filepath.Join(modelsDir(), m))
		if err != nil {
			t.Logf("model %s skipped: %v", m, err)
			continue
		}
		if def != nil {
			out = append(out, namedTemplate{m, def.Source(), special})
		}
		for n, tm := range named {
			out = append(out, namedTemplate{m + ":" + n, tm.Source(), special})
		}
	}
	files, _ := filepath.Glob(filepath.Join(ctDir, "testdata", "templates", "*.jinja"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, namedTemplate{"hand:" + strings.TrimSuffix(filepath.Base(f), ".jinja"), string(b), handSpecial})
	}
	return out
}

type conversation struct {
	Name      string          `json:"name"`
	Messages  json.RawMessage `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Documents json.RawMessage `json:"documents"`
	Kwargs    json.RawMessage `json:"kwargs"`
}

// templateCases is every template x conversation x add_generation_prompt.
func templateCases(t *testing.T) []refCase {
	b, err := os.ReadFile(filepath.Join(ctDir, "testdata", "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var convs []conversation
	if err := json.Unmarshal(b, &convs); err != nil {
		t.Fatal(err)
	}
	var cases []refCase
	for _, tm := range templates(t) {
		for _, c := range convs {
			for _, agp := range []bool{false, true} {
				cases = append(cases, refCase{Template: tm.src, Messages: c.Messages, Tools: c.Tools, Documents: c.Documents,
					AddGenerationPrompt: agp, Special: tm.special, Kwargs: c.Kwargs, Now: pinnedUnix,
					label: tm.name + "/" + c.Name + map[bool]string{false: "", true: "/agp"}[agp]})
			}
		}
	}
	return cases
}

// The context chattemplate's snippet test renders every snippet with.
const snippetKwargs = `{"s": "hello World", "n": 3, "f": 2.5, "big": 12345678901234, "small": 1e-7, "neg": -4,
 "l": [1, 2, 3, 1], "d": {"b": 2, "a": 1, "c": "x"}, "t": [1, "two"],
 "nested": {"z": [1, {"y": null, "x": true}], "a": "é\n", "n": 1.0},
 "objs": [{"name": "al", "age": 30}, {"name": "bo", "age": 0}, {"name": "cy"}]}`

const snippetMessages = `[{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]`

// snippetCases are testdata/snippets.jinja's blocks, except those marked
// expect-refusal (Python prints something no one reproduces).
func snippetCases(t *testing.T) []refCase {
	b, err := os.ReadFile(filepath.Join(ctDir, "testdata", "snippets.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []refCase
	for i, src := range strings.Split(string(b), "\n===\n") {
		if strings.HasPrefix(src, "{# expect-refusal #}") {
			continue
		}
		cases = append(cases, refCase{Template: src, Messages: json.RawMessage(snippetMessages),
			Kwargs: json.RawMessage(snippetKwargs), Special: handSpecial, Now: pinnedUnix, AddGenerationPrompt: true,
			label: fmt.Sprintf("snippet %d", i)})
	}
	return cases
}

// runReference renders cases with jinja2 (python3 with jinja2 is required;
// the test skips without it).
func runReference(t *testing.T, cases []refCase) []refResult {
	py := os.Getenv("SWITCHYARD_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := testwait.Command(t, testwait.Deadline, py, "-c", "import jinja2").Run(); err != nil {
		t.Skipf("python3 with jinja2 not available: %v", err)
	}
	req, err := json.Marshal(map[string]any{"cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := testwait.Command(t, 2*time.Minute, py, filepath.Join(ctDir, "testdata", "reference.py"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference.py: %v\n%s", err, stderr.String())
	}
	var res []refResult
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(cases) {
		t.Fatalf("reference.py gave %d results for %d cases: %v", len(res), len(cases), err)
	}
	return res
}
