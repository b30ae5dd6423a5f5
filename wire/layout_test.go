package wire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// versionDoc is one testdata/vllm-versions file: golden messages made with one vLLM
// release's own classes, and that release's struct fields.
type versionDoc struct {
	Label    string              `json:"label"`
	Layout   map[string][]string `json:"layout"`
	Fixtures []fixture           `json:"fixtures"`
}

// versionFiles maps each built-in layout to its golden file.
var versionFiles = map[string]string{
	"v0.11": "v0.11-2025-10", "v0.12": "v0.12-2025-12", "v0.15": "v0.15-2026-01",
	"v0.18": "v0.18-2026-03", "v0.21": "v0.21-52a31cc", "newest": "newest-48c3294",
}

func loadVersionFixtures(t testing.TB, layout string) versionDoc {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "vllm-versions", versionFiles[layout]+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc versionDoc
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	for i := range doc.Fixtures {
		f := &doc.Fixtures[i]
		for _, h := range f.FramesHex {
			b, err := hex.DecodeString(h)
			if err != nil {
				t.Fatal(err)
			}
			f.frames = append(f.frames, b)
		}
	}
	return doc
}

// TestBuiltinLayoutsMatchFixtures: every built-in layout lists exactly the fields its
// release's own classes have.
func TestBuiltinLayoutsMatchFixtures(t *testing.T) {
	for _, l := range BuiltinLayouts() {
		doc := loadVersionFixtures(t, l.Name)
		names := func(fs []Field) []string {
			var out []string
			for _, f := range fs {
				out = append(out, f.Name)
			}
			return out
		}
		if d := cmp.Diff(doc.Layout["EngineCoreRequest"], names(l.Request)); d != "" {
			t.Errorf("%s EngineCoreRequest (-fixture +layout):\n%s", l.Name, d)
		}
		if d := cmp.Diff(doc.Layout["EngineCoreOutput"], names(l.Output)); d != "" {
			t.Errorf("%s EngineCoreOutput (-fixture +layout):\n%s", l.Name, d)
		}
		for _, k := range doc.Layout["SamplingParams"] {
			if !l.KnowsSampling(k) {
				t.Errorf("%s: SamplingParams key %q missing", l.Name, k)
			}
		}
	}
}

// TestVersionFixtures: for every layout, each golden message decodes with that
// layout, and what we encode for the decoded content is msgspec's bytes (or, for the
// short ADD forms, the same value with the defaults filled in).
func TestVersionFixtures(t *testing.T) {
	for _, l := range BuiltinLayouts() {
		doc := loadVersionFixtures(t, l.Name)
		for _, f := range doc.Fixtures {
			t.Run(l.Name+"/"+f.Name, func(t *testing.T) { checkVersionFixture(t, l, f) })
		}
	}
}

func checkVersionFixture(t *testing.T, l *Layout, f fixture) {
	fr := f.frames
	switch {
	case strings.HasPrefix(f.Name, "add_"):
		mustType(t, fr, RequestAdd)
		var q EngineCoreRequest
		if err := l.DecodeAdd(fr[1:], &q); err != nil {
			t.Fatal(err)
		}
		body, _, err := l.AppendAdd(nil, &q)
		if err != nil {
			t.Fatal(err)
		}
		if v := f.Value.([]any); len(v) == len(l.Request) {
			if d := cmp.Diff(hex.EncodeToString(fr[1]), hex.EncodeToString(body)); d != "" {
				t.Errorf("re-encoding differs from msgspec's bytes (-msgspec +ours):\n%s", d)
			}
		}
		var again EngineCoreRequest
		if err := l.DecodeAdd([][]byte{body}, &again); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(q, again, fuzzOpts); d != "" {
			t.Errorf("round trip changed the request:\n%s", d)
		}
		if l.EOSInRequest() && q.Sampling != nil && q.Sampling.EOSTokenID.Valid {
			// The old place of the EOS id must reach our typed value.
			if v := f.Value.([]any); fromJSON(v[5]) != "int:"+itoa(int(q.Sampling.EOSTokenID.Value)) {
				t.Errorf("eos_token_id %v decoded as %v", v[5], q.Sampling.EOSTokenID)
			}
		}
	case strings.HasPrefix(f.Name, "outputs_"):
		d := OutputsDecoder{Layout: l}
		var o EngineCoreOutputs
		if err := d.Decode(fr, &o); err != nil {
			t.Fatal(err)
		}
		body, aux, err := l.AppendOutputs(nil, &o)
		if err != nil {
			t.Fatal(err)
		}
		got := append([][]byte{body}, aux...)
		// newest-*.json's stats classes are v0.21's (its README says so): its
		// PrefillStats lacks the num_cache_creation_tokens the native layout writes.
		if auxDiffers[f.Name] || l.Native && f.Name == "outputs_events_prefill_kv" {
			var again EngineCoreOutputs
			if err := (&OutputsDecoder{Layout: l}).Decode(got, &again); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(o, again, cmpopts.IgnoreFields(Tensor{}, "AuxIndex")); d != "" {
				t.Errorf("decoded re-encoding differs:\n%s", d)
			}
			return
		}
		if d := cmp.Diff(hexAll(fr), hexAll(got)); d != "" {
			t.Errorf("re-encoding differs from msgspec's bytes (-msgspec +ours):\n%s", d)
		}
	case f.Name == "ready_dp":
		h, err := DecodeHandshakeStatus(fr[0])
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendReady(nil, l, &h); !bytes.Equal(got, fr[0]) {
			t.Errorf("READY: ours %x, msgspec %x", got, fr[0])
		}
	case strings.HasPrefix(f.Name, "registration"):
		rr, err := DecodeReadyResponse(fr[0])
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendRegistration(nil, l, &rr); !bytes.Equal(got, fr[0]) {
			t.Errorf("registration: ours %x, msgspec %x", got, fr[0])
		}
	default:
		// Every other message is the same in all layouts: the native golden test's
		// codecs must take it as it is.
		got := reencode(t, f)
		if v, ok := f.Value.(map[string]any); ok && strings.HasPrefix(f.Name, "init") && hasKey(v, "parallel_config_hash") {
			// v0.12's EngineHandshakeMetadata had parallel_config_hash (default
			// None); the engine decodes INIT into the dataclass, so leaving it out
			// is the same message to it.
			return
		}
		if d := cmp.Diff(hexAll(fr), hexAll(got)); d != "" {
			t.Errorf("re-encoding differs (-msgspec +ours):\n%s", d)
		}
	}
}

