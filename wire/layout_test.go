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
	decodeFrames(t, doc.Fixtures)
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
		{"lora load_inplace", func(r *EngineCoreRequest) { r.LoRA = &LoRARequest{Name: "a", IntID: 1, Path: "/a", LoadInplace: true} }, "lora_request.load_inplace"},
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

// TestLayoutFilesFromFixtures: a layout file generated from each release's fixture
// (its struct fields in order, as vllm-layout-script writes them from vLLM's classes)
// works exactly as the built-in layout: every golden message decodes, and what we
// encode is msgspec's bytes.
func TestLayoutFilesFromFixtures(t *testing.T) {
	for _, b := range BuiltinLayouts() {
		doc := loadVersionFixtures(t, b.Name)
		data, err := b.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		// The struct fields come from the fixture's own classes, not from the
		// built-in.
		structs := f["structs"].(map[string]any)
		structs["EngineCoreRequest"].(map[string]any)["fields"] = doc.Layout["EngineCoreRequest"]
		structs["EngineCoreOutput"] = map[string]any{"fields": doc.Layout["EngineCoreOutput"]}
		structs["EngineCoreOutputs"] = map[string]any{"fields": doc.Layout["EngineCoreOutputs"]}
		f["sampling_params"] = doc.Layout["SamplingParams"]
		f["native"] = b.Native // the newest fixture predates some keys the native layout knows
		if b.Native {
			f["sampling_params"] = b.SamplingKeys
		}
		f["name"] = "file-" + b.Name
		data, _ = json.Marshal(f)
		l, err := ParseLayout(data, "generated-"+b.Name+".json")
		if err != nil {
			t.Fatalf("%s: %v", b.Name, err)
		}
		for _, fx := range doc.Fixtures {
			t.Run(l.Name+"/"+fx.Name, func(t *testing.T) { checkVersionFixture(t, l, fx) })
		}
	}
}

// TestParseLayoutRefuses: files a codec could not use are refused at load, naming why.
func TestParseLayoutRefuses(t *testing.T) {
	base, _ := BuiltinLayout("v0.18").JSON()
	edit := func(fn func(map[string]any)) []byte {
		var f map[string]any
		json.Unmarshal(base, &f)
		fn(f)
		b, _ := json.Marshal(f)
		return b
	}
	structs := func(f map[string]any) map[string]any { return f["structs"].(map[string]any) }
	for name, tt := range map[string]struct {
		data []byte
		want string
	}{
		"format":  {edit(func(f map[string]any) { f["format"] = 2 }), "format 2"},
		"no name": {edit(func(f map[string]any) { f["name"] = "" }), "no name"},
		"reasons": {edit(func(f map[string]any) { f["finish_reasons"] = []string{"LENGTH", "STOP", "ABORT"} }), "finish_reasons"},
		"unknown required": {edit(func(f map[string]any) {
			structs(f)["EngineCoreRequest"] = map[string]any{"fields": []any{"request_id", "prompt_token_ids", "sampling_params", "arrival_time", map[string]any{"name": "brand_new"}}}
		}), "brand_new: required"},
		"no eos": {edit(func(f map[string]any) {
			f["sampling_params"] = []string{"max_tokens"}
		}), "no place for the EOS id"},
		"bad default": {edit(func(f map[string]any) {
			structs(f)["EngineCoreOutput"] = map[string]any{"fields": []any{"request_id", "new_token_ids", "finish_reason", map[string]any{"name": "x", "default": "zz"}}}
		}), "default is not"},
		"envelope": {edit(func(f map[string]any) {
			structs(f)["EngineCoreOutputs"] = map[string]any{"fields": []string{"outputs", "engine_index"}}
		}), "EngineCoreOutputs is"},
		"range": {edit(func(f map[string]any) { f["versions"] = ">=0.30.0,<0.29.0" }), "empty range"},
		"json":  {[]byte("{"), "unexpected EOF"},
	} {
		if _, err := ParseLayout(tt.data, name); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tt.want)
		}
	}
}

// A new field in the middle of an array, unknown to switchyard, is written with
// vLLM's default and skipped on decode; a known field that moved is found by name.
func TestLayoutFileUnknownAndMovedFields(t *testing.T) {
	base, _ := BuiltinLayout("newest").JSON()
	var f map[string]any
	json.Unmarshal(base, &f)
	s := f["structs"].(map[string]any)
	req := s["EngineCoreRequest"].(map[string]any)
	fields := req["fields"].([]any)
	// priority moves to the end; a new field with default 7 comes in at index 2.
	var moved []any
	var prio any
	for _, x := range fields {
		if x.(map[string]any)["name"] == "priority" {
			prio = x
			continue
		}
		moved = append(moved, x)
	}
	moved = append(moved[:2], append([]any{map[string]any{"name": "brand_new_knob", "default": "07"}}, moved[2:]...)...)
	req["fields"] = append(moved, prio)
	outs := s["EngineCoreOutput"].(map[string]any)["fields"].([]any)
	s["EngineCoreOutput"] = map[string]any{"fields": append(outs[:3:3], append([]any{map[string]any{"name": "new_out", "default": "c0"}}, outs[3:]...)...)}
	f["native"] = false
	data, _ := json.Marshal(f)
	l, err := ParseLayout(data, "moved.json")
	if err != nil {
		t.Fatal(err)
	}
	q := goodRequest()
	q.Priority = 5
	body, _, err := l.AppendAdd(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	v, err := generic(body)
	if err != nil {
		t.Fatal(err)
	}
	arr := v.([]any)
	if arr[2] != "int:7" || arr[len(arr)-1] != "int:5" {
		t.Fatalf("new field %v at 2, priority %v at the end", arr[2], arr[len(arr)-1])
	}
	var back EngineCoreRequest
	if err := l.DecodeAdd([][]byte{body}, &back); err != nil || back.Priority != 5 {
		t.Fatalf("decode: %v, priority %d", err, back.Priority)
	}
	// Outputs with the extra field decode; what the engine put there is skipped.
	o := EngineCoreOutputs{Outputs: []EngineCoreOutput{{RequestID: "r", NewTokenIDs: []int64{9}, FinishReason: FinishLength}}}
	ob, _, err := l.AppendOutputs(nil, &o)
	if err != nil {
		t.Fatal(err)
	}
	d := OutputsDecoder{Layout: l}
	var got EngineCoreOutputs
	if err := d.Decode([][]byte{ob}, &got); err != nil || d.CheckLayout() != nil {
		t.Fatalf("decode: %v, %v", err, d.CheckLayout())
	}
	if got.Outputs[0].FinishReason != FinishLength || got.Outputs[0].NewTokenIDs[0] != 9 {
		t.Fatalf("%+v", got.Outputs[0])
	}
}
