package wire

// EngineAccepts holds, in one place, what an unmodified vLLM engine rejects while it
// decodes an ADD. In EngineCoreProc.process_input_sockets (vllm/v1/engine/core.py)
// add_request_decoder.decode(data_frames) runs outside the try block, so anything
// that makes msgspec's typed decode, a __post_init__ it runs (SamplingParams,
// StructuredOutputsParams, RepetitionDetectionParams, LoRARequest) or the tensor
// decode hook raise ends the engine's input thread with no error back: the engine
// stops reading and every later request hangs. Validate runs these checks before
// every send; the mock engine runs them on every ADD it receives and dies loudly on
// a failure, so a test catches anything we would send that a real engine rejects.
//
// These are vLLM's rules only. The project's stricter rules (n == 1, max_tokens set,
// the frontend-side checks of SamplingParams.verify...) live in Validate.

import (
	"math"
	"unicode/utf8"
)

// maxNSequences is VLLM_MAX_N_SEQUENCES' default (sampling_params.py, the n field's
// doc: "default: 16384"); _verify_num_sequences refuses a larger n. An engine run
// with a larger setting accepts more, which only makes this check conservative.
const maxNSequences = 16384

// EngineAccepts reports the first value in q that vLLM's engine would fail on while
// decoding it (see above), as a *ValidationError naming the field, or nil.
func EngineAccepts(q *EngineCoreRequest) error {
	if q == nil {
		return ErrNilRequest
	}
	// Every str is decoded into a Python str (msgspec UTF-8-decodes it).
	if err := text("request_id", q.RequestID); err != nil {
		return err
	}
	if err := optText("cache_salt", q.CacheSalt); err != nil {
		return err
	}
	if err := optText("external_req_id", q.ExternalReqID); err != nil {
		return err
	}
	if err := optText("session_id", q.SessionID); err != nil {
		return err
	}
	for k, v := range q.TraceHeaders { // Mapping[str, str]
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid("trace_headers", "key or value is not valid UTF-8")
		}
	}
	if err := checkArrayAny("mm_features", q.MMFeatures); err != nil {
		return err
	}
	if err := checkArrayAny("pooling_params", q.PoolingParams); err != nil {
		return err
	}
	if p := q.Pooling; p != nil {
		if err := p.engineAccepts(); err != nil {
			return prefixed("pooling_params.", err)
		}
	}
	if err := checkStrKeyMap("reasoning_parser_kwargs", q.ReasoningParserKwargs); err != nil { // dict[str, Any]
		return err
	}
	// kv_hints (index 21) is past the end of Python's EngineCoreRequest: msgspec
	// skips extra trailing fields of an array_like struct without decoding them.
	if l := q.LoRA; l != nil {
		if err := l.engineAccepts(); err != nil {
			return prefixed("lora_request.", err)
		}
	}
	if t := q.PromptEmbeds; t != nil {
		if err := t.CheckTorch(); err != nil { // serial_utils.py _decode_tensor
			return prefixed("prompt_embeds.", err)
		}
	}
	if p := q.Sampling; p != nil {
		if err := p.engineAccepts(); err != nil {
			return prefixed("sampling_params.", err)
		}
	}
	return nil
}

// engineAccepts is LoRARequest's decode and __post_init__ (vllm/lora/request.py):
// "id must be > 0" and "lora_path cannot be empty" (lora_path defaults to "").
func (l *LoRARequest) engineAccepts() error {
	switch {
	case !utf8.ValidString(l.Name):
		return invalid("lora_name", "is not valid UTF-8")
	case !utf8.ValidString(l.Path):
		return invalid("lora_path", "is not valid UTF-8")
	case l.BaseModelName.Valid && !utf8.ValidString(l.BaseModelName.Value):
		return invalid("base_model_name", "is not valid UTF-8")
	case l.IntID < 1: // request.py __post_init__: ValueError("id must be > 0")
		return invalid("lora_int_id", "must be > 0, got "+itoa(int(l.IntID)))
	case l.Path == "": // request.py __post_init__: assert self.lora_path
		return invalid("lora_path", "must not be empty")
	}
	return checkDictAny("tensorizer_config_dict", l.TensorizerConfigDict) // dict | None
}

