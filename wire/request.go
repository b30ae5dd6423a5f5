package wire

// SamplingParams is vLLM's SamplingParams (msgspec: omit_defaults, dict=True), encoded
// as a sparse map keyed by field name. Decoding restores vLLM's defaults for absent
// keys (see DefaultSamplingParams); encoding writes only fields that differ from the
// default, as msgspec does. Slice fields whose Python default is None use nil for
// "absent"; an empty non-nil slice is written as [] (Python's post-init normalises
// stop, stop_token_ids and bad_words to []).
type SamplingParams struct {
	N                          int64   // n, default 1; must be 1 on the wire (fan out n>1 yourself)
	PresencePenalty            float64 // default 0
	FrequencyPenalty           float64 // default 0
	RepetitionPenalty          float64 // default 1
	Temperature                float64 // default 1
	TopP                       float64 // default 1
	TopK                       int64   // default 0 (0 or -1 = disabled)
	MinP                       float64 // default 0
	Seed                       OptInt
	Stop                       []string // stop strings: frontend-only (we do not detokenize)
	StopTokenIDs               []int64
	IgnoreEOS                  bool
	MaxTokens                  OptInt // default 16; always sent by us
	MinTokens                  int64
	Logprobs                   OptInt
	PromptLogprobs             OptInt
	PromptLogprobTokenIDs      []int64 // prompt_logprob_token_ids (newest vLLM)
	PromptLogprobStart         OptInt  // prompt_logprob_start (newest vLLM)
	LogprobTokenIDs            []int64
	FlatLogprobs               bool
	Detokenize                 bool // default true
	SkipSpecialTokens          bool // default true
	SpacesBetweenSpecialTokens bool // default true
	IncludeStopStrInOutput     bool
	OutputKind                 int64 // 0 CUMULATIVE, 1 DELTA, 2 FINAL_ONLY
	StreamInterval             OptInt
	SkipClone                  bool
	OutputTextBufferLength     int64
	EOSTokenID                 OptInt  // _eos_token_id
	AllStopTokenIDs            []int64 // _all_stop_token_ids (a set on the Python side)
	StructuredOutputs          Raw
	LogitBias                  Raw // {int: float}
	AllowedTokenIDs            []int64
	ExtraArgs                  Raw
	RoutedExpertsPromptStart   int64
	BadWords                   []string
	BadWordsTokenIDs           Raw // _bad_words_token_ids [[int]]
	SkipReadingPrefixCache     OptBool
	ThinkingTokenBudget        OptInt
	RepetitionDetection        Raw
	TraceDecodeTokenIDs        []int64 // trace_decode_token_ids (newest vLLM)
	// Unknown holds keys this version does not know, in arrival order, so a newer
	// peer's fields survive a decode/encode round trip. Validate refuses every one of
	// them: an engine ignores a key it does not know but type-checks one it does, and
	// we cannot tell which keys an engine of another version knows.
	Unknown []RawField
}

// SamplingParams.OutputKind values (RequestOutputKind).
const (
	OutputCumulative int64 = 0
	OutputDelta      int64 = 1
	OutputFinalOnly  int64 = 2
)

// RawField is one map entry kept undecoded.
type RawField struct {
	Key   string
	Value Raw
}

// DefaultSamplingParams returns vLLM's defaults, what an empty map decodes to.
func DefaultSamplingParams() SamplingParams {
	return SamplingParams{
		N:                          1,
		RepetitionPenalty:          1,
		Temperature:                1,
		TopP:                       1,
		MaxTokens:                  SomeInt(16),
		Detokenize:                 true,
		SkipSpecialTokens:          true,
		SpacesBetweenSpecialTokens: true,
	}
}

// EngineCoreRequest is vLLM's EngineCoreRequest (array_like). We encode all 21
// fields msgspec 0.19 writes (indices 0..20); kv_hints (index 21, newest Rust only)
// is written only when set. Required fields are indices 0..8.
type EngineCoreRequest struct {
	RequestID             string            // 0, internal id, unique among live requests per engine
	PromptTokenIDs        []int64           // 1, nil only for pure prompt_embeds
	MMFeatures            Raw               // 2
	Sampling              *SamplingParams   // 3, exactly one of 3/4 non-nil
	PoolingParams         Raw               // 4
	ArrivalTime           float64           // 5, frontend wall clock (seconds since the epoch)
	LoRA                  *LoRARequest      // 6
	CacheSalt             OptString         // 7
	DataParallelRank      OptInt            // 8, routing hint
	PromptEmbeds          *Tensor           // 9
	PromptIsTokenIDs      []bool            // 10, nil = None
	ClientIndex           int64             // 11
	CurrentWave           int64             // 12
	Priority              int64             // 13
	TraceHeaders          map[string]string // 14, nil = None
	Resumable             bool              // 15
	ExternalReqID         OptString         // 16
	ReasoningEnded        OptBool           // 17
	ReasoningParserKwargs Raw               // 18
	AbortImmediately      bool              // 19
	SessionID             OptString         // 20
	KVHints               Raw               // 21, written only when non-nil
	// Pooling is pooling_params (4) in switchyard's layout-independent form,
	// written in the engine's own field order (pooling.go); PoolingParams above is
	// a client-protocol value passed through as it came. At most one is set.
	Pooling *PoolingParams
}

// IsPooling reports whether q carries pooling params (typed or raw).
func (q *EngineCoreRequest) IsPooling() bool { return q.Pooling != nil || q.PoolingParams != nil }
