package wire

import (
	"strconv"
	"strings"
	"testing"
)

// handshakeOf decodes a layout's golden READY and registration.
func handshakeOf(t *testing.T, name string) (ReadyResponse, HandshakeStatus) {
	t.Helper()
	var reg ReadyResponse
	var ready HandshakeStatus
	for _, f := range loadVersionFixtures(t, name).Fixtures {
		var err error
		switch f.Name {
		case "registration":
			reg, err = DecodeReadyResponse(f.frames[0])
		case "registration_empty":
			reg, err = DecodeReadyResponse(nil)
		case "ready_dp":
			ready, err = DecodeHandshakeStatus(f.frames[0])
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return reg, ready
}

// engineMethods answers probes as an engine of layout l would: it has every method
// of l's ProbeHas and of every older built-in's ProbeHas not in l's ProbeLacks...
// simplest truthful model: the methods by release from vLLM's EngineCore.
func engineMethods(name string) map[string]bool {
	byRelease := map[string][]string{
		"v0.11": {"save_tensorized_model", "is_sleeping"},
		"v0.12": {"log_error_detail", "is_sleeping"},
		"v0.15": {"log_error_detail", "log_iteration_details", "is_sleeping"},
		"v0.18": {"log_error_detail", "log_iteration_details", "is_scheduler_paused", "is_sleeping"},
		"v0.21": {"log_error_detail", "log_iteration_details", "is_scheduler_paused", "get_kv_cache_group_metadata"},
	}
	m := map[string]bool{}
	for _, x := range byRelease[name] {
		m[x] = true
	}
	return m
}

// TestPlaceEveryLayout: each release's own handshake places it on its layout,
// through probes where the handshake alone cannot tell (v0.11 to v0.18 look alike).
func TestPlaceEveryLayout(t *testing.T) {
	for _, l := range BuiltinLayouts() {
		t.Run(l.Name, func(t *testing.T) {
			reg, ready := handshakeOf(t, l.Name)
			if l.Name == "newest" {
				reg.VLLMVersion = SomeString("0.24.2") // the fixture reports 0.0.0-fixture
			}
			var set *LayoutSet
			p := set.Place(&reg, &ready)
			if p.Refused != "" {
				t.Fatalf("refused: %s", p.Refused)
			}
			got := p.Layout
			if got == nil {
				pr := NewProber(p.Candidates)
				methods := engineMethods(l.Name)
				n := 0
				for m, ok := pr.Next(); ok; m, ok = pr.Next() {
					u := UtilityOutput{Failure: SomeString("Call to " + m + " method failed: ")}
					if !methods[m] {
						u.Failure = SomeString("Call to " + m + " method failed: 'EngineCoreProc' object has no attribute '" + m + "'")
					}
					pr.Answer(m, ProbeAnswer(m, &u))
					n++
				}
				var why string
				if got, why = pr.Result(); got == nil {
					t.Fatal(why)
				}
				t.Logf("%s placed after %d probes: %s", l.Name, n, why)
			}
			if got != l {
				t.Fatalf("placed on %v, want %s (%s)", got, l.Name, p.How)
			}
		})
	}
}

func TestPlaceRefusesWhatItCannotPlace(t *testing.T) {
	reg, ready := handshakeOf(t, "newest")
	var set *LayoutSet
	for _, v := range []string{"0.27.0", "0.33.1", "0.21.0", "banana", "0.0.0-fixture"} {
		reg.VLLMVersion = SomeString(v)
		p := set.Place(&reg, &ready)
		if p.Refused == "" || p.Layout != nil {
			t.Errorf("%s: placed on %v", v, p.Layout)
			continue
		}
		for _, want := range []string{v, "known layouts: v0.11", "newest (>=0.22.0,<0.27.0)", "vllm-layout-script", "--vllm-layout NAME"} {
			if !strings.Contains(p.Refused, want) {
				t.Errorf("%s: refusal %q does not say %q", v, p.Refused, want)
			}
		}
	}
	// A huge version string is cut before it reaches a log, /v1/engines or a label.
	reg.VLLMVersion = SomeString(strings.Repeat("9", 1<<16))
	if p := set.Place(&reg, &ready); len(p.Version) > maxVersionLen+3 || len(p.Refused) > 2048 {
		t.Errorf("version kept as %d bytes, refusal %d bytes", len(p.Version), len(p.Refused))
	}
	many := ReadyResponse{Keys: make([]string, 5000)}
	for i := range many.Keys {
		many.Keys[i] = strings.Repeat("k", 1000) + strconv.Itoa(i)
	}
	if p := set.Place(&many, &ready); p.Refused == "" || len(p.Refused) > 4096 {
		t.Errorf("5,000 long keys: refusal of %d bytes", len(p.Refused))
	}
	// A version in range with another registration shape (the 6-key shape of a
	// v0.23 tree) is refused too.
	six := ReadyResponse{VLLMVersion: SomeString("0.23.0"), Keys: []string{"max_model_len", "num_gpu_blocks", "block_size", "dp_stats_address", "dtype", "vllm_version"}}
	if p := set.Place(&six, &ready); p.Refused == "" {
		t.Errorf("6-key registration placed on %v", p.Layout)
	}
	// Forcing places what nothing else does.
	forced := &LayoutSet{Force: BuiltinLayout("newest")}
	reg.VLLMVersion = SomeString("0.33.0")
	if p := forced.Place(&reg, &ready); p.Layout != Native() {
		t.Errorf("forced: %+v", p)
	}
	// READY that contradicts the registration: a v0.21 registration with a v0.18 READY.
	reg21, _ := handshakeOf(t, "v0.21")
	_, ready18 := handshakeOf(t, "v0.18")
	if p := set.Place(&reg21, &ready18); p.Refused == "" {
		t.Errorf("contradicting READY placed on %v", p.Layout)
	}
}

// TestProberRefusesUnknownMethods: an engine that answers unlike any release is
// refused, not placed on the nearest guess.
func TestProberRefusesUnknownMethods(t *testing.T) {
	var cands []*Layout
	for _, n := range []string{"v0.11", "v0.12", "v0.15", "v0.18"} {
		cands = append(cands, BuiltinLayout(n))
	}
	pr := NewProber(cands)
	n := 0
	for m, ok := pr.Next(); ok; m, ok = pr.Next() {
		pr.Answer(m, false) // has nothing
		n++
	}
	if l, why := pr.Result(); l != nil || !strings.Contains(why, "match none") {
		t.Fatalf("got %v, %q", l, why)
	}
	if n > maxProbes {
		t.Fatalf("%d probes", n)
	}
}

func TestProbeAnswer(t *testing.T) {
	missing := UtilityOutput{Failure: SomeString("Call to log_error_detail method failed: 'EngineCoreProc' object has no attribute 'log_error_detail'")}
	if ProbeAnswer("log_error_detail", &missing) {
		t.Error("missing method read as present")
	}
	typeErr := UtilityOutput{Failure: SomeString("Call to log_error_detail method failed: EngineCore.log_error_detail() takes 1 positional argument but 65 were given")}
	if !ProbeAnswer("log_error_detail", &typeErr) {
		t.Error("argument error read as missing")
	}
	if n := len(ProbeArgsRaw); n != 3+ProbeArgs {
		t.Errorf("probe args %d bytes", n)
	}
}

// TestCheckLayout: the first outputs confirm the placement by their array length.
func TestCheckLayout(t *testing.T) {
	for _, f := range loadVersionFixtures(t, "v0.11").Fixtures {
		if f.Name != "outputs_three_requests" {
			continue
		}
		d := OutputsDecoder{Layout: BuiltinLayout("v0.11")}
		var o EngineCoreOutputs
		if err := d.Decode(f.frames, &o); err != nil || d.CheckLayout() != nil {
			t.Fatalf("own layout: %v, %v", err, d.CheckLayout())
		}
		// v0.11's outputs decode with v0.12's layout (its one extra field is at
		// the end); only their length shows they are not v0.12's.
		d = OutputsDecoder{Layout: BuiltinLayout("v0.12")}
		if err := d.Decode(f.frames, &o); err != nil {
			t.Fatal(err)
		}
		err := d.CheckLayout()
		if err == nil || !strings.Contains(err.Error(), "11 fields, the layout 12") {
			t.Fatalf("v0.11 outputs on v0.12: %v", err)
		}
		return
	}
	t.Fatal("fixture missing")
}

// TestPlaceKnownExtraKeys: a registration in a layout's version range that adds
// keys switchyard's decoder knows (a release registering the coordinator addresses)
// is placed, naming the extra keys; one that adds a key nothing here knows, or
// lacks one of the layout's keys, is still refused.
func TestPlaceKnownExtraKeys(t *testing.T) {
	reg, ready := handshakeOf(t, "newest")
	reg.VLLMVersion = SomeString("0.24.2")
	extra := []string{"coord_store_port", "coordinator_input_address", "coordinator_output_address"}
	wide := reg
	wide.Keys = append(append([]string(nil), reg.Keys...), extra...)
	var set *LayoutSet
	p := set.Place(&wide, &ready)
	if p.Layout != Native() || p.Refused != "" {
		t.Fatalf("placed on %v, refused %q", p.Layout, p.Refused)
	}
	if strings.Join(p.ExtraKeys, ",") != strings.Join(extra, ",") || !strings.Contains(p.How, "coordinator_input_address") {
		t.Errorf("extra keys %v, how %q", p.ExtraKeys, p.How)
	}
	if p := set.Place(&reg, &ready); p.Layout != Native() || p.ExtraKeys != nil {
		t.Errorf("exact registration: %+v", p)
	}
	odd := wide
	odd.Keys = append(append([]string(nil), wide.Keys...), "not_a_field_switchyard_reads")
	if p := set.Place(&odd, &ready); p.Refused == "" || !strings.Contains(p.Refused, "not_a_field_switchyard_reads") {
		t.Errorf("unknown key: placed on %v, refusal %q", p.Layout, p.Refused)
	}
	short := wide
	short.Keys = append([]string(nil), wide.Keys[1:]...) // lacks max_model_len
	if p := set.Place(&short, &ready); p.Refused == "" {
		t.Errorf("missing key: placed on %v", p.Layout)
	}
	out := wide
	out.VLLMVersion = SomeString("0.27.0")
	if p := set.Place(&out, &ready); p.Refused == "" {
		t.Errorf("version out of range: placed on %v", p.Layout)
	}
}