// engineAccepts is SamplingParams' typed decode plus the __post_init__ msgspec runs
// on it in the engine (vllm/sampling_params.py), on the values as they are on the
// wire: the rewrites before _verify_args (a tiny temperature is raised to 0.01,
// thinking_token_budget -1 becomes None), _verify_args, then the greedy check.
func (p *SamplingParams) engineAccepts() error {
	for _, s := range p.Stop {
		if !utf8.ValidString(s) {
			return invalid("stop", "is not valid UTF-8")
		}
	}
	for _, s := range p.BadWords {
		if !utf8.ValidString(s) {
			return invalid("bad_words", "is not valid UTF-8")
		}
	}
	for _, u := range p.Unknown { // skipped by the engine, but the key is matched as text
		if !utf8.ValidString(u.Key) {
			return invalid("sampling_params", "a key is not valid UTF-8")
		}
		if !validRaw(u.Value) {
			return invalid(u.Key, "not one well-formed msgpack value")
		}
	}
	if p.OutputKind < 0 || p.OutputKind > 2 { // RequestOutputKind(value) on decode
		return invalid("output_kind", "must be 0 (CUMULATIVE), 1 (DELTA) or 2 (FINAL_ONLY)")
	}
	// __post_init__: validate_thinking_token_budget raises below -1.
	if p.ThinkingTokenBudget.Valid && p.ThinkingTokenBudget.Value < -1 {
		return invalid("thinking_token_budget", "must be non-negative or -1")
	}
	temp := p.Temperature
	if temp > 0 && temp < minTemperature { // __post_init__: 0 < t < _MAX_TEMP is raised
		temp = minTemperature
	}
	if err := p.verifyArgs(temp); err != nil {
		return err
	}
	if temp < samplingEps && p.N > 1 { // _verify_greedy_sampling
		return invalid("n", "must be 1 when using greedy sampling, got "+itoa(int(p.N)))
	}
	if err := checkStructuredOutputs(p.StructuredOutputs, false); err != nil {
		return err
	}
	if err := checkLogitBias(p.LogitBias, false); err != nil { // dict[int, float]
		return err
	}
	if err := checkStrKeyMap("extra_args", p.ExtraArgs); err != nil { // dict[str, Any]
		return err
	}
	if err := checkBadWordsTokenIDs(p.BadWordsTokenIDs, false); err != nil { // list[list[int]]
		return err
	}
	return checkRepetitionDetection(p.RepetitionDetection)
}

// verifyArgs mirrors SamplingParams._verify_args, one case per raise, in its order.
// temp is the temperature after __post_init__'s raise to 0.01.
func (p *SamplingParams) verifyArgs(temp float64) error {
	switch {
	case p.N < 1 || p.N > maxNSequences: // _verify_num_sequences
		return invalid("n", "must be in [1, 16384], got "+itoa(int(p.N)))
	case !(p.PresencePenalty >= -2 && p.PresencePenalty <= 2): // NaN fails too, as in Python
		return invalid("presence_penalty", "must be in [-2, 2]")
	case !(p.FrequencyPenalty >= -2 && p.FrequencyPenalty <= 2):
		return invalid("frequency_penalty", "must be in [-2, 2]")
	case math.IsInf(p.RepetitionPenalty, 0) || math.IsNaN(p.RepetitionPenalty):
		return invalid("repetition_penalty", "must be a finite number")
	case p.RepetitionPenalty <= 0:
		return invalid("repetition_penalty", "must be greater than zero")
	case math.IsInf(temp, 0) || math.IsNaN(temp):
		return invalid("temperature", "must be a finite number")
	case temp < 0:
		return invalid("temperature", "must be non-negative")
	case temp > 2:
		return invalid("temperature", "must be in [0, 2]")
	case !(p.TopP > 0 && p.TopP <= 1):
		return invalid("top_p", "must be in (0, 1]")
	case p.TopK < -1: // "quietly accept -1 as disabled"
		return invalid("top_k", "must be 0 or -1 (disabled), or at least 1")
	case !(p.MinP >= 0 && p.MinP <= 1):
		return invalid("min_p", "must be in [0, 1]")
	case p.MaxTokens.Valid && p.MaxTokens.Value < 1:
		return invalid("max_tokens", "must be at least 1, got "+itoa(int(p.MaxTokens.Value)))
	case p.MinTokens < 0:
		return invalid("min_tokens", "must be >= 0")
	case p.MaxTokens.Valid && p.MinTokens > p.MaxTokens.Value:
		return invalid("min_tokens", "must be <= max_tokens")
	case p.StreamInterval.Valid && p.StreamInterval.Value < 1:
		return invalid("stream_interval", "must be at least 1")
	case p.Logprobs.Valid && p.Logprobs.Value < -1:
		return invalid("logprobs", "must be non-negative or -1")
	case p.PromptLogprobs.Valid && p.PromptLogprobs.Value < -1:
		return invalid("prompt_logprobs", "must be non-negative or -1")
	}
	for _, s := range p.Stop {
		if s == "" {
			return invalid("stop", "cannot contain an empty string")
		}
	}
	if len(p.Stop) > 0 && !p.Detokenize {
		return invalid("stop", "stop strings are only supported when detokenize is true")
	}
	for _, s := range p.BadWords {
		if s == "" {
			return invalid("bad_words", "cannot contain an empty string")
		}
	}
	return nil
}

func text(field, s string) error {
	if !utf8.ValidString(s) {
		return invalid(field, "is not valid UTF-8")
	}
	return nil
}

func optText(field string, s OptString) error {
	if s.Valid {
		return text(field, s.Value)
	}
	return nil
}

// prefixed puts the parent's name in front of a ValidationError's field.
func prefixed(prefix string, err error) error {
	if ve, ok := err.(*ValidationError); ok {
		ve.Field = prefix + ve.Field
	}
	return err
}
