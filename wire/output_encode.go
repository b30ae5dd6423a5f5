package wire

// Encoding EngineCoreOutputs, the engine's side (used by the mock engine and tests):
// full-length arrays, as msgspec writes every field of an array_like struct.

const (
	outputsFields = 8
	outputFields  = 17
)

// AppendOutputs appends the body for o and returns the aux frames its large tensors
// need (nil when none). The error is reserved for values that cannot be encoded.
func AppendOutputs(dst []byte, o *EngineCoreOutputs) ([]byte, [][]byte, error) {
	var aux [][]byte
	b := append(dst, 0x90|outputsFields)
	b = appendInt(b, o.EngineIndex)
	b = appendArrayHeader(b, len(o.Outputs))
	for i := range o.Outputs {
		b, aux = appendOutput(b, &o.Outputs[i], aux)
	}
	if s := o.SchedulerStats; s == nil {
		b = appendNil(b)
	} else if s.Raw != nil {
		if !validRaw(s.Raw) {
			return dst, nil, &EncodeError{Type: "SchedulerStats", Field: "Raw", Msg: "not one well-formed msgpack value"}
		}
		b = append(b, s.Raw...)
	} else {
		b = append(b, 0x85)
		b = appendStr(b, "num_running_reqs")
		b = appendInt(b, s.NumRunningReqs)
		b = appendStr(b, "num_waiting_reqs")
		b = appendInt(b, s.NumWaitingReqs)
		b = appendStr(b, "step_counter")
		b = appendInt(b, s.StepCounter)
		b = appendStr(b, "current_wave")
		b = appendInt(b, s.CurrentWave)
		b = appendStr(b, "kv_cache_usage")
		b = appendFloat(b, s.KVCacheUsage)
	}
	b = appendFloat(b, o.Timestamp)
	if u := o.UtilityOutput; u == nil {
		b = appendNil(b)
	} else {
		b = append(b, 0x93)
		if u.CallIDNegative {
			b = appendInt(b, int64(u.CallID))
		} else {
			b = appendUint(b, u.CallID)
		}
		b = appendOptStr(b, u.Failure)
		if u.HasResult {
			b = append(b, 0x92)
			b = appendRaw(b, u.ResultType)
			b = appendRaw(b, u.Result)
		} else {
			b = appendNil(b)
		}
	}
	if o.FinishedRequests == nil {
		b = appendNil(b)
	} else {
		b = appendStrs(b, o.FinishedRequests)
	}
	b = appendOptInt(b, o.WaveComplete)
	b = appendOptInt(b, o.StartWave)
	return b, aux, nil
}

func appendOutput(b []byte, e *EngineCoreOutput, aux [][]byte) ([]byte, [][]byte) {
	b = append(b, 0xdc, 0, outputFields)
	b = appendStr(b, e.RequestID)
	b = appendInts(b, e.NewTokenIDs) // list[int], never nil on the wire
	if l := e.NewLogprobs; l == nil {
		b = appendNil(b)
	} else {
		b = append(b, 0x94)
		b, aux = appendTensor(b, &l.LogprobTokenIDs, aux)
		b, aux = appendTensor(b, &l.Logprobs, aux)
		b, aux = appendTensor(b, &l.SampledTokenRanks, aux)
		if l.CuNumGeneratedTokens == nil {
			b = appendNil(b)
		} else {
			b = appendInts(b, l.CuNumGeneratedTokens)
		}
	}
	if l := e.NewPromptLogprobsTensors; l == nil {
		b = appendNil(b)
	} else {
		b = append(b, 0x93)
		b, aux = appendTensor(b, &l.LogprobTokenIDs, aux)
		b, aux = appendTensor(b, &l.Logprobs, aux)
		b, aux = appendTensor(b, &l.SelectedTokenRanks, aux)
	}
	b, aux = appendOptTensor(b, e.PoolingOutput, aux)
	if e.FinishReason == FinishNone {
		b = appendNil(b)
	} else {
		b = appendInt(b, int64(e.FinishReason))
	}
	switch e.StopReason.Kind {
	case StopReasonToken:
		b = appendInt(b, e.StopReason.Token)
	case StopReasonText:
		b = appendStr(b, e.StopReason.Text)
	default:
		b = appendNil(b)
	}
	if e.Events == nil {
		b = appendNil(b)
	} else {
		b = appendArrayHeader(b, len(e.Events))
		for _, ev := range e.Events {
			b = append(b, 0x82)
			b = appendStr(b, "type")
			b = appendInt(b, ev.Type)
			b = appendStr(b, "timestamp")
			b = appendFloat(b, ev.Timestamp)
		}
	}
	b = appendRaw(b, e.KVTransferParams)
	b = appendRaw(b, e.ECTransferParams)
	b = appendRaw(b, e.TraceHeaders)
	if p := e.PrefillStats; p == nil {
		b = appendNil(b)
	} else {
		b = append(b, 0x86)
		b = appendStr(b, "num_prompt_tokens")
		b = appendInt(b, p.NumPromptTokens)
		b = appendStr(b, "num_computed_tokens")
		b = appendInt(b, p.NumComputedTokens)
		b = appendStr(b, "num_cached_tokens")
		b = appendInt(b, p.NumCachedTokens)
		b = appendStr(b, "num_local_cached_tokens")
		b = appendInt(b, p.NumLocalCachedTokens)
		b = appendStr(b, "num_external_cached_tokens")
		b = appendInt(b, p.NumExternalCachedTokens)
		b = appendStr(b, "num_cache_creation_tokens")
		b = appendInt(b, p.NumCacheCreationTokens)
	}
	b, aux = appendOptTensor(b, e.RoutedExperts, aux)
	b = appendInt(b, e.NumNaNsInLogits)
	if e.MMCacheMissHashes == nil {
		b = appendNil(b)
	} else {
		b = appendStrs(b, e.MMCacheMissHashes)
	}
	b = appendRaw(b, e.NewSamplingMask)
	b = appendRaw(b, e.SpecDecodeMetrics)
	return b, aux
}

func appendOptTensor(b []byte, t *Tensor, aux [][]byte) ([]byte, [][]byte) {
	if t == nil {
		return appendNil(b), aux
	}
	return appendTensor(b, t, aux)
}
