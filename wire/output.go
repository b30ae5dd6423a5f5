package wire

// EngineCoreOutputs is one message on an engine's output socket (array_like):
// [engine_index, outputs, scheduler_stats, timestamp, utility_output,
// finished_requests, wave_complete, start_wave].
type EngineCoreOutputs struct {
	EngineIndex      int64
	Outputs          []EngineCoreOutput
	SchedulerStats   *SchedulerStats // nil when absent
	Timestamp        float64         // engine monotonic clock
	UtilityOutput    *UtilityOutput  // nil when absent
	FinishedRequests []string        // nil when absent
	WaveComplete     OptInt
	StartWave        OptInt
}

// EngineCoreOutput is one request's progress in one step (array_like). The index
// comments are the native layout's; other layouts place, lack or add fields (see
// Layout), and every field a layout lacks stays zero.
type EngineCoreOutput struct {
	RequestID                string            // 0
	NewTokenIDs              []int64           // 1
	NewLogprobs              *LogprobsLists    // 2
	NewPromptLogprobsTensors *LogprobsTensors  // 3
	PoolingOutput            *Tensor           // 4
	FinishReason             FinishReason      // 5, FinishNone when nil
	StopReason               StopReason        // 6
	Events                   []EngineCoreEvent // 7
	KVTransferParams         Raw               // 8
	ECTransferParams         Raw               // 9
	TraceHeaders             Raw               // 10
	PrefillStats             *PrefillStats     // 11
	RoutedExperts            *Tensor           // 12
	NumNaNsInLogits          int64             // 13
	MMCacheMissHashes        []string          // 14
	NewSamplingMask          Raw               // 15
	SpecDecodeMetrics        Raw               // 16
	// Older layouts (up to v0.18) report cached tokens as plain ints instead of
	// PrefillStats.
	NumCachedTokens           int64
	NumExternalComputedTokens int64
}

// Finished reports whether this is the request's last output.
func (o *EngineCoreOutput) Finished() bool { return o.FinishReason != FinishNone }

// StopReason is EngineCoreOutput.stop_reason: nil, a stop token id, or a stop string.
type StopReason struct {
	Kind  StopReasonKind
	Token int64
	Text  string
}

// StopOnToken is the stop reason of a stop_token_ids hit.
func StopOnToken(id int64) StopReason { return StopReason{Kind: StopReasonToken, Token: id} }

// StopOnText is the stop reason of a stop-string hit.
func StopOnText(s string) StopReason { return StopReason{Kind: StopReasonText, Text: s} }

// Value returns the stop reason as the OpenAI API reports it: nil, an int64 token
// id or a string (for a JSON encoder; not for the hot path).
func (s StopReason) Value() any {
	switch s.Kind {
	case StopReasonToken:
		return s.Token
	case StopReasonText:
		return s.Text
	}
	return nil
}

// StopReasonKind says which member of StopReason is set.
type StopReasonKind uint8

// Stop reason kinds.
const (
	StopReasonNone StopReasonKind = iota
	StopReasonToken
	StopReasonText
)

// Engine event types (EngineCoreEventType).
const (
	EventQueued    int64 = 1
	EventScheduled int64 = 2
	EventPreempted int64 = 3
)

// EngineCoreEvent is {"type": int, "timestamp": float}: 1 QUEUED, 2 SCHEDULED, 3 PREEMPTED.
type EngineCoreEvent struct {
	Type      int64
	Timestamp float64
}

// PrefillStats is the prefill_stats map of the first output after a prefill.
type PrefillStats struct {
	NumPromptTokens         int64
	NumComputedTokens       int64
	NumCachedTokens         int64
	NumLocalCachedTokens    int64
	NumExternalCachedTokens int64
	NumCacheCreationTokens  int64
}

// LogprobsLists is [logprob_token_ids ndarray, logprobs ndarray, sampled_token_ranks
// ndarray, cu_num_generated_tokens [int] | nil].
type LogprobsLists struct {
	LogprobTokenIDs      Tensor
	Logprobs             Tensor
	SampledTokenRanks    Tensor
	CuNumGeneratedTokens []int64
}

// LogprobsTensors is [logprob_token_ids, logprobs, selected_token_ranks, ...].
type LogprobsTensors struct {
	LogprobTokenIDs    Tensor
	Logprobs           Tensor
	SelectedTokenRanks Tensor
}

// SchedulerStats keeps the fields switchyard routes on typed, and the whole map raw
// (Raw) for whoever wants the rest.
type SchedulerStats struct {
	NumRunningReqs int64
	NumWaitingReqs int64
	KVCacheUsage   float64
	StepCounter    int64
	CurrentWave    int64
	Raw            Raw
}

// UtilityOutput is [call_id, failure_message | nil, result | nil] where result is
// [type_info | nil, value]. CallID is the u64 bit pattern; engine-initiated pushes use
// negative ids (-1, -2), which appear here as their two's complement.
type UtilityOutput struct {
	CallID         uint64
	CallIDNegative bool // the wire carried a negative int (engine push)
	Failure        OptString
	HasResult      bool
	ResultType     Raw // type_info, normally nil
	Result         Raw // the value, raw msgpack
}

// CoordinatorPublish is the coordinator's publish to frontends:
// [counts | nil, current_wave, engines_running], counts per engine
// [waiting, running, kv_cache_usage] (older: [waiting, running]).
type CoordinatorPublish struct {
	Counts         []EngineLoad // nil when only the wave state changed
	CurrentWave    int64
	EnginesRunning bool
}

// EngineLoad is one engine's entry in the coordinator's counts.
type EngineLoad struct {
	Waiting      int64
	Running      int64
	KVCacheUsage float64
}

// FirstReq is frontend -> coordinator [target_engine, current_wave]. Python sends the
// engine's 2-byte identity as bin; the Rust coordinator takes an int. Exactly one of
// Identity (HasIdentity) or EngineIndex is meaningful.
type FirstReq struct {
	Identity    Identity
	HasIdentity bool
	EngineIndex int64
	Wave        int64
}

// StartDPWave is the START_DP_WAVE payload [wave, exclude_engine_index | nil].
type StartDPWave struct {
	Wave    int64
	Exclude OptInt
}
