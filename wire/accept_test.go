package wire

import (
	"errors"
	"math"
	"testing"
)

// Line references are to the vLLM files named, as read for this change:
// sampling_params.py (SamplingParams, StructuredOutputsParams,
// RepetitionDetectionParams), lora/request.py, v1/serial_utils.py, v1/engine/core.py.

type acceptCase struct {
	name  string
	field string // the ValidationError's field
	edit  func(q *EngineCoreRequest)
}

// engineRejects are values an unmodified engine fails on while decoding the ADD:
// EngineAccepts and Validate must both refuse them.
var engineRejects = []acceptCase{
	// msgspec UTF-8-decodes every str (E1).
	{"request_id utf8", "request_id", func(q *EngineCoreRequest) { q.RequestID = "a\xffb" }},
	{"external_req_id utf8", "external_req_id", func(q *EngineCoreRequest) { q.ExternalReqID = SomeString("\xc3") }},
	{"cache_salt utf8", "cache_salt", func(q *EngineCoreRequest) { q.CacheSalt = SomeString("\xed\xa0\x80") }}, // a surrogate
	{"session_id utf8", "session_id", func(q *EngineCoreRequest) { q.SessionID = SomeString("\xff") }},
	{"trace_headers key", "trace_headers", func(q *EngineCoreRequest) { q.TraceHeaders = map[string]string{"\xff": "v"} }},
	{"trace_headers value", "trace_headers", func(q *EngineCoreRequest) { q.TraceHeaders = map[string]string{"k": "\xff"} }},
	{"stop utf8", "sampling_params.stop", func(q *EngineCoreRequest) { q.Sampling.Stop = []string{"\xff"} }},
	{"bad_words utf8", "sampling_params.bad_words", func(q *EngineCoreRequest) { q.Sampling.BadWords = []string{"\xff"} }},
	{"lora_name utf8", "lora_request.lora_name", func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{Name: "\xff", IntID: 1, Path: "/p"} }},
	{"lora_path utf8", "lora_request.lora_path", func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{Name: "a", IntID: 1, Path: "\xff"} }},
	{"base_model_name utf8", "lora_request.base_model_name", func(q *EngineCoreRequest) {
		q.LoRA = &LoRARequest{Name: "a", IntID: 1, Path: "/p", BaseModelName: SomeString("\xff")}
	}},
	{"str inside mm_features", "mm_features", func(q *EngineCoreRequest) { q.MMFeatures = mp([]any{"\xff"}) }},
	{"ext 1 (pickle) inside extra_args", "sampling_params.extra_args.k", func(q *EngineCoreRequest) {
		q.Sampling.ExtraArgs = append(mp([]kv{{"k", nil}})[:3:3], 0xd4, 1, 0) // serial_utils.py ext_hook: code != 3 raises
	}},
	// lora/request.py LoRARequest.__post_init__: "id must be > 0", assert lora_path.
	{"lora_int_id", "lora_request.lora_int_id", func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{Name: "a", Path: "/p"} }},
	{"lora_path empty", "lora_request.lora_path", func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{Name: "a", IntID: 1} }},
	{"tensorizer_config_dict not a map", "lora_request.tensorizer_config_dict", func(q *EngineCoreRequest) {
		q.LoRA = &LoRARequest{Name: "a", IntID: 1, Path: "/p", TensorizerConfigDict: mp([]any{1})}
	}},
	// serial_utils.py _decode_tensor: getattr(torch, dtype), view(dtype).view(shape) (E3).
	{"dtype unknown", "prompt_embeds.dtype", func(q *EngineCoreRequest) {
		q.PromptEmbeds = &Tensor{DType: "Tensor", Shape: []int64{1}, Data: make([]byte, 4)}
	}},
	{"dtype empty", "prompt_embeds.dtype", func(q *EngineCoreRequest) { q.PromptEmbeds = &Tensor{Shape: []int64{1}, Data: make([]byte, 4)} }},
	{"shape negative", "prompt_embeds.shape", func(q *EngineCoreRequest) {
		q.PromptEmbeds = &Tensor{DType: "float32", Shape: []int64{-1, 1}, Data: make([]byte, 4)}
	}},
	{"data short", "prompt_embeds.data", func(q *EngineCoreRequest) {
		q.PromptEmbeds = &Tensor{DType: "float32", Shape: []int64{2, 3}, Data: make([]byte, 20)}
	}},
	{"data not whole elements", "prompt_embeds.data", func(q *EngineCoreRequest) {
		q.PromptEmbeds = &Tensor{DType: "bfloat16", Shape: []int64{3}, Data: make([]byte, 5)}
	}},
	{"empty data, no zero dim", "prompt_embeds.data", func(q *EngineCoreRequest) { q.PromptEmbeds = &Tensor{DType: "int64", Shape: []int64{}} }}, // assert 0 in shape
	{"shape overflows", "prompt_embeds.data", func(q *EngineCoreRequest) {
		q.PromptEmbeds = &Tensor{DType: "uint8", Shape: []int64{1 << 32, 1 << 32, 1 << 2}, Data: make([]byte, 4)}
	}},
	// sampling_params.py SamplingParams._verify_args, one raise each.
	{"n 0", "sampling_params.n", func(q *EngineCoreRequest) { q.Sampling.N = 0 }},        // _verify_num_sequences: at least 1
	{"n huge", "sampling_params.n", func(q *EngineCoreRequest) { q.Sampling.N = 16385 }}, // at most VLLM_MAX_N_SEQUENCES
	{"presence", "sampling_params.presence_penalty", func(q *EngineCoreRequest) { q.Sampling.PresencePenalty = 2.5 }},
	{"frequency NaN", "sampling_params.frequency_penalty", func(q *EngineCoreRequest) { q.Sampling.FrequencyPenalty = math.NaN() }},
	{"repetition inf", "sampling_params.repetition_penalty", func(q *EngineCoreRequest) { q.Sampling.RepetitionPenalty = math.Inf(1) }},
	{"repetition 0", "sampling_params.repetition_penalty", func(q *EngineCoreRequest) { q.Sampling.RepetitionPenalty = 0 }},
	{"temperature NaN", "sampling_params.temperature", func(q *EngineCoreRequest) { q.Sampling.Temperature = math.NaN() }},
	{"temperature negative", "sampling_params.temperature", func(q *EngineCoreRequest) { q.Sampling.Temperature = -0.1 }},
	{"temperature > 2", "sampling_params.temperature", func(q *EngineCoreRequest) { q.Sampling.Temperature = 2.01 }},
	{"top_p 0", "sampling_params.top_p", func(q *EngineCoreRequest) { q.Sampling.TopP = 0 }},
	{"top_k -2", "sampling_params.top_k", func(q *EngineCoreRequest) { q.Sampling.TopK = -2 }},
	{"min_p", "sampling_params.min_p", func(q *EngineCoreRequest) { q.Sampling.MinP = 1.5 }},
	{"max_tokens 0", "sampling_params.max_tokens", func(q *EngineCoreRequest) { q.Sampling.MaxTokens = SomeInt(0) }},
	{"min_tokens negative", "sampling_params.min_tokens", func(q *EngineCoreRequest) { q.Sampling.MinTokens = -1 }},
	{"min_tokens > max_tokens", "sampling_params.min_tokens", func(q *EngineCoreRequest) { q.Sampling.MinTokens = 5 }},
	{"stream_interval", "sampling_params.stream_interval", func(q *EngineCoreRequest) { q.Sampling.StreamInterval = SomeInt(0) }},
	{"logprobs -2", "sampling_params.logprobs", func(q *EngineCoreRequest) { q.Sampling.Logprobs = SomeInt(-2) }},
	{"prompt_logprobs -2", "sampling_params.prompt_logprobs", func(q *EngineCoreRequest) { q.Sampling.PromptLogprobs = SomeInt(-2) }},
	{"stop empty string", "sampling_params.stop", func(q *EngineCoreRequest) { q.Sampling.Stop = []string{"x", ""} }}, // C3
	{"stop without detokenize", "sampling_params.stop", func(q *EngineCoreRequest) { q.Sampling.Stop, q.Sampling.Detokenize = []string{"x"}, false }},
	{"bad_words empty string", "sampling_params.bad_words", func(q *EngineCoreRequest) { q.Sampling.BadWords = []string{""} }},
	// __post_init__ around _verify_args.
	{"thinking_token_budget -2", "sampling_params.thinking_token_budget", func(q *EngineCoreRequest) { q.Sampling.ThinkingTokenBudget = SomeInt(-2) }}, // validate_thinking_token_budget
	{"greedy with n 2", "sampling_params.n", func(q *EngineCoreRequest) { q.Sampling.N, q.Sampling.Temperature = 2, 0 }},                               // _verify_greedy_sampling
	{"output_kind 3", "sampling_params.output_kind", func(q *EngineCoreRequest) { q.Sampling.OutputKind = 3 }},                                         // RequestOutputKind(3)
	// Typed decode of the raw fields (E4).
	{"logit_bias str key", "sampling_params.logit_bias", func(q *EngineCoreRequest) { q.Sampling.LogitBias = mp([]kv{{"5", 1.0}}) }}, // dict[int, float]
	{"logit_bias str value", "sampling_params.logit_bias", func(q *EngineCoreRequest) { q.Sampling.LogitBias = mp([]kv{{5, "x"}}) }},
	{"logit_bias array", "sampling_params.logit_bias", func(q *EngineCoreRequest) { q.Sampling.LogitBias = Raw{0x90} }},
	{"extra_args int key", "sampling_params.extra_args", func(q *EngineCoreRequest) { q.Sampling.ExtraArgs = mp([]kv{{1, 1}}) }}, // dict[str, Any]
	{"reasoning_parser_kwargs int key", "reasoning_parser_kwargs", func(q *EngineCoreRequest) { q.ReasoningParserKwargs = mp([]kv{{1, 1}}) }},
	{"_bad_words_token_ids flat", "sampling_params._bad_words_token_ids", func(q *EngineCoreRequest) { q.Sampling.BadWordsTokenIDs = mp([]any{1, 2}) }}, // list[list[int]]
	{"repetition_detection min > max", "sampling_params.repetition_detection", func(q *EngineCoreRequest) {
		q.Sampling.RepetitionDetection = mp([]kv{{"max_pattern_size", 2}, {"min_pattern_size", 3}, {"min_count", 2}}) // RepetitionDetectionParams.__post_init__
	}},
	{"repetition_detection min_count 1", "sampling_params.repetition_detection", func(q *EngineCoreRequest) {
		q.Sampling.RepetitionDetection = mp([]kv{{"max_pattern_size", 4}, {"min_count", 1}})
	}},
	{"repetition_detection str", "sampling_params.repetition_detection.min_count", func(q *EngineCoreRequest) {
		q.Sampling.RepetitionDetection = mp([]kv{{"max_pattern_size", 4}, {"min_count", "3"}}) // int field
	}},
	{"structured_outputs none set", "sampling_params.structured_outputs", func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = Raw{0x80} }}, // StructuredOutputsParams.__post_init__
	{"structured_outputs two set", "sampling_params.structured_outputs", func(q *EngineCoreRequest) {
		q.Sampling.StructuredOutputs = mp([]kv{{"regex", "a+"}, {"grammar", "g"}})
	}},
	{"structured_outputs choice not strs", "sampling_params.structured_outputs.choice", func(q *EngineCoreRequest) {
		q.Sampling.StructuredOutputs = mp([]kv{{"choice", []any{1}}}) // list[str] | None
	}},
	{"structured_outputs bool field nil", "sampling_params.structured_outputs.disable_any_whitespace", func(q *EngineCoreRequest) {
		q.Sampling.StructuredOutputs = mp([]kv{{"regex", "a"}, {"disable_any_whitespace", nil}}) // bool, not Optional
	}},
}

