package wire

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// The Python round trip: testdata/roundtrip.py builds each case the way msgspec
// shapes it, with Debian's python3-msgpack (an implementation independent of ours).
// Python -> Go: we decode Python's bytes and compare with the typed values below.
// Go -> Python: we encode the typed values and Python compares every field.

// kv is one entry of an ordered map literal for mp.
type kv struct {
	k any
	v any
}

// ext3 is raw tensor bytes for mp.
type ext3 []byte

// mp encodes a small literal (nil, bool, int, float64, string, []byte as bin, ext3,
// []any, []kv) as msgpack, to build the Raw values of expectations.
func mp(v any) Raw {
	var enc func(b []byte, v any) []byte
	enc = func(b []byte, v any) []byte {
		switch x := v.(type) {
		case nil:
			return appendNil(b)
		case bool:
			return appendBool(b, x)
		case int:
			return appendInt(b, int64(x))
		case float64:
			return appendFloat(b, x)
		case string:
			return appendStr(b, x)
		case []byte:
			return appendBin(b, x)
		case ext3:
			return appendExt(b, extRawView, x)
		case []any:
			b = appendArrayHeader(b, len(x))
			for _, e := range x {
				b = enc(b, e)
			}
			return b
		case []kv:
			b = appendMapHeader(b, len(x))
			for _, e := range x {
				b = enc(enc(b, e.k), e.v)
			}
			return b
		}
		panic("mp: unsupported literal")
	}
	return enc(nil, v)
}

// rawEqual compares Raw values by meaning (map order and int widths aside). The
// path filter keeps it off plain []byte fields, which are assignable to Raw.
var rawEqual = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().Type() == reflect.TypeFor[Raw]() }, cmp.Comparer(func(a, b Raw) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ga, ea := generic(a)
	gb, eb := generic(b)
	return ea == nil && eb == nil && cmp.Equal(ga, gb)
}))

var roundtripOpts = cmp.Options{rawEqual, cmpopts.IgnoreFields(Tensor{}, "AuxIndex"), cmpopts.IgnoreFields(SchedulerStats{}, "Raw"), ignoreKeys}

type roundtripCase struct {
	typ    int // request type byte, or -1 for messages without a type frame
	decode func(frames [][]byte) (any, error)
	encode func() ([][]byte, error)
	want   any
}

func addCase(q *EngineCoreRequest) roundtripCase {
	return roundtripCase{
		typ: int(RequestAdd),
		decode: func(fr [][]byte) (any, error) {
			var got EngineCoreRequest
			err := DecodeAdd(fr, &got)
			return &got, err
		},
		encode: func() ([][]byte, error) {
			body, aux, err := AppendAdd(nil, q)
			return append([][]byte{body}, aux...), err
		},
		want: q,
	}
}

func simpleCase[T any](typ int, want T, dec func([]byte) (T, error), enc func(T) []byte) roundtripCase {
	return roundtripCase{
		typ:    typ,
		decode: func(fr [][]byte) (any, error) { return dec(fr[0]) },
		encode: func() ([][]byte, error) { return [][]byte{enc(want)}, nil },
		want:   want,
	}
}

func outputsCase(o *EngineCoreOutputs) roundtripCase {
	return roundtripCase{
		typ: -1,
		decode: func(fr [][]byte) (any, error) {
			var got EngineCoreOutputs
			err := DecodeOutputs(fr, &got)
			return &got, err
		},
		encode: func() ([][]byte, error) {
			body, aux, err := AppendOutputs(nil, o)
			return append([][]byte{body}, aux...), err
		},
		want: o,
	}
}

