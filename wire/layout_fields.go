package wire

// The fields switchyard knows by name, across every vLLM layout. A layout lists
// names; these tables turn them into the small ids the codec switches on. Id 0 is
// always "unknown to switchyard": decoded by skipping, encoded as vLLM's default.

// EngineCoreRequest field ids.
const (
	reqUnknown uint8 = iota
	reqRequestID
	reqPromptTokenIDs
	reqMMFeatures
	reqSampling
	reqPooling
	reqEOSTokenID // before vLLM v0.18; from v0.18 on, SamplingParams._eos_token_id
	reqArrivalTime
	reqLoRA
	reqCacheSalt
	reqDPRank
	reqPromptEmbeds
	reqPromptIsTokenIDs
	reqClientIndex
	reqCurrentWave
	reqPriority
	reqTraceHeaders
	reqResumable
	reqExternalReqID
	reqReasoningEnded
	reqReasoningParserKwargs
	reqAbortImmediately
	reqSessionID
	reqKVHints
	reqFieldCount
)

var requestFieldNames = [reqFieldCount]string{
	"", "request_id", "prompt_token_ids", "mm_features", "sampling_params", "pooling_params",
	"eos_token_id", "arrival_time", "lora_request", "cache_salt", "data_parallel_rank",
	"prompt_embeds", "prompt_is_token_ids", "client_index", "current_wave", "priority",
	"trace_headers", "resumable", "external_req_id", "reasoning_ended",
	"reasoning_parser_kwargs", "abort_immediately", "session_id", "kv_hints",
}

// EngineCoreOutput field ids.
const (
	outUnknown uint8 = iota
	outRequestID
	outNewTokenIDs
	outNewLogprobs
	outNewPromptLogprobsTensors
	outPoolingOutput
	outFinishReason
	outStopReason
	outEvents
	outKVTransferParams
	outECTransferParams
	outTraceHeaders
	outNumCachedTokens           // up to v0.18; then prefill_stats
	outNumExternalComputedTokens // v0.18
	outPrefillStats
	outRoutedExperts
	outNumNaNsInLogits
	outMMCacheMissHashes
	outNewSamplingMask
	outSpecDecodeMetrics
	outFieldCount
)

var outputFieldNames = [outFieldCount]string{
	"", "request_id", "new_token_ids", "new_logprobs", "new_prompt_logprobs_tensors",
	"pooling_output", "finish_reason", "stop_reason", "events", "kv_transfer_params",
	"ec_transfer_params", "trace_headers", "num_cached_tokens",
	"num_external_computed_tokens", "prefill_stats", "routed_experts",
	"num_nans_in_logits", "mm_cache_miss_hashes", "new_sampling_mask", "spec_decode_metrics",
}

// LoRARequest field ids.
const (
	loraUnknown uint8 = iota
	loraName
	loraIntID
	loraPath
	loraBaseModelName
	loraTensorizerConfigDict
	loraLoadInplace
	lora3DWeight
	loraFieldCount
)

var loraFieldNames = [loraFieldCount]string{
	"", "lora_name", "lora_int_id", "lora_path", "base_model_name",
	"tensorizer_config_dict", "load_inplace", "is_3d_lora_weight",
}

var outputsFieldNames = [...]string{"engine_index", "outputs", "scheduler_stats", "timestamp",
	"utility_output", "finished_requests", "wave_complete", "start_wave"}

var (
	requestFieldIDs = idsOf(requestFieldNames[:])
	outputFieldIDs  = idsOf(outputFieldNames[:])
	loraFieldIDs    = idsOf(loraFieldNames[:])
)

func idsOf(names []string) map[string]uint8 {
	m := make(map[string]uint8, len(names))
	for i, n := range names[1:] {
		m[n] = uint8(i + 1)
	}
	return m
}

// samplingKeyNames are the SamplingParams keys appendSampling can write, bit i for
// samplingKeyNames[i]; bit 63 stands for any key switchyard does not know.
var samplingKeyNames = [...]string{
	"n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature",
	"top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids", "ignore_eos",
	"max_tokens", "min_tokens", "logprobs", "prompt_logprobs", "prompt_logprob_token_ids",
	"prompt_logprob_start", "logprob_token_ids", "flat_logprobs", "detokenize",
	"skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output",
	"output_kind", "stream_interval", "skip_clone", "output_text_buffer_length",
	"_eos_token_id", "_all_stop_token_ids", "structured_outputs", "logit_bias",
	"allowed_token_ids", "extra_args", "bad_words", "_bad_words_token_ids",
	"skip_reading_prefix_cache", "thinking_token_budget", "repetition_detection",
	"routed_experts_prompt_start", "trace_decode_token_ids",
}

const samplingUnknownBit = uint64(1) << 63

var samplingKeyBits = func() map[string]uint64 {
	m := make(map[string]uint64, len(samplingKeyNames))
	for i, k := range samplingKeyNames {
		m[k] = 1 << i
	}
	return m
}()

// samplingBit is k's bit; 0 for a key switchyard does not know (a layout may list
// keys newer than this binary: it never writes them).
func samplingBit(k string) uint64 { return samplingKeyBits[k] }