// frontendRejects pass the engine's decode but vLLM's frontend (or this project)
// refuses them: Validate must refuse them, EngineAccepts must not.
var frontendRejects = []acceptCase{
	{"n 2", "sampling_params.n", func(q *EngineCoreRequest) { q.Sampling.N = 2 }}, // project: fan out n yourself
	{"max_tokens unset", "sampling_params.max_tokens", func(q *EngineCoreRequest) { q.Sampling.MaxTokens = OptInt{} }},
	{"unknown key", "sampling_params.future_knob", func(q *EngineCoreRequest) { q.Sampling.Unknown = []RawField{{"future_knob", Raw{0x01}}} }},
	{"dtype alias", "prompt_embeds.dtype", func(q *EngineCoreRequest) {
		q.PromptEmbeds = &Tensor{DType: "float", Shape: []int64{1}, Data: make([]byte, 4)}
	}},
	{"lora_name empty", "lora_request.lora_name", func(q *EngineCoreRequest) { q.LoRA = &LoRARequest{IntID: 1, Path: "/p"} }},
	// _validate_structured_outputs.
	{"json_object false", "sampling_params.structured_outputs.json_object", func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = mp([]kv{{"json_object", false}}) }},
	{"json blank", "sampling_params.structured_outputs.json", func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = mp([]kv{{"json", " \n\x1f"}}) }},
	{"grammar blank", "sampling_params.structured_outputs.grammar", func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = mp([]kv{{"grammar", ""}}) }},
	{"choice empty", "sampling_params.structured_outputs.choice", func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = mp([]kv{{"choice", []any{}}}) }},
	{"regex NUL", "sampling_params.structured_outputs.regex", func(q *EngineCoreRequest) { q.Sampling.StructuredOutputs = mp([]kv{{"regex", "a\x00"}}) }},
	{"structured unknown key", "sampling_params.structured_outputs.backend", func(q *EngineCoreRequest) {
		q.Sampling.StructuredOutputs = mp([]kv{{"regex", "a"}, {"backend", "x"}})
	}},
	// _validate_allowed_token_ids, _validate_logprobs, _validate_trace_replay.
	{"allowed_token_ids empty", "sampling_params.allowed_token_ids", func(q *EngineCoreRequest) { q.Sampling.AllowedTokenIDs = []int64{} }},
	{"allowed_token_ids negative", "sampling_params.allowed_token_ids", func(q *EngineCoreRequest) { q.Sampling.AllowedTokenIDs = []int64{-1} }},
	{"logprob_token_ids > 128", "sampling_params.logprob_token_ids", func(q *EngineCoreRequest) { q.Sampling.LogprobTokenIDs = make([]int64, 129) }},
	{"logprobs != len(logprob_token_ids)", "sampling_params.logprob_token_ids", func(q *EngineCoreRequest) {
		q.Sampling.LogprobTokenIDs, q.Sampling.Logprobs = []int64{1, 2}, SomeInt(1)
	}},
	{"prompt_logprob_token_ids empty", "sampling_params.prompt_logprob_token_ids", func(q *EngineCoreRequest) { q.Sampling.PromptLogprobTokenIDs = []int64{} }},
	{"prompt_logprob_token_ids dup", "sampling_params.prompt_logprob_token_ids", func(q *EngineCoreRequest) { q.Sampling.PromptLogprobTokenIDs = []int64{3, 3} }},
	{"prompt_logprob_start negative", "sampling_params.prompt_logprob_start", func(q *EngineCoreRequest) {
		q.Sampling.PromptLogprobTokenIDs, q.Sampling.PromptLogprobStart = []int64{3}, SomeInt(-1)
	}},
	{"trace_decode_token_ids empty", "sampling_params.trace_decode_token_ids", func(q *EngineCoreRequest) { q.Sampling.TraceDecodeTokenIDs = []int64{} }},
	{"trace_decode_token_ids negative", "sampling_params.trace_decode_token_ids", func(q *EngineCoreRequest) { q.Sampling.TraceDecodeTokenIDs = []int64{-1} }},
	{"trace_decode with prompt_logprobs", "sampling_params.trace_decode_token_ids", func(q *EngineCoreRequest) {
		q.Sampling.TraceDecodeTokenIDs, q.Sampling.PromptLogprobs = []int64{5}, SomeInt(1)
	}},
	{"trace_decode with bad_words", "sampling_params.trace_decode_token_ids", func(q *EngineCoreRequest) {
		q.Sampling.TraceDecodeTokenIDs, q.Sampling.BadWords = []int64{5}, []string{"x"}
	}},
	// Project rules on the raw fields.
	{"logit_bias NaN", "sampling_params.logit_bias", func(q *EngineCoreRequest) { q.Sampling.LogitBias = mp([]kv{{5, math.NaN()}}) }},
	{"logit_bias negative id", "sampling_params.logit_bias", func(q *EngineCoreRequest) { q.Sampling.LogitBias = mp([]kv{{-5, 1.0}}) }},
	{"_bad_words_token_ids negative", "sampling_params._bad_words_token_ids", func(q *EngineCoreRequest) { q.Sampling.BadWordsTokenIDs = mp([]any{[]any{-1}}) }},
}

