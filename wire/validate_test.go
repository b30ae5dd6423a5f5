package wire

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goodRequest is a request as the frontend builds it: defaults, max_tokens, EOS.
func goodRequest() *EngineCoreRequest {
	p := DefaultSamplingParams()
	p.MaxTokens = SomeInt(4)
	p.SetEOS(SomeInt(2))
	p.Normalize()
	return &EngineCoreRequest{RequestID: "req-1", PromptTokenIDs: []int64{1, 2, 3}, Sampling: &p, ArrivalTime: 1767225600.25}
}

// TestNormalizeMatchesPython: Normalize turns a bare request into the map vLLM's
// Python frontend sends (the newest release's fixture add_minimal_python_shape).
func TestNormalizeMatchesPython(t *testing.T) {
	q := goodRequest()
	q.RequestID = "req-1-a1b2c3d4"
	q.ExternalReqID = SomeString("req-1")
	body, _, err := AppendAdd(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range loadVersionFixtures(t, "newest").Fixtures {
		if f.Name == "add_minimal_python_shape" {
			if d := cmp.Diff(hexAll(f.frames[1:]), hexAll([][]byte{body})); d != "" {
				t.Errorf("(-python +ours):\n%s", d)
			}
			return
		}
	}
	t.Fatal("fixture missing")
}

func TestNormalize(t *testing.T) {
	p := DefaultSamplingParams()
	p.Temperature = 0.001
	p.Seed = SomeInt(-1)
	p.ThinkingTokenBudget = SomeInt(-1)
	p.Stop = []string{"ab", "héllo", "ab"}
	p.StopTokenIDs = []int64{14, 13, 14}
	p.IgnoreEOS = true
	p.PromptLogprobs = SomeInt(1)
	p.SetEOS(SomeInt(2), 2, 7)
	p.Normalize()
	want := DefaultSamplingParams()
	want.Temperature = 0.01
	want.Stop = []string{"ab", "héllo", "ab"} // __post_init__ does not dedupe stop (C1)
	want.StopTokenIDs = []int64{14, 13}
	want.IgnoreEOS = true
	want.PromptLogprobs = SomeInt(1)
	want.OutputTextBufferLength = 4 // len("héllo") - 1 in code points
	want.AllStopTokenIDs = []int64{2, 7, 13, 14}
	want.BadWords = []string{}
	want.SkipReadingPrefixCache = OptBool{true, true}
	if d := cmp.Diff(want, p); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	again := p
	again.Normalize()
	if d := cmp.Diff(p, again); d != "" {
		t.Errorf("not idempotent:\n%s", d)
	}
	g := DefaultSamplingParams()
	g.Temperature, g.TopP, g.TopK, g.MinP = 0, 0.5, 5, 0.1
	g.Normalize()
	if g.TopP != 1 || g.TopK != 0 || g.MinP != 0 {
		t.Errorf("greedy reset: %+v", g)
	}
}

func TestValidate(t *testing.T) {
	if err := goodRequest().Validate(); err != nil {
		t.Fatalf("good request: %v", err)
	}
	tests := []struct {
		field string
		edit  func(q *EngineCoreRequest)
	}{
		{"request_id", func(q *EngineCoreRequest) { q.RequestID = "" }},
		{"sampling_params", func(q *EngineCoreRequest) { q.Sampling = nil }},
		{"prompt_token_ids", func(q *EngineCoreRequest) { q.PromptTokenIDs = []int64{1, -1} }},
		{"prompt_token_ids", func(q *EngineCoreRequest) { q.PromptTokenIDs = []int64{} }},
		{"arrival_time", func(q *EngineCoreRequest) { q.ArrivalTime = math.NaN() }},
		{"data_parallel_rank", func(q *EngineCoreRequest) { q.DataParallelRank = SomeInt(-1) }},
		{"mm_features", func(q *EngineCoreRequest) { q.MMFeatures = Raw{0x92, 0x01} }},
		{"kv_hints", func(q *EngineCoreRequest) { q.KVHints = Raw{0x90} }},
		{"lora_request.lora_int_id", func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{Name: "a", Path: "/p"} }},
		{"lora_request.lora_path", func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{Name: "a", IntID: 1} }},
		{"sampling_params.n", func(q *EngineCoreRequest) { q.Sampling.N = 2 }},
		{"sampling_params.presence_penalty", func(q *EngineCoreRequest) { q.Sampling.PresencePenalty = 2.5 }},
		{"sampling_params.frequency_penalty", func(q *EngineCoreRequest) { q.Sampling.FrequencyPenalty = math.NaN() }},
		{"sampling_params.repetition_penalty", func(q *EngineCoreRequest) { q.Sampling.RepetitionPenalty = 0 }},
		{"sampling_params.repetition_penalty", func(q *EngineCoreRequest) { q.Sampling.RepetitionPenalty = math.Inf(1) }},
		{"sampling_params.temperature", func(q *EngineCoreRequest) { q.Sampling.Temperature = 2.01 }},
		{"sampling_params.temperature", func(q *EngineCoreRequest) { q.Sampling.Temperature = -0.1 }},
		{"sampling_params.top_p", func(q *EngineCoreRequest) { q.Sampling.TopP = 0 }},
		{"sampling_params.top_k", func(q *EngineCoreRequest) { q.Sampling.TopK = -2 }},
		{"sampling_params.min_p", func(q *EngineCoreRequest) { q.Sampling.MinP = 1.5 }},
		{"sampling_params.max_tokens", func(q *EngineCoreRequest) { q.Sampling.MaxTokens = SomeInt(0) }},
		{"sampling_params.max_tokens", func(q *EngineCoreRequest) { q.Sampling.MaxTokens = OptInt{} }},
		{"sampling_params.min_tokens", func(q *EngineCoreRequest) { q.Sampling.MinTokens = 5 }},
		{"sampling_params.stream_interval", func(q *EngineCoreRequest) { q.Sampling.StreamInterval = SomeInt(0) }},
		{"sampling_params.logprobs", func(q *EngineCoreRequest) { q.Sampling.Logprobs = SomeInt(-2) }},
		{"sampling_params.output_kind", func(q *EngineCoreRequest) { q.Sampling.OutputKind = 3 }},
		{"sampling_params.stop", func(q *EngineCoreRequest) { q.Sampling.Stop = []string{""} }},
		{"sampling_params.stop", func(q *EngineCoreRequest) { q.Sampling.Stop, q.Sampling.Detokenize = []string{"x"}, false }},
		{"sampling_params.bad_words", func(q *EngineCoreRequest) { q.Sampling.BadWords = []string{""} }},
		{"sampling_params.stop_token_ids", func(q *EngineCoreRequest) { q.Sampling.StopTokenIDs = []int64{-5} }},
		{"sampling_params._all_stop_token_ids", func(q *EngineCoreRequest) { q.Sampling.StopTokenIDs = []int64{9} }},
		{"sampling_params._all_stop_token_ids", func(q *EngineCoreRequest) { q.Sampling.AllStopTokenIDs = nil }},
		{"sampling_params._eos_token_id", func(q *EngineCoreRequest) { q.Sampling.EOSTokenID = OptInt{} }},
		{"sampling_params.allowed_token_ids", func(q *EngineCoreRequest) { q.Sampling.AllowedTokenIDs = []int64{} }},
		{"sampling_params.logprob_token_ids", func(q *EngineCoreRequest) { q.Sampling.LogprobTokenIDs = make([]int64, 129) }},
		{"sampling_params.structured_outputs", func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = Raw{0x80} }},
		{"sampling_params.repetition_detection", func(q *EngineCoreRequest) {
			q.Sampling.RepetitionDetection = mapForTest(map[string]int64{"max_pattern_size": 4, "min_count": 1})
		}},
		{"sampling_params.logit_bias", func(q *EngineCoreRequest) { q.Sampling.LogitBias = Raw{0x90} }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			q := goodRequest()
			tt.edit(q)
			err := q.Validate()
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field {
				t.Errorf("got %v, want a ValidationError for %s", err, tt.field)
			}
		})
	}
	q := goodRequest()
	q.Sampling.IgnoreEOS, q.Sampling.EOSTokenID = true, OptInt{}
	if err := q.Validate(); err != nil {
		t.Errorf("ignore_eos without EOS: %v", err)
	}
	q.Sampling.StructuredOutputs = mp([]kv{{"json_object", true}})
	if err := q.Validate(); err != nil {
		t.Errorf("one structured constraint: %v", err)
	}
}