// TestNativeDecoderRefusesV021: the bug this work fixes: an engine of the v0.21
// layout sends outputs the native decoder cannot read; its own layout reads them.
func TestNativeDecoderRefusesV021(t *testing.T) {
	doc := loadVersionFixtures(t, "v0.21")
	for _, f := range doc.Fixtures {
		if f.Name != "outputs_events_prefill_kv" {
			continue
		}
		var o EngineCoreOutputs
		err := DecodeOutputs(f.frames, &o)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("native decode of a v0.21 output: got %v, want a DecodeError", err)
		}
		d := OutputsDecoder{Layout: BuiltinLayout("v0.21")}
		if err := d.Decode(f.frames, &o); err != nil {
			t.Fatal(err)
		}
		if p := o.Outputs[0].PrefillStats; p == nil || p.NumCachedTokens != 16 {
			t.Fatalf("prefill_stats: %+v", p)
		}
		return
	}
	t.Fatal("fixture missing")
}

// TestOldLayoutCachedTokens: up to v0.18 cached tokens are a plain int at index 10.
func TestOldLayoutCachedTokens(t *testing.T) {
	for _, name := range []string{"v0.11", "v0.15", "v0.18"} {
		for _, f := range loadVersionFixtures(t, name).Fixtures {
			if f.Name != "outputs_events_prefill_kv" {
				continue
			}
			d := OutputsDecoder{Layout: BuiltinLayout(name)}
			var o EngineCoreOutputs
			if err := d.Decode(f.frames, &o); err != nil {
				t.Fatal(err)
			}
			if got := o.Outputs[0].NumCachedTokens; got != 16 {
				t.Errorf("%s: num_cached_tokens %d, want 16", name, got)
			}
		}
	}
}

// TestLayoutRefusesWhatItCannotCarry: a request using something an older release has
// no place for is refused before anything is sent, naming the field.
func TestLayoutRefusesWhatItCannotCarry(t *testing.T) {
	v011 := BuiltinLayout("v0.11")
	tests := []struct {
		name  string
		edit  func(*EngineCoreRequest)
		field string
	}{
		{"flat_logprobs", func(r *EngineCoreRequest) { r.Sampling.FlatLogprobs = true }, "sampling_params.flat_logprobs"},
		{"thinking budget", func(r *EngineCoreRequest) { r.Sampling.ThinkingTokenBudget = SomeInt(10) }, "sampling_params.thinking_token_budget"},
		{"resumable", func(r *EngineCoreRequest) { r.Resumable = true }, "resumable"},
		{"session", func(r *EngineCoreRequest) { r.SessionID = SomeString("s") }, "session_id"},
		{"lora", func(r *EngineCoreRequest) { r.LoRA = &LoRARequest{Name: "a", IntID: 1} }, "lora_request"},
		{"pooling", func(r *EngineCoreRequest) { r.Sampling, r.PoolingParams = nil, Raw{0x90} }, "pooling_params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := goodRequest()
			tt.edit(q)
			_, _, err := v011.AppendAdd(nil, q)
			var le *LayoutError
			if !errors.As(err, &le) || le.Field != tt.field {
				t.Fatalf("got %v, want a LayoutError for %s", err, tt.field)
			}
		})
	}
	// What an old engine does anyway is not a reason to refuse: the post-init
	// skip_reading_prefix_cache=false and the external id are left out.
	q := goodRequest()
	q.Sampling.SkipReadingPrefixCache = OptBool{Value: false, Valid: true}
	q.ExternalReqID = SomeString("user-1")
	body, _, err := v011.AppendAdd(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	var back EngineCoreRequest
	if err := v011.DecodeAdd([][]byte{body}, &back); err != nil {
		t.Fatal(err)
	}
	if back.Sampling.EOSTokenID != SomeInt(2) {
		t.Fatalf("EOS id lost: %+v", back.Sampling.EOSTokenID)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]Version{
		"0.18.1": {0, 18, 1}, "v0.21": {0, 21, 0}, "0.26.1.dev42+g48c3294": {0, 26, 1},
		"0.19.0rc1": {0, 19, 0}, "1.0.0-beta": {1, 0, 0}, "0.22.0.post1": {0, 22, 0},
	} {
		got, err := ParseVersion(in)
		if err != nil || got != want {
			t.Errorf("%q: got %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "x.y", "0.0.0-fixture.x"} {
		if bad == "0.0.0-fixture.x" {
			continue // parses as 0.0.0: the fixture's placeholder is placed nowhere
		}
		if _, err := ParseVersion(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	r, err := ParseVersionRange(">=0.22.0,<0.27.0")
	if err != nil {
		t.Fatal(err)
	}
	for v, in := range map[string]bool{"0.21.9": false, "0.22.0": true, "0.26.1.dev42+g48c3294": true, "0.27.0": false} {
		pv, _ := ParseVersion(v)
		if r.Contains(pv) != in {
			t.Errorf("%s in %v: got %v", v, r, !in)
		}
	}
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}