func checkField(t *testing.T, err error, field string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != field {
		t.Errorf("got %v, want a ValidationError for %s", err, field)
	}
}

func TestEngineAccepts(t *testing.T) {
	if err := EngineAccepts(goodRequest()); err != nil {
		t.Fatalf("good request: %v", err)
	}
	for _, tt := range engineRejects {
		t.Run(tt.name, func(t *testing.T) {
			q := goodRequest()
			tt.edit(q)
			checkField(t, EngineAccepts(q), tt.field)
			q = goodRequest()
			tt.edit(q)
			if q.Validate() == nil {
				t.Error("Validate accepted what the engine rejects")
			}
		})
	}
	for _, tt := range frontendRejects {
		t.Run("frontend/"+tt.name, func(t *testing.T) {
			q := goodRequest()
			tt.edit(q)
			if err := EngineAccepts(q); err != nil {
				t.Errorf("EngineAccepts refused what an engine accepts: %v", err)
			}
			checkField(t, q.Validate(), tt.field)
		})
	}
}

// TestEngineAcceptsValid: values at the edges that vLLM accepts must pass both.
func TestEngineAcceptsValid(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(q *EngineCoreRequest)
	}{
		{"top_k -1", func(q *EngineCoreRequest) { q.Sampling.TopK = -1 }},                 // "quietly accept -1 as disabled"
		{"logprobs -1", func(q *EngineCoreRequest) { q.Sampling.Logprobs = SomeInt(-1) }}, // -1: whole vocabulary
		{"tiny temperature", func(q *EngineCoreRequest) { q.Sampling.Temperature = 1e-3 }},
		{"thinking budget -1", func(q *EngineCoreRequest) { q.Sampling.ThinkingTokenBudget = SomeInt(-1) }},
		{"utf8 everywhere", func(q *EngineCoreRequest) {
			q.RequestID, q.TraceHeaders, q.Sampling.Stop = "réq-✓", map[string]string{"tráce": "✓"}, []string{"ß", "ß"}
		}},
		{"prompt_embeds empty", func(q *EngineCoreRequest) { q.PromptEmbeds = &Tensor{DType: "bfloat16", Shape: []int64{0, 4096}} }},
		{"prompt_embeds", func(q *EngineCoreRequest) {
			q.PromptEmbeds = &Tensor{DType: "float16", Shape: []int64{2, 3}, Data: make([]byte, 12)}
		}},
		{"lora", func(q *EngineCoreRequest) {
			q.LoRA = &LoRARequest{Name: "a", IntID: 1, Path: "/p", TensorizerConfigDict: mp([]kv{{"x", ext3{1}}, {2, nil}})}
		}},
		{"structured regex with options", func(q *EngineCoreRequest) {
			q.Sampling.StructuredOutputs = mp([]kv{{"regex", "a+"}, {"json", nil}, {"disable_any_whitespace", true}, {"_backend", "xgrammar"}})
		}},
		{"structured json map", func(q *EngineCoreRequest) {
			q.Sampling.StructuredOutputs = mp([]kv{{"json", []kv{{"type", "object"}}}})
		}},
		{"repetition_detection off", func(q *EngineCoreRequest) { q.Sampling.RepetitionDetection = mp([]kv{{"max_pattern_size", 0}}) }},
		{"repetition_detection on", func(q *EngineCoreRequest) {
			q.Sampling.RepetitionDetection = mp([]kv{{"max_pattern_size", 4}, {"min_pattern_size", 2}, {"min_count", 3}})
		}},
		{"logit_bias", func(q *EngineCoreRequest) { q.Sampling.LogitBias = mp([]kv{{5, 1.5}, {7, -100}}) }},
		{"empty non-nil raws", func(q *EngineCoreRequest) { // written as nil; must not panic
			q.KVHints, q.MMFeatures, q.ReasoningParserKwargs, q.Sampling.ExtraArgs, q.Sampling.LogitBias = Raw{}, Raw{}, Raw{}, Raw{}, Raw{}
		}},
		{"new sampling fields", func(q *EngineCoreRequest) {
			q.Sampling.PromptLogprobTokenIDs, q.Sampling.PromptLogprobStart, q.Sampling.TraceDecodeTokenIDs = []int64{4, 5}, SomeInt(2), []int64{9}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := goodRequest()
			tt.edit(q)
			if err := EngineAccepts(q); err != nil {
				t.Errorf("EngineAccepts: %v", err)
			}
			if err := q.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestPrepareChecksBeforeGreedyReset: vLLM runs _verify_args before the greedy
// reset (SamplingParams.__post_init__), so temperature=0 does not excuse top_p=0;
// Normalize would have hidden it (W2).
func TestPrepareChecksBeforeGreedyReset(t *testing.T) {
	for _, tt := range []struct {
		field string
		edit  func(p *SamplingParams)
	}{
		{"top_p", func(p *SamplingParams) { p.TopP = 0 }},
		{"top_k", func(p *SamplingParams) { p.TopK = -5 }},
		{"min_p", func(p *SamplingParams) { p.MinP = 2 }},
		{"n", func(p *SamplingParams) { p.N = 3 }},                                                 // _verify_greedy_sampling
		{"thinking_token_budget", func(p *SamplingParams) { p.ThinkingTokenBudget = SomeInt(-3) }}, // before _verify_args
		{"stop", func(p *SamplingParams) { p.Stop = []string{""} }},
	} {
		t.Run(tt.field, func(t *testing.T) {
			p := DefaultSamplingParams()
			p.Temperature, p.MaxTokens = 0, SomeInt(8)
			tt.edit(&p)
			hidden := p
			checkField(t, p.Prepare(), tt.field)
			hidden.Normalize()
			if tt.field == "top_p" && hidden.Validate() != nil && hidden.TopP != 1 {
				t.Error("expected Normalize to reset top_p (the reason Prepare exists)")
			}
		})
	}
	// On valid params Prepare is Normalize.
	p := DefaultSamplingParams()
	p.Temperature, p.TopP, p.MaxTokens, p.Stop, p.StopTokenIDs = 0.001, 0.5, SomeInt(8), []string{"ab", "ab"}, []int64{3, 3}
	p.SetEOS(SomeInt(2))
	n := p
	n.StopTokenIDs = []int64{3, 3}
	if err := p.Prepare(); err != nil {
		t.Fatal(err)
	}
	n.Normalize()
	if p.Temperature != 0.01 || len(p.Stop) != 2 || len(p.StopTokenIDs) != 1 || p.TopP != 0.5 || p.OutputTextBufferLength != 1 {
		t.Errorf("Prepare: %+v", p)
	}
	if !samplingEqual(p, n) {
		t.Errorf("Prepare and Normalize differ:\n%+v\n%+v", p, n)
	}
}

func samplingEqual(a, b SamplingParams) bool {
	x, _, _ := AppendAdd(nil, &EngineCoreRequest{Sampling: &a})
	y, _, _ := AppendAdd(nil, &EngineCoreRequest{Sampling: &b})
	return string(x) == string(y)
}

// TestSkipReadingPrefixCache: the newest __post_init__ sets it when prompt_logprobs
// or prompt_logprob_token_ids is set (W3).
func TestSkipReadingPrefixCache(t *testing.T) {
	for _, tt := range []struct {
		edit func(p *SamplingParams)
		want bool
	}{
		{func(p *SamplingParams) {}, false},
		{func(p *SamplingParams) { p.PromptLogprobs = SomeInt(0) }, true},
		{func(p *SamplingParams) { p.PromptLogprobTokenIDs = []int64{5} }, true},
	} {
		p := DefaultSamplingParams()
		tt.edit(&p)
		p.Normalize()
		if p.SkipReadingPrefixCache != (OptBool{tt.want, true}) {
			t.Errorf("%+v: skip_reading_prefix_cache %+v, want %v", p, p.SkipReadingPrefixCache, tt.want)
		}
	}
}

// TestCheckTorch: serial_utils.py _decode_tensor accepts what getattr(torch, dtype)
// resolves, viewed from exactly prod(shape)*itemsize bytes.
func TestCheckTorch(t *testing.T) {
	for _, tt := range []struct {
		t  Tensor
		ok bool
	}{
		{Tensor{DType: "float32", Shape: []int64{2, 2}, Data: make([]byte, 16)}, true},
		{Tensor{DType: "float", Shape: []int64{2, 2}, Data: make([]byte, 16)}, true}, // alias: getattr(torch, "float")
		{Tensor{DType: "bool", Shape: []int64{3}, Data: make([]byte, 3)}, true},
		{Tensor{DType: "complex128", Shape: []int64{1}, Data: make([]byte, 16)}, true},
		{Tensor{DType: "int8", Shape: []int64{}, Data: make([]byte, 1)}, true}, // a scalar
		{Tensor{DType: "int8", Shape: []int64{5, 0}}, true},
		{Tensor{DType: "int8", Shape: []int64{5, 0}, Data: make([]byte, 1)}, false},
		{Tensor{DType: "<f4", Shape: []int64{1}, Data: make([]byte, 4)}, false}, // numpy spelling: not a torch attribute
		{Tensor{DType: "qint8", Shape: []int64{1}, Data: make([]byte, 1)}, false},
		{Tensor{DType: "float64", Shape: []int64{1 << 62, 4}, Data: make([]byte, 8)}, false},
	} {
		if err := tt.t.CheckTorch(); (err == nil) != tt.ok {
			t.Errorf("%s %v %d bytes: %v, want ok=%v", tt.t.DType, tt.t.Shape, len(tt.t.Data), err, tt.ok)
		}
	}
	q := goodRequest()
	q.PromptEmbeds = &Tensor{DType: "float32", Shape: []int64{3}, Data: make([]byte, 8)}
	var ee *EncodeError
	if _, _, err := AppendAdd(nil, q); !errors.As(err, &ee) || ee.Field != "prompt_embeds" {
		t.Errorf("AppendAdd of a tensor the engine cannot view: %v", err)
	}
}
