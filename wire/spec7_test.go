package wire

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The byte strings of engine-protocol.md section 7: the short forms other encoders
// (older Python, the Rust port) send. They must decode; msgspec itself writes the
// full-length forms the golden fixtures hold.

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	s = strings.NewReplacer(" ", "", "\n", "", "\t", "").Replace(s)
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const (
	ts         = "cb 40 c8 1c d6 c8 b4 39 58" // 12345.678
	samplingV1 = "83 aa 6d 61 78 5f 74 6f 6b 65 6e 73 04 ad 5f 65 6f 73 5f 74 6f 6b 65 6e 5f 69 64 02" +
		"b3 5f 61 6c 6c 5f 73 74 6f 70 5f 74 6f 6b 65 6e 5f 69 64 73 91 02"
)

func wantSpecSampling() *SamplingParams {
	p := DefaultSamplingParams()
	p.MaxTokens = SomeInt(4)
	p.EOSTokenID = SomeInt(2)
	p.AllStopTokenIDs = []int64{2}
	return &p
}

func TestSpec7AddShortForms(t *testing.T) {
	tests := []struct {
		name string
		hex  string
		want EngineCoreRequest
	}{{
		name: "7.1 minimal, 9 fields",
		hex:  "99 a5 72 65 71 2d 31 93 01 02 03 c0" + samplingV1 + "c0 cb 41 da 55 6e 40 10 00 00 c0 c0 c0",
		want: EngineCoreRequest{RequestID: "req-1", PromptTokenIDs: []int64{1, 2, 3}, Sampling: wantSpecSampling(), ArrivalTime: 1767225600.25},
	}, {
		name: "7.2 python shape, 17 fields",
		hex: "dc 00 11 ae 72 65 71 2d 31 2d 61 31 62 32 63 33 64 34 93 01 02 03 c0" + samplingV1 +
			"c0 cb 41 da 55 6e 40 10 00 00 c0 c0 c0 c0 c0 00 00 00 c0 c2 a5 72 65 71 2d 31",
		want: EngineCoreRequest{RequestID: "req-1-a1b2c3d4", PromptTokenIDs: []int64{1, 2, 3}, Sampling: wantSpecSampling(),
			ArrivalTime: 1767225600.25, ExternalReqID: SomeString("req-1")},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got EngineCoreRequest
			if err := DecodeAdd([][]byte{unhex(t, tt.hex)}, &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			// Our full-length re-encoding decodes to the same request.
			body, _, err := AppendAdd(nil, &got)
			if err != nil {
				t.Fatal(err)
			}
			var again EngineCoreRequest
			if err := DecodeAdd([][]byte{body}, &again); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(got, again, ignoreKeys); d != "" {
				t.Errorf("round trip (-first +again):\n%s", d)
			}
		})
	}
}

