package wire

// Encoding EngineCoreOutputs, the engine's side (used by the mock engine, the bench
// engine, the client protocol and tests): full-length arrays, as msgspec writes every
// field of an array_like struct.

const outputsFields = 8

// AppendOutputs appends the body for o in the native layout; see Layout.AppendOutputs.
func AppendOutputs(dst []byte, o *EngineCoreOutputs) ([]byte, [][]byte, error) {
	return Native().AppendOutputs(dst, o)
}

// AppendOutputs appends the body for o in layout l and returns the aux frames its large
// tensors need (nil when none). Fields l lacks are left out; fields switchyard does not
// know are written as vLLM's default. The error is reserved for values that cannot
// be encoded, and for a finish reason l's engines do not have.
func (l *Layout) AppendOutputs(dst []byte, o *EngineCoreOutputs) ([]byte, [][]byte, error) {
	var aux [][]byte
	b := append(dst, 0x90|outputsFields)
	b = appendInt(b, o.EngineIndex)
	b = appendArrayHeader(b, len(o.Outputs))
	for i := range o.Outputs {
		// The native layout carries a newer engine's reasons on to clients as they came.
		if f := o.Outputs[i].FinishReason; !l.Native && f != FinishNone && int(f) >= l.FinishReasons {
			return dst, nil, &LayoutError{Layout: l.Name, Field: "finish_reason", Msg: "no " + f.String() + " in this vLLM release"}
		}
		b, aux = l.appendOutput(b, &o.Outputs[i], aux)
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

func (lay *Layout) appendOutput(b []byte, e *EngineCoreOutput, aux [][]byte) ([]byte, [][]byte) {
	if plain(e) {
		// Most entries of most steps: an id, new tokens and nothing else. Every
		// layout starts with those two, and the rest is the same bytes each time.
		b = appendArrayHeader(b, len(lay.out))
		b = appendStr(b, e.RequestID)
		b = appendInts(b, e.NewTokenIDs)
		return append(b, lay.plainTail...), aux
	}
	return lay.appendOutputSlow(b, e, aux)
}

// appendOutputSlow writes every field of e in lay's order.
func (lay *Layout) appendOutputSlow(b []byte, e *EngineCoreOutput, aux [][]byte) ([]byte, [][]byte) {
	b = appendArrayHeader(b, len(lay.out))
	for _, s := range lay.out {
		switch s.id {
		case outRequestID:
			b = appendStr(b, e.RequestID)
		case outNewTokenIDs:
			b = appendInts(b, e.NewTokenIDs) // list[int], never nil on the wire
		case outNewLogprobs:
			if l := e.NewLogprobs; l == nil {
				b = appendNil(b)
			} else {
				b = append(b, 0x90|byte(lay.logprobsLists))
				b, aux = appendTensor(b, &l.LogprobTokenIDs, aux)
				b, aux = appendTensor(b, &l.Logprobs, aux)
				b, aux = appendTensor(b, &l.SampledTokenRanks, aux)
				if lay.logprobsLists < 4 {
					break
				}
				if l.CuNumGeneratedTokens == nil {
					b = appendNil(b)
				} else {
					b = appendInts(b, l.CuNumGeneratedTokens)
				}
			}
		case outNewPromptLogprobsTensors:
			if l := e.NewPromptLogprobsTensors; l == nil {
				b = appendNil(b)
			} else {
				b = append(b, 0x93)
				b, aux = appendTensor(b, &l.LogprobTokenIDs, aux)
				b, aux = appendTensor(b, &l.Logprobs, aux)
				b, aux = appendTensor(b, &l.SelectedTokenRanks, aux)
			}
		case outPoolingOutput:
			b, aux = appendOptTensor(b, e.PoolingOutput, aux)
		case outFinishReason:
			if e.FinishReason == FinishNone {
				b = appendNil(b)
			} else {
				b = appendInt(b, int64(e.FinishReason))
			}
		case outStopReason:
			switch e.StopReason.Kind {
			case StopReasonToken:
				b = appendInt(b, e.StopReason.Token)
			case StopReasonText:
				b = appendStr(b, e.StopReason.Text)
			default:
				b = appendNil(b)
			}
		case outEvents:
			b = appendEvents(b, e.Events)
		case outKVTransferParams:
			b = appendRaw(b, e.KVTransferParams)
		case outECTransferParams:
			b = appendRaw(b, e.ECTransferParams)
		case outTraceHeaders:
			b = appendRaw(b, e.TraceHeaders)
		case outNumCachedTokens:
			b = appendInt(b, e.NumCachedTokens)
		case outNumExternalComputedTokens:
			b = appendInt(b, e.NumExternalComputedTokens)
		case outPrefillStats:
			b = appendPrefillStats(b, e.PrefillStats, lay.prefillKeys)
		case outRoutedExperts:
			b, aux = appendOptTensor(b, e.RoutedExperts, aux)
		case outNumNaNsInLogits:
			b = appendInt(b, e.NumNaNsInLogits)
		case outMMCacheMissHashes:
			if e.MMCacheMissHashes == nil {
				b = appendNil(b)
			} else {
				b = appendStrs(b, e.MMCacheMissHashes)
			}
		case outNewSamplingMask:
			b = appendRaw(b, e.NewSamplingMask)
		case outSpecDecodeMetrics:
			b = appendRaw(b, e.SpecDecodeMetrics)
		default:
			b = append(b, s.def...)
		}
	}
	return b, aux
}

// appendEvents writes [{"type", "timestamp"}] | nil.
func appendEvents(b []byte, evs []EngineCoreEvent) []byte {
	if evs == nil {
		return appendNil(b)
	}
	b = appendArrayHeader(b, len(evs))
	for _, ev := range evs {
		b = append(b, 0x82)
		b = appendStr(b, "type")
		b = appendInt(b, ev.Type)
		b = appendStr(b, "timestamp")
		b = appendFloat(b, ev.Timestamp)
	}
	return b
}

// appendPrefillStats writes the PrefillStats map | nil with its first keys keys (5:
// before num_cache_creation_tokens).
func appendPrefillStats(b []byte, p *PrefillStats, keys int) []byte {
	if p == nil {
		return appendNil(b)
	}
	b = append(b, 0x80|byte(keys))
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
	if keys < 6 {
		return b
	}
	b = appendStr(b, "num_cache_creation_tokens")
	return appendInt(b, p.NumCacheCreationTokens)
}

func appendOptTensor(b []byte, t *Tensor, aux [][]byte) ([]byte, [][]byte) {
	if t == nil {
		return appendNil(b), aux
	}
	return appendTensor(b, t, aux)
}

// plain reports an entry with nothing set past new_token_ids.
func plain(e *EngineCoreOutput) bool {
	return e.FinishReason == FinishNone && e.StopReason.Kind == StopReasonNone && e.NewLogprobs == nil &&
		e.NewPromptLogprobsTensors == nil && e.PoolingOutput == nil && e.Events == nil &&
		e.KVTransferParams == nil && e.ECTransferParams == nil && e.TraceHeaders == nil &&
		e.PrefillStats == nil && e.RoutedExperts == nil && e.NumNaNsInLogits == 0 &&
		e.MMCacheMissHashes == nil && e.NewSamplingMask == nil && e.SpecDecodeMetrics == nil &&
		e.NumCachedTokens == 0 && e.NumExternalComputedTokens == 0
}

// buildPlainTail precomputes what follows new_token_ids in a plain entry of l.
func (l *Layout) buildPlainTail() {
	if len(l.out) < 2 {
		return
	}
	full, _ := l.appendOutputSlow(nil, &EngineCoreOutput{FinishReason: FinishNone}, nil)
	head := appendArrayHeader(nil, len(l.out))
	head = appendStr(head, "")
	head = appendInts(head, nil)
	l.plainTail = full[len(head):]
}
