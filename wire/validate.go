package wire

// Prepare, Normalize and Validate keep what we send from tripping an engine and make
// it what vLLM's Python frontend would send. The engine runs SamplingParams'
// __post_init__ (and so _verify_args) again when it decodes an ADD, in its input
// thread, where an exception is not answered per request. EngineAccepts (accept.go)
// holds vLLM's rules; Validate adds this project's; Prepare does what vLLM's
// SamplingParams.__post_init__ does in the frontend, checks included.
//
// Which to call: build the SamplingParams, SetEOS, then Prepare (not Normalize),
// then Validate on the request. Prepare is the only one that sees the caller's
// values before the greedy reset overwrites top_p/top_k/min_p, as vLLM's
// _verify_args does; Normalize after the fact would hide, for instance, top_p=0
// with temperature=0, which vLLM's frontend refuses.

import (
	"math"
	"slices"
	"unicode/utf8"
)

const (
	samplingEps        = 1e-5 // _SAMPLING_EPS: below this temperature is greedy
	minTemperature     = 1e-2 // _MAX_TEMP: positive temperatures are raised to this
	maxLogprobTokenIDs = 128  // MAX_LOGPROB_TOKEN_IDS
)

// SetEOS records the model's EOS ids the way update_from_generation_config does:
// primary becomes _eos_token_id (unless ignore_eos) and joins _all_stop_token_ids;
// the generation config's further EOS ids join _all_stop_token_ids and, unless
// ignore_eos, stop_token_ids. Call Normalize afterwards.
func (p *SamplingParams) SetEOS(primary OptInt, generationEOS ...int64) {
	if primary.Valid {
		p.AllStopTokenIDs = append(p.AllStopTokenIDs, primary.Value)
	}
	if !p.IgnoreEOS {
		p.EOSTokenID = primary
	}
	for _, id := range generationEOS {
		if primary.Valid && id == primary.Value {
			continue
		}
		p.AllStopTokenIDs = append(p.AllStopTokenIDs, id)
		if !p.IgnoreEOS && !slices.Contains(p.StopTokenIDs, id) {
			p.StopTokenIDs = append(p.StopTokenIDs, id)
		}
	}
}

// Prepare runs SamplingParams.__post_init__ as vLLM's frontend does when it builds
// the params: the rewrites that come before _verify_args (seed -1 and
// thinking_token_budget -1 become unset, a positive temperature below 0.01 is raised
// to it, stop/stop_token_ids/bad_words become [] when unset, stop_token_ids and
// bad_words lose later duplicates, output_text_buffer_length is derived from the
// stop strings), then _verify_args on those values, then the rest (see Normalize).
// On an error p is left with the first rewrites applied and must not be sent.
func (p *SamplingParams) Prepare() error {
	if p.ThinkingTokenBudget.Valid && p.ThinkingTokenBudget.Value < -1 {
		return invalid("thinking_token_budget", "must be non-negative or -1") // validate_thinking_token_budget
	}
	p.preVerify()
	if err := p.verifyArgs(p.Temperature); err != nil {
		return err
	}
	p.postVerify()
	if p.Temperature < samplingEps && p.N > 1 { // _verify_greedy_sampling
		return invalid("n", "must be 1 when using greedy sampling, got "+itoa(int(p.N)))
	}
	return nil
}

// Normalize applies SamplingParams.__post_init__'s rewrites without its checks, so
// that the map we send equals what a Python frontend sends. It is what Prepare does
// minus the checks, kept for callers that normalise params already checked, such as
// a request a vLLM client filled; new callers want Prepare. Beyond Prepare's first
// rewrites it resets top_p/top_k/min_p for greedy sampling, makes
// _all_stop_token_ids the sorted set of itself, stop_token_ids and the EOS id,
// clears _eos_token_id when ignore_eos, and defaults skip_reading_prefix_cache to
// "prompt logprobs asked". It is idempotent.
func (p *SamplingParams) Normalize() {
	p.preVerify()
	p.postVerify()
}

// preVerify is __post_init__ up to _verify_args.
func (p *SamplingParams) preVerify() {
	if p.Temperature > 0 && p.Temperature < minTemperature {
		p.Temperature = minTemperature
	}
	if p.Seed.Valid && p.Seed.Value == -1 {
		p.Seed = OptInt{}
	}
	if p.ThinkingTokenBudget.Valid && p.ThinkingTokenBudget.Value == -1 {
		p.ThinkingTokenBudget = OptInt{}
	}
	// stop keeps its duplicates: vLLM only turns None into [] (and a str into [str],
	// which the decoder already did); stop_token_ids and bad_words are deduplicated.
	if p.Stop == nil {
		p.Stop = []string{}
	}
	p.StopTokenIDs = dedupOrEmpty(p.StopTokenIDs)
	p.BadWords = dedupOrEmpty(p.BadWords)
	if len(p.Stop) > 0 && !p.IncludeStopStrInOutput {
		longest := 0
		for _, s := range p.Stop {
			longest = max(longest, utf8.RuneCountInString(s)) // Python len() counts code points
		}
		p.OutputTextBufferLength = int64(longest - 1)
	}
}

