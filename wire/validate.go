package wire

// Normalize and Validate keep what we send from tripping an engine. The engine runs
// SamplingParams.__post_init__ (and so _verify_args) again when it decodes an ADD, in
// its input thread, where an exception is not answered per request. Validate mirrors
// those checks (vllm/sampling_params.py) plus the wire rules of this project; Normalize
// does what vLLM's Python frontend does to a request before sending it.

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

// Normalize applies SamplingParams.__post_init__'s rewrites so that the map we send
// equals what a Python frontend sends: stop/stop_token_ids/bad_words become [] when
// unset (duplicates dropped), seed -1 and thinking_token_budget -1 become unset, tiny
// positive temperatures are raised to 0.01, greedy sampling resets top_p/top_k/min_p,
// output_text_buffer_length is derived from the stop strings, _all_stop_token_ids
// gains stop_token_ids and the EOS id (as a sorted set), _eos_token_id is cleared
// when ignore_eos, and skip_reading_prefix_cache defaults to "prompt logprobs asked".
// It is idempotent.
func (p *SamplingParams) Normalize() {
	if p.Temperature > 0 && p.Temperature < minTemperature {
		p.Temperature = minTemperature
	}
	if p.Seed.Valid && p.Seed.Value == -1 {
		p.Seed = OptInt{}
	}
	if p.ThinkingTokenBudget.Valid && p.ThinkingTokenBudget.Value == -1 {
		p.ThinkingTokenBudget = OptInt{}
	}
	p.Stop = dedupOrEmpty(p.Stop)
	p.StopTokenIDs = dedupOrEmpty(p.StopTokenIDs)
	p.BadWords = dedupOrEmpty(p.BadWords)
	if len(p.Stop) > 0 && !p.IncludeStopStrInOutput {
		longest := 0
		for _, s := range p.Stop {
			longest = max(longest, utf8.RuneCountInString(s)) // Python len() counts code points
		}
		p.OutputTextBufferLength = int64(longest - 1)
	}
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
		p.SkipReadingPrefixCache = OptBool{Value: p.PromptLogprobs.Valid, Valid: true}
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

// Validate reports the first value an engine would reject in SamplingParams'
// post-init, or that this project never sends: n must be 1 (fan out yourself),
// max_tokens must be set, _eos_token_id must be set unless ignore_eos, and every
// stop id must be in _all_stop_token_ids (run Normalize first).
func (p *SamplingParams) Validate() error {
	switch {
	case p.N != 1:
		return invalid("n", "must be 1 on the wire, got "+itoa(int(p.N)))
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2):
		return invalid("presence_penalty", "must be in [-2, 2]")
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return invalid("frequency_penalty", "must be in [-2, 2]")
	case math.IsInf(p.RepetitionPenalty, 0) || !(p.RepetitionPenalty > 0):
		return invalid("repetition_penalty", "must be a finite number greater than zero")
	case !(p.Temperature >= 0 && p.Temperature <= 2):
		return invalid("temperature", "must be in [0, 2]")
	case !(p.TopP > 0 && p.TopP <= 1):
		return invalid("top_p", "must be in (0, 1]")
	case p.TopK < -1:
		return invalid("top_k", "must be 0 or -1 (disabled), or at least 1")
	case !(p.MinP >= 0 && p.MinP <= 1):
		return invalid("min_p", "must be in [0, 1]")
	case !p.MaxTokens.Valid:
		return invalid("max_tokens", "must be set (the engine needs a bound)")
	case p.MaxTokens.Value < 1:
		return invalid("max_tokens", "must be at least 1, got "+itoa(int(p.MaxTokens.Value)))
	case p.MinTokens < 0:
		return invalid("min_tokens", "must be >= 0")
	case p.MinTokens > p.MaxTokens.Value:
		return invalid("min_tokens", "must be <= max_tokens")
	case p.StreamInterval.Valid && p.StreamInterval.Value < 1:
		return invalid("stream_interval", "must be at least 1")
	case p.Logprobs.Valid && p.Logprobs.Value < -1:
		return invalid("logprobs", "must be non-negative or -1")
	case p.PromptLogprobs.Valid && p.PromptLogprobs.Value < -1:
		return invalid("prompt_logprobs", "must be non-negative or -1")
	case p.OutputKind < 0 || p.OutputKind > 2:
		return invalid("output_kind", "must be 0 (CUMULATIVE), 1 (DELTA) or 2 (FINAL_ONLY)")
	case p.ThinkingTokenBudget.Valid && p.ThinkingTokenBudget.Value < -1:
		return invalid("thinking_token_budget", "must be non-negative or -1")
	case p.RoutedExpertsPromptStart < 0:
		return invalid("routed_experts_prompt_start", "must be >= 0")
	case p.OutputTextBufferLength < 0:
		return invalid("output_text_buffer_length", "must be >= 0")
	}
	if slices.Contains(p.Stop, "") {
		return invalid("stop", "cannot contain an empty string")
	}
	if len(p.Stop) > 0 && !p.Detokenize {
		return invalid("stop", "stop strings need detokenize")
	}
	if slices.Contains(p.BadWords, "") {
		return invalid("bad_words", "cannot contain an empty string")
	}
	for _, f := range []struct {
		name string
		ids  []int64
	}{{"stop_token_ids", p.StopTokenIDs}, {"_all_stop_token_ids", p.AllStopTokenIDs}, {"logprob_token_ids", p.LogprobTokenIDs}, {"allowed_token_ids", p.AllowedTokenIDs}} {
		if slices.ContainsFunc(f.ids, func(id int64) bool { return id < 0 }) {
			return invalid(f.name, "token ids must be non-negative")
		}
	}
	if p.AllowedTokenIDs != nil && len(p.AllowedTokenIDs) == 0 {
		return invalid("allowed_token_ids", "must not be empty when set")
	}
	if n := len(p.LogprobTokenIDs); n > maxLogprobTokenIDs {
		return invalid("logprob_token_ids", "at most 128 ids")
	} else if p.LogprobTokenIDs != nil && p.Logprobs.Valid && p.Logprobs.Value != int64(n) {
		return invalid("logprob_token_ids", "logprobs must equal len(logprob_token_ids) when both are set")
	}
	if p.EOSTokenID.Valid {
		if p.EOSTokenID.Value < 0 {
			return invalid("_eos_token_id", "must be non-negative")
		}
		if !slices.Contains(p.AllStopTokenIDs, p.EOSTokenID.Value) {
			return invalid("_all_stop_token_ids", "must contain _eos_token_id (run Normalize)")
		}
	} else if !p.IgnoreEOS {
		return invalid("_eos_token_id", "must be set unless ignore_eos (SetEOS)")
	}
	for _, id := range p.StopTokenIDs {
		if !slices.Contains(p.AllStopTokenIDs, id) {
			return invalid("_all_stop_token_ids", "must contain every stop_token_ids entry (run Normalize)")
		}
	}
	return p.validateRaw()
}