func roundtripCases() map[string]roundtripCase {
	full := DefaultSamplingParams()
	full.PresencePenalty, full.FrequencyPenalty, full.RepetitionPenalty = 0.5, -0.25, 1.1
	full.Temperature, full.TopP, full.TopK, full.MinP = 0.7, 0.9, 50, 0.05
	full.Seed = SomeInt(42)
	full.Stop, full.StopTokenIDs = []string{"###"}, []int64{13}
	full.MaxTokens, full.MinTokens = SomeInt(100), 2
	full.Logprobs, full.PromptLogprobs, full.FlatLogprobs = SomeInt(3), SomeInt(1), true
	full.SkipSpecialTokens, full.SpacesBetweenSpecialTokens, full.IncludeStopStrInOutput = false, false, true
	full.OutputKind, full.StreamInterval, full.SkipClone = 1, SomeInt(4), true
	full.EOSTokenID, full.AllStopTokenIDs = SomeInt(2), []int64{2, 13}
	full.StructuredOutputs = mp([]kv{{"json", "{}"}})
	full.LogitBias = mp([]kv{{5, 1.5}, {7, -2.0}})
	full.AllowedTokenIDs = []int64{1, 2, 3}
	full.ExtraArgs = mp([]kv{{"k", "v"}})
	full.BadWords, full.BadWordsTokenIDs = []string{"bad"}, mp([]any{[]any{99}})
	full.SkipReadingPrefixCache, full.ThinkingTokenBudget = OptBool{true, true}, SomeInt(64)
	full.RepetitionDetection = mp([]kv{{"max_pattern_size", 4}, {"min_pattern_size", 1}, {"min_count", 3}})
	full.RoutedExpertsPromptStart = 3
	full.Unknown = []RawField{{"future_knob", mp(5)}}

	def := DefaultSamplingParams()
	def.MaxTokens = SomeInt(8)
	def.SetEOS(SomeInt(0))
	def.Normalize()

	logprobAux := make([]byte, 320)
	stats := &SchedulerStats{NumRunningReqs: 3, NumWaitingReqs: 4, StepCounter: 5, CurrentWave: 6, KVCacheUsage: 0.5}
	b8 := make([]byte, 8)

	return map[string]roundtripCase{
		"add_full": addCase(&EngineCoreRequest{
			RequestID: "req-full", PromptTokenIDs: []int64{1, 2, 300, 70000},
			MMFeatures: mp([]any{[]kv{{"modality", "image"}}}), Sampling: &full, ArrivalTime: 1767225600.25,
			LoRA:      &LoRARequest{Name: "adapter", IntID: 7, Path: "/loras/a", BaseModelName: SomeString("base"), TensorizerConfigDict: mp([]kv{{"s3", "x"}}), LoadInplace: true},
			CacheSalt: SomeString("salt"), DataParallelRank: SomeInt(1),
			PromptEmbeds:     &Tensor{DType: "float32", Shape: []int64{1, 2}, Data: []byte{0, 1, 2, 3, 4, 5, 6, 7}},
			PromptIsTokenIDs: []bool{true, false}, ClientIndex: 1, CurrentWave: 2, Priority: -3,
			TraceHeaders: map[string]string{"traceparent": "00-abc"}, Resumable: true,
			ExternalReqID: SomeString("ext-1"), ReasoningEnded: OptBool{false, true},
			ReasoningParserKwargs: mp([]kv{{"chat_template_kwargs", []kv{{"enable_thinking", false}}}}),
			AbortImmediately:      true, SessionID: SomeString("sess-9"), KVHints: mp([]kv{{"hint", 1}}),
		}),
		"add_pooling": addCase(&EngineCoreRequest{
			RequestID: "req-pool", PoolingParams: mp([]any{nil, true}), ArrivalTime: 1.5,
			PromptEmbeds: &Tensor{DType: "bfloat16", Shape: []int64{256}, Data: make([]byte, 512)},
		}),
		"add_default": addCase(&EngineCoreRequest{RequestID: "r", PromptTokenIDs: []int64{0}, Sampling: &def}),
		"abort":       simpleCase(int(RequestAbort), []string{"a", "b", "c"}, DecodeAbort, func(v []string) []byte { return AppendAbort(nil, v) }),
		"utility": {
			typ: int(RequestUtility),
			decode: func(fr [][]byte) (any, error) {
				ci, id, m, args, err := DecodeUtility(fr[0])
				return []any{ci, id, m, args}, err
			},
			encode: func() ([][]byte, error) {
				b, err := AppendUtility(nil, 1, 1<<64-1, "reset_prefix_cache", mp([]any{false, true}))
				return [][]byte{b}, err
			},
			want: []any{int64(1), uint64(1<<64 - 1), "reset_prefix_cache", mp([]any{false, true})},
		},
		"start_dp_wave":     simpleCase(int(RequestStartDPWave), StartDPWave{4, SomeInt(1)}, DecodeStartDPWave, func(w StartDPWave) []byte { return AppendStartDPWave(nil, w) }),
		"start_dp_wave_all": simpleCase(int(RequestStartDPWave), StartDPWave{Wave: 4}, DecodeStartDPWave, func(w StartDPWave) []byte { return AppendStartDPWave(nil, w) }),
		"outputs_full": outputsCase(&EngineCoreOutputs{
			EngineIndex: 7,
			Outputs: []EngineCoreOutput{{
				RequestID: "a", NewTokenIDs: []int64{5, 6},
				NewLogprobs: &LogprobsLists{
					LogprobTokenIDs:   Tensor{DType: "<i8", Shape: []int64{1, 40}, Data: logprobAux},
					Logprobs:          Tensor{DType: "<f4", Shape: []int64{1, 2}, Data: b8},
					SampledTokenRanks: Tensor{DType: "<i8", Shape: []int64{1}, Data: b8}, CuNumGeneratedTokens: []int64{0, 1},
				},
				NewPromptLogprobsTensors: &LogprobsTensors{
					LogprobTokenIDs: Tensor{DType: "int64", Shape: []int64{1}, Data: b8},
					Logprobs:        Tensor{DType: "float32", Shape: []int64{1}, Data: make([]byte, 4)}, SelectedTokenRanks: Tensor{DType: "int64", Shape: []int64{1}, Data: b8},
				},
				PoolingOutput: &Tensor{DType: "float32", Shape: []int64{2}, Data: b8},
				FinishReason:  FinishStop, StopReason: StopReason{Kind: StopReasonText, Text: "###"},
				Events:           []EngineCoreEvent{{1, 1.5}, {2, 2.5}},
				KVTransferParams: mp([]kv{{"do_remote_decode", true}}), ECTransferParams: mp([]kv{{"e", 1}}), TraceHeaders: mp([]kv{{"t", "x"}}),
				PrefillStats:    &PrefillStats{20, 20, 16, 16, 0, 4},
				RoutedExperts:   &Tensor{DType: "<i4", Shape: []int64{1}, Data: make([]byte, 4)},
				NumNaNsInLogits: 2, MMCacheMissHashes: []string{"h1"},
				NewSamplingMask:   mp([]any{"<i4", []any{5}, ext3(make([]byte, 20))}),
				SpecDecodeMetrics: mp([]kv{{"accepted", 3}}),
			}, {
				RequestID: "b", NewTokenIDs: []int64{}, FinishReason: FinishLength, StopReason: StopReason{Kind: StopReasonToken, Token: 13},
			}},
			SchedulerStats: stats, Timestamp: 12345.678,
			UtilityOutput:    &UtilityOutput{CallID: 1<<64 - 1, CallIDNegative: true, HasResult: true, Result: mp([]any{"RECONFIGURE_FINISHED", 1})},
			FinishedRequests: []string{"a", "b"}, WaveComplete: SomeInt(2), StartWave: SomeInt(3),
		}),
		"outputs_utility": outputsCase(&EngineCoreOutputs{
			Outputs: []EngineCoreOutput{}, Timestamp: 1,
			UtilityOutput: &UtilityOutput{CallID: 1<<64 - 1, Failure: SomeString("Call to x failed: boom")},
		}),
		"hello": simpleCase(-1, HandshakeStatus{Status: "HELLO", Local: true}, DecodeHandshakeStatus,
			func(h HandshakeStatus) []byte { return AppendHandshakeStatus(nil, &h) }),
		"ready_all": simpleCase(-1, HandshakeStatus{Status: "READY", Headless: true, ParallelConfigHash: SomeString("h"),
			CoordStorePort: SomeInt(5), NumRedundantExperts: SomeInt(0), NumGPUBlocks: SomeInt(100), DPStatsAddress: SomeString("tcp://x:1")},
			DecodeHandshakeStatus, func(h HandshakeStatus) []byte { return AppendHandshakeStatus(nil, &h) }),
		"init": simpleCase(-1, HandshakeInit{
			Addresses: EngineZmqAddresses{Inputs: []string{"tcp://a:1", "tcp://a:2"}, Outputs: []string{"tcp://a:3", "tcp://a:4"},
				CoordinatorInput: SomeString("tcp://c:1"), CoordinatorOutput: SomeString("tcp://c:2"), FrontendStatsPublishAddress: SomeString("tcp://c:3")},
			ParallelConfig: []RawField{{"data_parallel_master_ip", mp("10.0.0.1")}, {"data_parallel_master_port", mp(29500)},
				{"_data_parallel_master_port_list", mp([]any{1, 2})}, {"data_parallel_size", mp(2)}},
		}, DecodeInit, func(in HandshakeInit) []byte { return AppendInit(nil, &in) }),
		"registration": simpleCase(-1, ReadyResponse{
			MaxModelLen: SomeInt(4096), NumGPUBlocks: SomeInt(100), BlockSize: SomeInt(16), DType: SomeString("bfloat16"),
			KVCacheMaxConcurrency: mp(12.5), SupportsLoRA: OptBool{true, true}, MaxLoRAs: SomeInt(8),
			KVEventsConfig: mp([]kv{{"enable_kv_cache_events", true}, {"topic", "kv"}}), WeightTransferBackend: SomeString("nccl"),
			EnableSleepMode: OptBool{true, true}, SupportsDraftWeightUpdates: OptBool{false, true},
			Unknown: []RawField{{"effective_attention_block_size", mp(32)}},
		}, DecodeReadyResponse, func(r ReadyResponse) []byte { return AppendReadyResponse(nil, &r) }),
		"coordinator_publish": simpleCase(-1, CoordinatorPublish{Counts: []EngineLoad{{1, 2, 0.75}, {0, 0, 0}}, CurrentWave: 9},
			DecodeCoordinatorPublish, func(p CoordinatorPublish) []byte { return AppendCoordinatorPublish(nil, &p) }),
		"coordinator_publish_nil": simpleCase(-1, CoordinatorPublish{CurrentWave: 1, EnginesRunning: true},
			DecodeCoordinatorPublish, func(p CoordinatorPublish) []byte { return AppendCoordinatorPublish(nil, &p) }),
		"first_req": simpleCase(-1, FirstReq{Identity: IdentityOf(258), HasIdentity: true, EngineIndex: 258, Wave: 5},
			DecodeFirstReq, func(f FirstReq) []byte { return AppendFirstReq(nil, f) }),
		"first_req_int": simpleCase(-1, FirstReq{EngineIndex: 258, Wave: 5},
			DecodeFirstReq, func(f FirstReq) []byte { return AppendFirstReq(nil, f) }),
	}
}

