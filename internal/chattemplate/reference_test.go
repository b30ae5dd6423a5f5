package chattemplate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// The differential tests render through testdata/reference.py (Debian's
// python3-jinja2 configured as transformers configures it) and require
// byte-equal output, or an error on both sides.

const pinnedUnix = 1721995200 + 3723 // 2024-07-26 13:02:03 UTC

func pinnedNow() time.Time { return time.Unix(pinnedUnix, 0).UTC() }

// needPython returns the interpreter for the reference, failing under CI when
// it (or its jinja2) is missing and skipping otherwise.
func needPython(t testing.TB) string {
	t.Helper()
	py := os.Getenv("SWITCHYARD_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if err := testwait.Command(t, testwait.Deadline, py, "-c", "import jinja2").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("reference python %s with jinja2 is required under CI: %v", py, err)
		}
		t.Skipf("reference python %s with jinja2 not available: %v", py, err)
	}
	return py
}

type refCase struct {
	Template            string            `json:"template"`
	Messages            json.RawMessage   `json:"messages"`
	Tools               json.RawMessage   `json:"tools,omitempty"`
	Documents           json.RawMessage   `json:"documents,omitempty"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Special             map[string]string `json:"special,omitempty"`
	Kwargs              json.RawMessage   `json:"kwargs,omitempty"`
	Now                 int64             `json:"now"`
	VLLM                bool              `json:"vllm,omitempty"`
}

type refResult struct {
	Format string  `json:"format"`
	Out    *string `json:"out"`
	Error  *string `json:"error"`
}

// referenceTimeout bounds one run of reference.py, which renders a whole batch of
// cases with jinja2.
const referenceTimeout = 2 * time.Minute

func runReference(t testing.TB, cases []refCase) []refResult {
	t.Helper()
	py := needPython(t)
	req, err := json.Marshal(map[string]any{"cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := testwait.Command(t, referenceTimeout, py, filepath.Join("testdata", "reference.py"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive a timed-out test
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference.py: %v\n%s", err, stderr.String())
	}
	var res []refResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("reference.py output: %v", err)
	}
	if len(res) != len(cases) {
		t.Fatalf("reference.py gave %d results for %d cases", len(res), len(cases))
	}
	return res
}

// inputFor decodes a case the way the HTTP layer should: DecodeJSON keeps
// ints and key order as Python's json.loads does.
func inputFor(t testing.TB, c refCase) Input {
	t.Helper()
	in := Input{AddGenerationPrompt: c.AddGenerationPrompt, SpecialTokens: c.Special, Now: pinnedNow}
	msgs, err := DecodeMessages(c.Messages)
	if err != nil {
		t.Fatal(err)
	}
	in.Messages = msgs
	list := func(raw json.RawMessage) []any {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		v, err := DecodeJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		return v.([]any)
	}
	in.Tools, in.Documents = list(c.Tools), list(c.Documents)
	if len(c.Kwargs) > 0 {
		v, err := DecodeJSON(c.Kwargs)
		if err != nil {
			t.Fatal(err)
		}
		in.Kwargs = map[string]any{}
		o := v.(*Object)
		for _, k := range o.Keys() {
			in.Kwargs[k], _ = o.Get(k)
		}
	}
	return in
}

type namedTemplate struct {
	name    string
	src     string
	special map[string]string
}

var handSpecial = map[string]string{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}

// allTemplates returns the real templates found under SWITCHYARD_MODELS and
// the hand-written ones in testdata/templates.
func allTemplates(t testing.TB) []namedTemplate {
	t.Helper()
	var out []namedTemplate
	dir := modelsDir()
	for _, m := range realModels {
		path := filepath.Join(dir, m)
		def, named, special, err := LoadDir(path)
		if err != nil {
			if os.IsNotExist(err) || strings.Contains(err.Error(), "no such file") {
				t.Logf("model %s not fetched under %s; .ci/run fetches it", m, dir)
				continue
			}
			t.Fatalf("LoadDir(%s): %v", path, err)
		}
		if def == nil && len(named) == 0 {
			t.Logf("model %s: tokenizer_config.json has no chat_template", m)
			continue
		}
		if def != nil {
			out = append(out, namedTemplate{m, def.Source(), special})
		}
		for n, tm := range named {
			out = append(out, namedTemplate{m + ":" + n, tm.Source(), special})
		}
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "templates", "*.jinja"))
	// SWITCHYARD_CHAT_TEMPLATES names a folder of more *.jinja templates to
	// check the same way (e.g. a deployment's --chat-template files).
	if extra := os.Getenv("SWITCHYARD_CHAT_TEMPLATES"); extra != "" {
		more, _ := filepath.Glob(filepath.Join(extra, "*.jinja"))
		files = append(files, more...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, namedTemplate{"hand:" + strings.TrimSuffix(filepath.Base(f), ".jinja"), string(b), handSpecial})
	}
	return out
}

var realModels = []string{"llama3_1", "qwen3", "gemma3", "llama2", "deepseek_v3", "gptoss"}

func modelsDir() string {
	if d := os.Getenv("SWITCHYARD_MODELS"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "switchyard", "models")
}

type conversation struct {
	Name      string          `json:"name"`
	Messages  json.RawMessage `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Documents json.RawMessage `json:"documents"`
	Kwargs    json.RawMessage `json:"kwargs"`
}