// postVerify is __post_init__ after _verify_args, plus what
// update_from_generation_config leaves (the EOS id in _all_stop_token_ids).
func (p *SamplingParams) postVerify() {
	if p.Temperature < samplingEps {
		p.TopP, p.TopK, p.MinP = 1, 0, 0
	}
	// A fresh slice: the caller's may be shared with other requests.
	all := make([]int64, 0, len(p.AllStopTokenIDs)+len(p.StopTokenIDs)+1)
	all = append(append(all, p.AllStopTokenIDs...), p.StopTokenIDs...)
	if p.EOSTokenID.Valid {
		all = append(all, p.EOSTokenID.Value)
	}
	slices.Sort(all)
	p.AllStopTokenIDs = slices.Compact(all)
	if len(p.AllStopTokenIDs) == 0 {
		p.AllStopTokenIDs = nil // the empty set, as a decode gives it
	}
	if p.IgnoreEOS {
		p.EOSTokenID = OptInt{}
	}
	if !p.SkipReadingPrefixCache.Valid {
		// The newest __post_init__: prompt_logprobs or prompt_logprob_token_ids.
		p.SkipReadingPrefixCache = OptBool{Value: p.PromptLogprobs.Valid || p.PromptLogprobTokenIDs != nil, Valid: true}
	}
}

// dedupOrEmpty drops later duplicates (Python's list(dict.fromkeys(x))) and turns nil
// into a non-nil empty slice.
func dedupOrEmpty[T comparable](v []T) []T {
	if v == nil {
		return []T{}
	}
	out := v[:0:0]
	for i, x := range v {
		if !slices.Contains(v[:i], x) {
			out = append(out, x)
		}
	}
	if len(out) == len(v) {
		return v
	}
	return out
}

func invalid(field, msg string) error { return &ValidationError{Field: field, Msg: msg} }

// Validate reports the first value an engine would reject (EngineAccepts' rules for
// the sampling params), or that vLLM's frontend refuses in SamplingParams.verify
// where no model config is needed, or that this project never sends: n must be 1
// (fan out yourself), max_tokens must be set, _eos_token_id must be set unless
// ignore_eos, every stop id must be in _all_stop_token_ids (run Prepare first), and
// no key we do not know may travel in Unknown.
func (p *SamplingParams) Validate() error {
	if err := p.engineAccepts(); err != nil {
		return err
	}
	return p.validateProject()
}

// validateProject is Validate without EngineAccepts' rules, which the request's
// Validate has run already.
func (p *SamplingParams) validateProject() error {
	switch {
	case p.N != 1:
		return invalid("n", "must be 1 on the wire, got "+itoa(int(p.N)))
	case !p.MaxTokens.Valid:
		return invalid("max_tokens", "must be set (the engine needs a bound)")
	case p.RoutedExpertsPromptStart < 0:
		return invalid("routed_experts_prompt_start", "must be >= 0")
	case p.OutputTextBufferLength < 0:
		return invalid("output_text_buffer_length", "must be >= 0")
	case len(p.Unknown) > 0:
		return invalid(p.Unknown[0].Key, "is not a SamplingParams field this version knows; refusing rather than guessing its type")
	}
	for _, f := range [...]struct {
		name string
		ids  []int64
	}{
		{"stop_token_ids", p.StopTokenIDs}, {"_all_stop_token_ids", p.AllStopTokenIDs},
		{"logprob_token_ids", p.LogprobTokenIDs}, {"allowed_token_ids", p.AllowedTokenIDs},
		{"prompt_logprob_token_ids", p.PromptLogprobTokenIDs}, {"trace_decode_token_ids", p.TraceDecodeTokenIDs},
	} {
		if slices.ContainsFunc(f.ids, func(id int64) bool { return id < 0 }) {
			return invalid(f.name, "token ids must be non-negative")
		}
	}
	if err := p.validateFrontend(); err != nil {
		return err
	}
	if p.EOSTokenID.Valid {
		if p.EOSTokenID.Value < 0 {
			return invalid("_eos_token_id", "must be non-negative")
		}
		if !slices.Contains(p.AllStopTokenIDs, p.EOSTokenID.Value) {
			return invalid("_all_stop_token_ids", "must contain _eos_token_id (run Prepare)")
		}
	} else if !p.IgnoreEOS {
		return invalid("_eos_token_id", "must be set unless ignore_eos (SetEOS)")
	}
	for _, id := range p.StopTokenIDs {
		if !slices.Contains(p.AllStopTokenIDs, id) {
			return invalid("_all_stop_token_ids", "must contain every stop_token_ids entry (run Prepare)")
		}
	}
	if err := checkStructuredOutputs(p.StructuredOutputs, true); err != nil {
		return err
	}
	if err := checkLogitBias(p.LogitBias, true); err != nil {
		return err
	}
	return checkBadWordsTokenIDs(p.BadWordsTokenIDs, true)
}