// validateRaw checks the undecoded fields: well-formed, of the declared shape, and
// passing the post-init checks of the structs they decode into on the engine.
func (p *SamplingParams) validateRaw() error {
	for _, f := range []struct {
		name string
		v    Raw
		k    kind
	}{
		{"structured_outputs", p.StructuredOutputs, kindMap},
		{"logit_bias", p.LogitBias, kindMap},
		{"extra_args", p.ExtraArgs, kindMap},
		{"_bad_words_token_ids", p.BadWordsTokenIDs, kindArray},
		{"repetition_detection", p.RepetitionDetection, kindMap},
	} {
		if err := checkRaw(f.name, f.v, f.k); err != nil {
			return err
		}
	}
	for _, u := range p.Unknown {
		if !validRaw(u.Value) {
			return invalid(u.Key, "not one well-formed msgpack value")
		}
	}
	if p.StructuredOutputs != nil {
		set := 0
		eachEntry(p.StructuredOutputs, func(k string, r *reader) {
			switch k {
			case "json", "regex", "choice", "grammar", "json_object", "structural_tag":
				if r.peek() != kindNil {
					set++
				}
			}
		})
		if set != 1 {
			return invalid("structured_outputs", "exactly one constraint (json, regex, choice, grammar, json_object, structural_tag) must be set")
		}
	}
	if p.RepetitionDetection != nil {
		var maxP, minP, minC int64
		eachEntry(p.RepetitionDetection, func(k string, r *reader) {
			switch k {
			case "max_pattern_size":
				maxP, _ = r.int()
			case "min_pattern_size":
				minP, _ = r.int()
			case "min_count":
				minC, _ = r.int()
			}
		})
		if maxP < 0 || minP < 0 || minP > maxP || (maxP > 0 && minC < 2) {
			return invalid("repetition_detection", "need 0 <= min_pattern_size <= max_pattern_size and min_count >= 2 when enabled")
		}
	}
	return nil
}