// mapForTest builds a small {str: int} map.
func mapForTest(m map[string]int64) Raw {
	b := appendMapHeader(nil, len(m))
	for k, v := range m {
		b = appendInt(appendStr(b, k), v)
	}
	return b
}

func TestCheckPromptLen(t *testing.T) {
	q := goodRequest()
	if q.CheckPromptLen(3) != nil || q.CheckPromptLen(2) == nil {
		t.Error("prompt of 3 tokens: max_model_len 3 must pass, 2 must fail")
	}
}

func TestIdentity(t *testing.T) {
	for _, tt := range []struct {
		rank int
		b    []byte
	}{{0, []byte{0, 0}}, {1, []byte{1, 0}}, {256, []byte{0, 1}}, {65535, []byte{0xff, 0xff}}} {
		id := IdentityOf(tt.rank)
		if string(id.Bytes()) != string(tt.b) || id.Rank() != tt.rank {
			t.Errorf("rank %d: %x", tt.rank, id.Bytes())
		}
		if p, ok := ParseIdentity(tt.b); !ok || p != id {
			t.Errorf("parse %x", tt.b)
		}
	}
	if _, ok := ParseIdentity([]byte{1}); ok {
		t.Error("1-byte identity accepted")
	}
}

func TestStopReasonValue(t *testing.T) {
	if StopOnToken(13).Value() != int64(13) || StopOnText("x").Value() != "x" || (StopReason{}).Value() != nil {
		t.Error("StopReason.Value")
	}
}

// TestNormalizeFixedPointOnPython: what vLLM's Python frontend sent is already
// normalized, so Normalize leaves it unchanged (and Validate accepts those with EOS).
func TestNormalizeFixedPointOnPython(t *testing.T) {
	for _, f := range loadGolden(t) {
		switch f.Name {
		case "add_minimal_python_shape", "add_rich_sampling", "add_default_sampling", "add_ignore_eos", "add_short_9_fields":
		default:
			continue
		}
		var q EngineCoreRequest
		if err := DecodeAdd(f.frames[1:], &q); err != nil {
			t.Fatal(err)
		}
		p := *q.Sampling
		p.Normalize()
		if d := cmp.Diff(*q.Sampling, p); d != "" {
			t.Errorf("%s: Normalize changed Python's params (-python +normalized):\n%s", f.Name, d)
		}
		if err := q.Validate(); err != nil && f.Name != "add_default_sampling" {
			t.Errorf("%s: %v", f.Name, err)
		}
	}
}