// validateFrontend is the part of SamplingParams.verify (vllm/sampling_params.py)
// that needs no model config: _validate_logprobs, _validate_allowed_token_ids and
// _validate_trace_replay without their vocabulary bounds.
func (p *SamplingParams) validateFrontend() error {
	if p.AllowedTokenIDs != nil && len(p.AllowedTokenIDs) == 0 {
		return invalid("allowed_token_ids", "must not be empty when set") // _validate_allowed_token_ids
	}
	if n := len(p.LogprobTokenIDs); n > maxLogprobTokenIDs { // _validate_logprobs
		return invalid("logprob_token_ids", "at most 128 ids")
	} else if p.LogprobTokenIDs != nil && p.Logprobs.Valid && p.Logprobs.Value != int64(n) {
		return invalid("logprob_token_ids", "logprobs must equal len(logprob_token_ids) when both are set")
	}
	if ids := p.PromptLogprobTokenIDs; ids != nil { // _validate_logprobs
		if len(ids) == 0 {
			return invalid("prompt_logprob_token_ids", "must not be empty")
		}
		for i, id := range ids {
			if slices.Contains(ids[:i], id) {
				return invalid("prompt_logprob_token_ids", "must not contain duplicates")
			}
		}
		if p.PromptLogprobStart.Valid && p.PromptLogprobStart.Value < 0 {
			return invalid("prompt_logprob_start", "must be non-negative")
		}
	}
	if ids := p.TraceDecodeTokenIDs; ids != nil { // _validate_trace_replay
		switch {
		case len(ids) == 0:
			return invalid("trace_decode_token_ids", "must be a non-empty list")
		case p.N != 1:
			return invalid("trace_decode_token_ids", "requires n=1")
		case p.PromptLogprobs.Valid:
			return invalid("trace_decode_token_ids", "is not supported with prompt_logprobs")
		case p.StructuredOutputs != nil:
			return invalid("trace_decode_token_ids", "is not supported with structured outputs")
		case p.RepetitionDetection != nil:
			return invalid("trace_decode_token_ids", "is not supported with repetition_detection")
		case p.ThinkingTokenBudget.Valid:
			return invalid("trace_decode_token_ids", "is not supported with thinking_token_budget")
		case len(p.BadWords) > 0:
			return invalid("trace_decode_token_ids", "is not supported with bad_words")
		}
	}
	return nil
}

// CheckPromptLen rejects a prompt longer than the engine's max_model_len (from its
// registration), which vLLM's Python frontend refuses before sending.
func (q *EngineCoreRequest) CheckPromptLen(maxModelLen int64) error {
	if int64(len(q.PromptTokenIDs)) > maxModelLen {
		return invalid("prompt_token_ids", "prompt of "+itoa(len(q.PromptTokenIDs))+" tokens is longer than max_model_len "+itoa(int(maxModelLen)))
	}
	return nil
}

// Validate checks a request before it is encoded and sent: everything EngineAccepts
// checks, the sampling parameters' project and frontend rules (SamplingParams.
// Validate), and the project's rules for the request itself.
func (q *EngineCoreRequest) Validate() error {
	switch {
	case q.RequestID == "":
		return invalid("request_id", "must not be empty")
	case (q.Sampling == nil) == !q.IsPooling(), q.Pooling != nil && q.PoolingParams != nil:
		return invalid("sampling_params", "exactly one of sampling_params and pooling_params must be set")
	case q.PromptTokenIDs == nil && q.PromptEmbeds == nil:
		return invalid("prompt_token_ids", "must be set unless prompt_embeds is")
	case q.PromptEmbeds == nil && len(q.PromptTokenIDs) == 0:
		return invalid("prompt_token_ids", "must not be empty")
	case slices.ContainsFunc(q.PromptTokenIDs, func(id int64) bool { return id < 0 }):
		return invalid("prompt_token_ids", "token ids must be non-negative")
	case math.IsNaN(q.ArrivalTime) || math.IsInf(q.ArrivalTime, 0):
		return invalid("arrival_time", "must be finite")
	case q.DataParallelRank.Valid && q.DataParallelRank.Value < 0:
		return invalid("data_parallel_rank", "must be non-negative")
	case q.ClientIndex < 0:
		return invalid("client_index", "must be non-negative")
	case q.CurrentWave < 0:
		return invalid("current_wave", "must be non-negative")
	case q.LoRA != nil && q.LoRA.Name == "":
		return invalid("lora_request.lora_name", "must not be empty")
	case len(q.KVHints) > 0 && (kindOf(q.KVHints[0]) != kindMap && q.KVHints[0] != 0xc0 || !validRaw(q.KVHints)):
		return invalid("kv_hints", "must be one well-formed msgpack map or nil")
	}
	if err := EngineAccepts(q); err != nil {
		return err
	}
	if t := q.PromptEmbeds; t != nil {
		if _, canonical, _ := TorchDTypeSize(t.DType); !canonical {
			return invalid("prompt_embeds.dtype", "must be the canonical torch name (float32, not float), got "+quote(t.DType))
		}
	}
	if q.Sampling != nil {
		return prefixed("sampling_params.", q.Sampling.validateProject())
	}
	return nil
}