func TestSpec7Outputs(t *testing.T) {
	out := func(id string, toks []int64, fin FinishReason, stop StopReason) EngineCoreOutput {
		return EngineCoreOutput{RequestID: id, NewTokenIDs: toks, FinishReason: fin, StopReason: stop}
	}
	tests := []struct {
		name string
		hex  string
		want EngineCoreOutputs
	}{
		{"intermediate", "94 00 91 92 a5 72 65 71 2d 31 91 2a c0" + ts,
			EngineCoreOutputs{Outputs: []EngineCoreOutput{out("req-1", []int64{42}, FinishNone, StopReason{})}, Timestamp: 12345.678}},
		{"length", "94 00 91 96 a5 72 65 71 2d 31 93 07 09 0b c0 c0 c0 01 c0" + ts,
			EngineCoreOutputs{Outputs: []EngineCoreOutput{out("req-1", []int64{7, 9, 11}, FinishLength, StopReason{})}, Timestamp: 12345.678}},
		{"eos", "94 00 91 96 a5 72 65 71 2d 31 91 02 c0 c0 c0 00 c0" + ts,
			EngineCoreOutputs{Outputs: []EngineCoreOutput{out("req-1", []int64{2}, FinishStop, StopReason{})}, Timestamp: 12345.678}},
		{"stop token", "94 00 91 97 a5 72 65 71 2d 31 91 0d c0 c0 c0 00 0d c0" + ts,
			EngineCoreOutputs{Outputs: []EngineCoreOutput{out("req-1", []int64{13}, FinishStop, StopReason{Kind: StopReasonToken, Token: 13})}, Timestamp: 12345.678}},
		{"utility reply", "95 00 90 c0" + ts + "93 07 c0 92 c0 c2",
			EngineCoreOutputs{Outputs: []EngineCoreOutput{}, Timestamp: 12345.678, UtilityOutput: &UtilityOutput{CallID: 7, HasResult: true, Result: Raw{0xc2}}}},
		{"wave complete", "97 00 90 c0" + ts + "c0 c0 02",
			EngineCoreOutputs{Outputs: []EngineCoreOutput{}, Timestamp: 12345.678, WaveComplete: SomeInt(2)}},
		{"start wave", "98 01 90 c0" + ts + "c0 c0 c0 03",
			EngineCoreOutputs{EngineIndex: 1, Outputs: []EngineCoreOutput{}, Timestamp: 12345.678, StartWave: SomeInt(3)}},
		{"longer than we know", "99 00 91 dc 00 13 a5 72 65 71 2d 31 91 2a" + strings.Repeat("c0 ", 11) + "00 c0 c0 c0 a3 6e 65 77 92 01 02 c0" + ts + "c0 c0 c0 c0 a5 65 78 74 72 61",
			EngineCoreOutputs{Outputs: []EngineCoreOutput{out("req-1", []int64{42}, FinishNone, StopReason{})}, Timestamp: 12345.678}},
		{"empty", "90", EngineCoreOutputs{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got EngineCoreOutputs
			if err := DecodeOutputs([][]byte{unhex(t, tt.hex)}, &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestSpec7Control(t *testing.T) {
	ids, err := DecodeAbort(unhex(t, "91 a5 72 65 71 2d 31"))
	if err != nil || len(ids) != 1 || ids[0] != "req-1" {
		t.Errorf("abort: %v %v", ids, err)
	}
	u := unhex(t, "94 00 07 ab 69 73 5f 73 6c 65 65 70 69 6e 67 90")
	ci, id, m, args, err := DecodeUtility(u)
	if err != nil || ci != 0 || id != 7 || m != "is_sleeping" || string(args) != "\x90" {
		t.Errorf("utility: %v %v %v %x %v", ci, id, m, args, err)
	}
	if b, _ := AppendUtility(nil, 0, 7, "is_sleeping", nil); string(b) != string(u) {
		t.Errorf("utility encode: %x", b)
	}
	for _, tt := range []struct {
		hex  string
		want StartDPWave
	}{{"92 03 01", StartDPWave{3, SomeInt(1)}}, {"92 03 c0", StartDPWave{Wave: 3}}, {"92 03 c4 02 01 00", StartDPWave{Wave: 3}}} {
		got, err := DecodeStartDPWave(unhex(t, tt.hex))
		if err != nil || got != tt.want {
			t.Errorf("start_dp_wave %s: %+v %v", tt.hex, got, err)
		}
	}
	p, err := DecodeCoordinatorPublish(unhex(t, "93 92 93 00 02 cb 00 00 00 00 00 00 00 00 93 01 01 cb 3f d0 00 00 00 00 00 00 03 c3"))
	want := CoordinatorPublish{Counts: []EngineLoad{{0, 2, 0}, {1, 1, 0.25}}, CurrentWave: 3, EnginesRunning: true}
	if err != nil || !cmp.Equal(p, want) {
		t.Errorf("publish: %+v %v", p, err)
	}
	p, err = DecodeCoordinatorPublish(unhex(t, "93 91 92 05 06 00 c2"))
	if err != nil || !cmp.Equal(p, CoordinatorPublish{Counts: []EngineLoad{{Waiting: 5, Running: 6}}}) {
		t.Errorf("two-element counts: %+v %v", p, err)
	}
	f, err := DecodeFirstReq(unhex(t, "92 c4 02 01 00 03"))
	if err != nil || f != (FirstReq{Identity: Identity{1, 0}, HasIdentity: true, EngineIndex: 1, Wave: 3}) {
		t.Errorf("first_req: %+v %v", f, err)
	}
	if b := AppendFirstReq(nil, FirstReq{EngineIndex: 1, Wave: 3}); string(b) != "\x92\x01\x03" {
		t.Errorf("first_req int form: %x", b)
	}
	if !IsEngineCoreDead([][]byte{unhex(t, "45 4e 47 49 4e 45 5f 43 4f 52 45 5f 44 45 41 44")}) ||
		IsEngineCoreDead([][]byte{EngineCoreDead, {}}) || IsEngineCoreDead([][]byte{[]byte("ENGINE_CORE_DEA")}) {
		t.Error("ENGINE_CORE_DEAD sentinel")
	}
}

func TestTypeFrames(t *testing.T) {
	for b := 0; b < 256; b++ {
		f, err := TypeFrame(byte(b))
		ok := b <= 3
		if (err == nil) != ok || ok && (len(f) != 1 || f[0] != byte(b)) {
			t.Errorf("TypeFrame(%#x) = %x, %v", b, f, err)
		}
		if _, err := ParseRequestType([]byte{byte(b)}); (err == nil) != ok {
			t.Errorf("ParseRequestType(%#x): %v", b, err)
		}
	}
	if _, err := ParseRequestType([]byte{0, 0}); err == nil {
		t.Error("two-byte type frame accepted")
	}
}

// TestGoldenTyped checks the decoded values of fixtures whose meaning matters most
// to the dispatcher, beyond the byte round trip.
func TestGoldenTyped(t *testing.T) {
	byName := map[string]fixture{}
	for _, f := range loadGolden(t) {
		byName[f.Name] = f
	}
	var o EngineCoreOutputs
	if err := DecodeOutputs(byName["outputs_step"].frames, &o); err != nil {
		t.Fatal(err)
	}
	s := o.SchedulerStats
	if o.EngineIndex != 1 || s == nil || s.NumRunningReqs != 1 || s.NumWaitingReqs != 0 || s.KVCacheUsage != 0.015625 || len(s.Raw) == 0 {
		t.Errorf("outputs_step: %+v %+v", o, s)
	}
	if e := o.Outputs[0]; e.RequestID != "req-1" || !cmp.Equal(e.NewTokenIDs, []int64{42}) || e.Finished() {
		t.Errorf("outputs_step entry: %+v", e)
	}
	if err := DecodeOutputs(byName["outputs_utility_engine_push"].frames, &o); err != nil {
		t.Fatal(err)
	}
	if u := o.UtilityOutput; !u.CallIDNegative || int64(u.CallID) != -2 || !u.HasResult {
		t.Errorf("engine push: %+v", u)
	}
	if err := DecodeOutputs(byName["outputs_utility_failed"].frames, &o); err != nil {
		t.Fatal(err)
	}
	if u := o.UtilityOutput; u.CallIDNegative || u.CallID != 1<<64-1 || u.Failure.Value != "Call to reset_prefix_cache method failed: boom" || u.HasResult {
		t.Errorf("failed utility: %+v", u)
	}
	if err := DecodeOutputs(byName["outputs_engine_abort"].frames, &o); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(o.FinishedRequests, []string{"req-5", "req-6"}) || o.Outputs[1].FinishReason != FinishAbort || len(o.Outputs[1].NewTokenIDs) != 0 {
		t.Errorf("engine abort: %+v", o)
	}
	if err := DecodeOutputs(byName["outputs_events_prefill_kv"].frames, &o); err != nil {
		t.Fatal(err)
	}
	e := o.Outputs[0]
	if len(e.Events) != 2 || e.Events[1] != (EngineCoreEvent{2, 12345.428}) || e.PrefillStats.NumCachedTokens != 16 || e.PrefillStats.NumCacheCreationTokens != 4 || len(e.KVTransferParams) == 0 {
		t.Errorf("events/prefill: %+v %+v", e, e.PrefillStats)
	}
	f := byName["outputs_logprobs_multipart"]
	if err := DecodeOutputs(f.frames, &o); err != nil {
		t.Fatal(err)
	}
	l := o.Outputs[0].NewLogprobs
	if l.LogprobTokenIDs.AuxIndex != 1 || l.Logprobs.AuxIndex != 2 || len(l.Logprobs.Data) != 160 || l.Logprobs.DType != "<f4" ||
		!cmp.Equal(l.Logprobs.Shape, []int64{2, 20}) || l.SampledTokenRanks.AuxIndex != 0 || len(l.SampledTokenRanks.Data) != 16 {
		t.Errorf("multipart logprobs: %+v", l)
	}
	var q EngineCoreRequest
	if err := DecodeAdd(byName["add_empty_sampling_map"].frames[1:], &q); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(DefaultSamplingParams(), *q.Sampling); d != "" {
		t.Errorf("empty sampling map must restore every default (-want +got):\n%s", d)
	}
	rr, err := DecodeReadyResponse(byName["registration"].frames[0])
	if err != nil || rr.MaxModelLen != SomeInt(32768) || rr.NumGPUBlocks != SomeInt(12000) || rr.DType.Value != "bfloat16" || rr.SupportsLoRA != (OptBool{false, true}) || rr.Empty {
		t.Errorf("registration: %+v %v", rr, err)
	}
	if rr, err := DecodeReadyResponse(nil); err != nil || !rr.Empty {
		t.Errorf("empty registration: %+v %v", rr, err)
	}
	h, err := DecodeHandshakeStatus(byName["ready_dp"].frames[0])
	if err != nil || h.Status != "READY" || h.Local || !h.Headless || h.ParallelConfigHash != SomeString("abc123") {
		t.Errorf("ready: %+v %v", h, err)
	}
	in, err := DecodeInit(byName["init_coordinator"].frames[0])
	if err != nil || in.Addresses.CoordinatorInput != SomeString("tcp://127.0.0.1:6001") || in.Addresses.Outputs[0] != "ipc:///run/sy/out-rank1" || in.ParallelConfig == nil {
		t.Errorf("init: %+v %v", in, err)
	}
}