func loadConversations(t testing.TB) []conversation {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "conversations.json"))
	if err != nil {
		t.Fatal(err)
	}
	var convs []conversation
	if err := json.Unmarshal(b, &convs); err != nil {
		t.Fatal(err)
	}
	return convs
}

func TestDifferentialTemplates(t *testing.T) {
	tmpls := allTemplates(t)
	if os.Getenv("CI") == "true" && len(tmpls) < 6 {
		t.Fatalf("only %d templates found under %s; CI must have the real models fetched", len(tmpls), modelsDir())
	}
	convs := loadConversations(t)
	var cases []refCase
	var labels []string
	for _, tm := range tmpls {
		for _, c := range convs {
			for _, agp := range []bool{false, true} {
				cases = append(cases, refCase{Template: tm.src, Messages: c.Messages, Tools: c.Tools, Documents: c.Documents,
					AddGenerationPrompt: agp, Special: tm.special, Kwargs: c.Kwargs, Now: pinnedUnix})
				labels = append(labels, tm.name+"/"+c.Name+map[bool]string{false: "", true: "/agp"}[agp])
			}
		}
	}
	res := runReference(t, cases)
	parsed := map[string]*Template{}
	for i, c := range cases {
		tpl := parsed[c.Template]
		if tpl == nil {
			var err error
			if tpl, err = Parse(c.Template); err != nil {
				t.Fatalf("%s: Parse: %v", labels[i], err)
			}
			parsed[c.Template] = tpl
		}
		got, err := tpl.Render(inputFor(t, c))
		compareResult(t, labels[i], got, err, res[i])
	}
	t.Logf("%d templates x %d conversations x 2 = %d cases compared", len(tmpls), len(convs), len(cases))
}

func compareResult(t *testing.T, label, got string, err error, want refResult) {
	t.Helper()
	switch {
	case want.Error != nil && err == nil:
		t.Errorf("%s: reference failed (%s) but we rendered %q", label, *want.Error, got)
	case want.Error == nil && err != nil:
		t.Errorf("%s: we failed (%v) but reference rendered %q", label, err, *want.Out)
	case want.Error == nil && got != *want.Out:
		t.Errorf("%s: output differs\n got: %q\nwant: %q", label, got, *want.Out)
	}
}

// TestDifferentialVLLMChain runs the whole path of an OpenAI chat request as
// vLLM serves it: content-format detection, PrepareMessages/PrepareTools,
// then Render, against the reference doing the same in Python.
func TestDifferentialVLLMChain(t *testing.T) {
	tmpls := allTemplates(t)
	convs := loadConversations(t)
	var cases []refCase
	var labels []string
	for _, tm := range tmpls {
		for _, c := range convs {
			cases = append(cases, refCase{Template: tm.src, Messages: c.Messages, Tools: c.Tools, Documents: c.Documents,
				AddGenerationPrompt: true, Special: tm.special, Kwargs: c.Kwargs, Now: pinnedUnix, VLLM: true})
			labels = append(labels, tm.name+"/"+c.Name)
		}
	}
	res := runReference(t, cases)
	for i, c := range cases {
		tpl, err := Parse(c.Template)
		if err != nil {
			t.Fatalf("%s: %v", labels[i], err)
		}
		in := inputFor(t, c)
		if res[i].Error == nil && tpl.ContentFormat() != res[i].Format {
			t.Errorf("%s: ContentFormat %q, vLLM detects %q", labels[i], tpl.ContentFormat(), res[i].Format)
		}
		if in.Messages, err = PrepareMessages(c.Messages, tpl.ContentFormat()); err != nil {
			t.Fatalf("%s: PrepareMessages: %v", labels[i], err)
		}
		if in.Tools, err = PrepareTools(c.Tools); err != nil {
			t.Fatalf("%s: PrepareTools: %v", labels[i], err)
		}
		got, err := tpl.Render(in)
		compareResult(t, labels[i]+"/vllm", got, err, res[i])
	}
}