// checkRaw accepts nil, or one well-formed value of kind k.
func checkRaw(name string, v Raw, k kind) error {
	if v == nil {
		return nil
	}
	if kindOf(v[0]) != k && kindOf(v[0]) != kindNil || !validRaw(v) {
		return invalid(name, "must be one well-formed msgpack "+k.String()+" or nil")
	}
	return nil
}

// eachEntry calls f for every str-keyed entry of a (validated) raw map, with the
// reader positioned at the value; values f does not consume are skipped.
func eachEntry(m Raw, f func(k string, r *reader)) {
	r := reader{b: m}
	n, err := r.mapHeader()
	if err != nil {
		return
	}
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return
		}
		start := r.off
		f(string(k), &r)
		r.off = start
		if r.skip() != nil {
			return
		}
	}
}

// CheckPromptLen rejects a prompt longer than the engine's max_model_len (from its
// registration), which vLLM's Python frontend refuses before sending.
func (q *EngineCoreRequest) CheckPromptLen(maxModelLen int64) error {
	if int64(len(q.PromptTokenIDs)) > maxModelLen {
		return invalid("prompt_token_ids", "prompt of "+itoa(len(q.PromptTokenIDs))+" tokens is longer than max_model_len "+itoa(int(maxModelLen)))
	}
	return nil
}

// Validate checks a request before it is encoded and sent: the fields the engine
// types strictly, the sampling parameters, and every Raw field's well-formedness.
func (q *EngineCoreRequest) Validate() error {
	switch {
	case q.RequestID == "":
		return invalid("request_id", "must not be empty")
	case (q.Sampling == nil) == (q.PoolingParams == nil):
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
	case q.PromptEmbeds != nil && q.PromptEmbeds.DType == "":
		return invalid("prompt_embeds", "dtype must be set")
	}
	for _, f := range []struct {
		name string
		v    Raw
		k    kind
	}{
		{"mm_features", q.MMFeatures, kindArray},
		{"pooling_params", q.PoolingParams, kindArray},
		{"reasoning_parser_kwargs", q.ReasoningParserKwargs, kindMap},
		{"kv_hints", q.KVHints, kindMap},
	} {
		if err := checkRaw(f.name, f.v, f.k); err != nil {
			return err
		}
	}
	if l := q.LoRA; l != nil {
		switch {
		case l.Name == "":
			return invalid("lora_request.lora_name", "must not be empty")
		case l.IntID < 1:
			return invalid("lora_request.lora_int_id", "must be > 0")
		case l.Path == "":
			return invalid("lora_request.lora_path", "must not be empty")
		}
		if err := checkRaw("lora_request.tensorizer_config_dict", l.TensorizerConfigDict, kindMap); err != nil {
			return err
		}
	}
	if q.Sampling != nil {
		if err := q.Sampling.Validate(); err != nil {
			if ve, ok := err.(*ValidationError); ok {
				ve.Field = "sampling_params." + ve.Field
			}
			return err
		}
	}
	return nil
}