func TestPythonToGo(t *testing.T) {
	py := pytest.Find(t, "msgpack")
	out, err := testwait.Command(t, testwait.Deadline, py, "testdata/roundtrip.py", "py2go").Output()
	if err != nil {
		t.Fatalf("roundtrip.py py2go: %v", err)
	}
	cases := roundtripCases()
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var msg struct {
			Name   string
			Frames []string
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatal(err)
		}
		c, ok := cases[msg.Name]
		if !ok {
			t.Errorf("python case %q has no Go expectation", msg.Name)
			continue
		}
		seen++
		t.Run(msg.Name, func(t *testing.T) {
			var frames [][]byte
			for _, h := range msg.Frames {
				b, _ := hex.DecodeString(h)
				frames = append(frames, b)
			}
			if c.typ >= 0 {
				mustType(t, frames, byte(c.typ))
				frames = frames[1:]
			}
			got, err := c.decode(frames)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(c.want, got, roundtripOpts); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	if seen != len(cases) {
		t.Errorf("python sent %d cases, Go has %d", seen, len(cases))
	}
}

func TestGoToPython(t *testing.T) {
	py := pytest.Find(t, "msgpack")
	var in strings.Builder
	for name, c := range roundtripCases() {
		frames, err := c.encode()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.typ >= 0 {
			tf, _ := TypeFrame(byte(c.typ))
			frames = append([][]byte{tf}, frames...)
		}
		line, _ := json.Marshal(map[string]any{"name": name, "frames": hexAll(frames)})
		in.Write(append(line, '\n'))
	}
	cmd := testwait.Command(t, testwait.Deadline, py, "testdata/roundtrip.py", "go2py")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python found differences (%v):\n%s", err, out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// DecodeAddWith decodes as DecodeAdd does, into the caller's sampling params when
// the request has them (overwriting what they held), and leaves them alone when it
// has pooling params instead.
func TestDecodeAddWith(t *testing.T) {
	cases := roundtripCases()
	for _, name := range []string{"add_full", "add_default", "add_pooling"} {
		frames, err := cases[name].encode()
		if err != nil {
			t.Fatal(err)
		}
		var want, got EngineCoreRequest
		if err := DecodeAdd(frames, &want); err != nil {
			t.Fatal(err)
		}
		sp := SamplingParams{Stop: []string{"left over"}, TopK: 99}
		if err := DecodeAddWith(frames, &got, &sp); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, roundtripOpts); diff != "" {
			t.Errorf("%s: DecodeAddWith differs from DecodeAdd (-want +got):\n%s", name, diff)
		}
		if want.Sampling != nil && got.Sampling != &sp {
			t.Errorf("%s: the sampling params are not the caller's", name)
		}
		if want.Sampling == nil && (sp.TopK != 99 || len(sp.Stop) != 1) {
			t.Errorf("%s: a request without sampling params wrote into them: %+v", name, sp)
		}
	}
}
