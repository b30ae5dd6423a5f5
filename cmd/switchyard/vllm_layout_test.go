package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// The script `switchyard vllm-layout-script` prints, run against each release's
// classes (stand-ins built from the golden fixtures: vLLM and msgspec cannot be
// installed here), writes a layout file that loads, places the release's engines by
// their version and speaks the release's wire layout: its output decodes the
// release's golden messages.
func TestVLLMLayoutScript(t *testing.T) {
	py := pytest.Find(t, "msgpack")
	var out bytes.Buffer
	app := rootCommand()
	app.Writer = &out
	if err := app.Run(t.Context(), []string{"switchyard", "vllm-layout-script"}); err != nil {
		t.Fatal(err)
	}
	if out.String() != vllmLayoutScript {
		t.Fatal("vllm-layout-script did not print the script")
	}
	script := filepath.Join(t.TempDir(), "vllm_layout.py")
	if err := os.WriteFile(script, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"v0.11": "v0.11-2025-10", "v0.12": "v0.12-2025-12", "v0.15": "v0.15-2026-01",
		"v0.18": "v0.18-2026-03", "v0.21": "v0.21-52a31cc", "newest": "newest-48c3294",
	}
	for _, b := range wire.BuiltinLayouts() {
		t.Run(b.Name, func(t *testing.T) {
			fixture := filepath.Join("..", "..", "wire", "testdata", "vllm-versions", files[b.Name]+".json")
			stub := t.TempDir()
			version := "0.33.1"
			gen := testwait.Command(t, testwait.Deadline, py, "testdata/fake_vllm.py", fixture, filepath.Join("..", "..", "wire", "layouts", b.Name+".json"), stub, version)
			if msg, err := gen.CombinedOutput(); err != nil {
				t.Fatalf("fake_vllm.py: %v\n%s", err, msg)
			}
			cmd := testwait.Command(t, testwait.Deadline, py, script)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+stub)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			data, err := cmd.Output()
			if err != nil {
				t.Fatalf("vllm_layout.py: %v\n%s", err, stderr.String())
			}
			path := filepath.Join(t.TempDir(), "layout.json")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			l, isFile, err := loadLayout(path)
			if err != nil || !isFile {
				t.Fatalf("loading the generated file: %v\n%s", err, data)
			}
			// A release that registers with a map is placed by the version it
			// reports (its minor release); one whose engines register with an
			// empty frame report none, and its file serves every such engine.
			wantRange := ">=0.33.0,<0.34.0"
			if b.RegistrationEmpty {
				wantRange = "(reports no version)"
			}
			if l.Name != "vllm-"+version || l.VLLMVersion != version || l.Versions.String() != wantRange {
				t.Errorf("name %q version %q range %v, want %s", l.Name, l.VLLMVersion, l.Versions, wantRange)
			}
			same := func(what string, got, want []wire.Field) {
				if !slices.EqualFunc(got, want, func(a, b wire.Field) bool { return a.Name == b.Name }) {
					t.Errorf("%s: got %v, want %v", what, names(got), names(want))
				}
			}
			same("EngineCoreRequest", l.Request, b.Request)
			same("EngineCoreOutput", l.Output, b.Output)
			if l.RequestRequired != b.RequestRequired || l.RegistrationEmpty != b.RegistrationEmpty ||
				!slices.Equal(l.Registration, b.Registration) || l.FinishReasons != b.FinishReasons ||
				!slices.Equal(l.ProbeHas, b.ProbeHas) || l.EOSInRequest() != b.EOSInRequest() {
				t.Errorf("generated %+v\nbuilt-in %+v", l, b)
			}
			// It speaks the release's wire: the golden outputs decode and re-encode
			// to msgspec's bytes.
			checkGoldenOutputs(t, l, fixture, b.Native)
		})
	}
}

func names(fs []wire.Field) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// checkGoldenOutputs: newest's fixture has v0.21's PrefillStats (its README says
// so), which the newest classes write with one more key: that message is left out.
func checkGoldenOutputs(t *testing.T, l *wire.Layout, fixture string, newest bool) {
	t.Helper()
	doc, err := readFixture(fixture)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range doc {
		if !strings.HasPrefix(f.name, "outputs_") || f.name == "outputs_logprobs_multipart" || f.name == "outputs_events_prefill_kv" && newest {
			continue
		}
		d := wire.OutputsDecoder{Layout: l}
		var o wire.EngineCoreOutputs
		if err := d.Decode(f.frames, &o); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if err := d.CheckLayout(); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		body, _, err := l.AppendOutputs(nil, &o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, f.frames[0]) {
			t.Errorf("%s: re-encoded %x, msgspec %x", f.name, body, f.frames[0])
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no outputs fixtures in %s", fixture)
	}
}

type goldenMsg struct {
	name   string
	frames [][]byte
}

func readFixture(path string) ([]goldenMsg, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Fixtures []struct {
			Name      string   `json:"name"`
			FramesHex []string `json:"frames_hex"`
		} `json:"fixtures"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var out []goldenMsg
	for _, f := range doc.Fixtures {
		m := goldenMsg{name: f.Name}
		for _, h := range f.FramesHex {
			b, err := hex.DecodeString(h)
			if err != nil {
				return nil, err
			}
			m.frames = append(m.frames, b)
		}
		out = append(out, m)
	}
	return out, nil
}
