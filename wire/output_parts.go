package wire

// Decoders for the parts of an output entry that appear only sometimes (logprobs,
// stop reasons, events, stats, utility replies). Each is called after the caller has
// already consumed a nil, so each sees a present value.

// finishReason reads the FinishReason enum. Values above REPETITION are kept (a newer
// engine's new reason must still end the request's stream) rather than rejected.
func (r *reader) finishReason() (FinishReason, error) {
	start := r.off
	v, err := r.int()
	if err != nil {
		return FinishNone, err
	}
	if v < 0 || v > 127 {
		return FinishNone, &DecodeError{Offset: start, Msg: "invalid finish reason " + itoa(int(v))}
	}
	return FinishReason(v), nil
}

// stopReason reads int | str (nil was consumed by the caller).
func (r *reader) stopReason() (StopReason, error) {
	switch r.peek() {
	case kindInt:
		v, err := r.int()
		return StopReason{Kind: StopReasonToken, Token: v}, err
	case kindStr:
		s, err := r.str()
		return StopReason{Kind: StopReasonText, Text: s}, err
	}
	return StopReason{}, r.expected("int, str or nil")
}

// events reads [EngineCoreEvent]; each event is a map {"type", "timestamp"} (a plain
// msgspec Struct). The positional form [type, timestamp] is accepted as well.
func (r *reader) events() ([]EngineCoreEvent, error) {
	n, err := r.arrayHeader()
	if err != nil {
		return nil, err
	}
	ev := make([]EngineCoreEvent, 0, r.capFor(n, 3)) // [type, ts] takes 3 bytes
	for range n {
		var e EngineCoreEvent
		if err := r.event(&e); err != nil {
			return nil, err
		}
		ev = append(ev, e)
	}
	return ev, nil
}

func (r *reader) event(e *EngineCoreEvent) error {
	const typ = "EngineCoreEvent"
	if r.peek() == kindArray {
		n, err := r.arrayHeader()
		if err != nil {
			return fieldErr(err, typ, "")
		}
		if n < 2 {
			return &DecodeError{Type: typ, Offset: r.off, Msg: "expected [type, timestamp]"}
		}
		if e.Type, err = r.int(); err != nil {
			return fieldErr(err, typ, "type")
		}
		if e.Timestamp, err = r.float(); err != nil {
			return fieldErr(err, typ, "timestamp")
		}
		return fieldErr(r.skipRest(n-2), typ, "")
	}
	n, err := r.mapHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	var seen uint8
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return fieldErr(err, typ, "")
		}
		switch string(k) {
		case "type":
			e.Type, err = r.int()
			seen |= 1
		case "timestamp":
			e.Timestamp, err = r.float()
			seen |= 2
		default:
			err = r.skip()
		}
		if err != nil {
			return fieldErr(err, typ, string(k))
		}
	}
	if seen != 3 {
		return &DecodeError{Type: typ, Offset: r.off, Msg: "missing type or timestamp"}
	}
	return nil
}

// prefillStats reads the PrefillStats map; unknown keys are skipped.
func (r *reader) prefillStats() (*PrefillStats, error) {
	const typ = "PrefillStats"
	n, err := r.mapHeader()
	if err != nil {
		return nil, fieldErr(err, typ, "")
	}
	p := new(PrefillStats)
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return nil, fieldErr(err, typ, "")
		}
		var dst *int64
		switch string(k) {
		case "num_prompt_tokens":
			dst = &p.NumPromptTokens
		case "num_computed_tokens":
			dst = &p.NumComputedTokens
		case "num_cached_tokens":
			dst = &p.NumCachedTokens
		case "num_local_cached_tokens":
			dst = &p.NumLocalCachedTokens
		case "num_external_cached_tokens":
			dst = &p.NumExternalCachedTokens
		case "num_cache_creation_tokens":
			dst = &p.NumCacheCreationTokens
		}
		if dst == nil {
			err = r.skip()
		} else {
			*dst, err = r.int()
		}
		if err != nil {
			return nil, fieldErr(err, typ, string(k))
		}
	}
	return p, nil
}

// schedulerStats keeps the whole map raw and picks out the fields routing needs.
// Nested values (prefix_cache_stats, spec_decoding_stats...) stay in Raw.
func (r *reader) schedulerStats() (*SchedulerStats, error) {
	const typ = "SchedulerStats"
	start := r.off
	n, err := r.mapHeader()
	if err != nil {
		return nil, fieldErr(err, typ, "")
	}
	s := new(SchedulerStats)
	for range n {
		k, err := r.strBytes()
		if err != nil {
			return nil, fieldErr(err, typ, "")
		}
		switch string(k) {
		case "num_running_reqs":
			s.NumRunningReqs, err = r.int()
		case "num_waiting_reqs":
			s.NumWaitingReqs, err = r.int()
		case "kv_cache_usage":
			s.KVCacheUsage, err = r.float()
		case "step_counter":
			s.StepCounter, err = r.int()
		case "current_wave":
			s.CurrentWave, err = r.int()
		default:
			err = r.skip()
		}
		if err != nil {
			return nil, fieldErr(err, typ, string(k))
		}
	}
	s.Raw = Raw(r.b[start:r.off:r.off])
	return s, nil
}

// utilityOutput reads [call_id, failure_message | nil, result | nil]; only call_id is
// required. call_id is an unsigned 64-bit id from the frontend or a negative id for
// an engine-initiated push.
func (r *reader) utilityOutput() (*UtilityOutput, error) {
	const typ = "UtilityOutput"
	n, err := r.arrayHeader()
	if err != nil {
		return nil, fieldErr(err, typ, "")
	}
	if n < 1 {
		return nil, &DecodeError{Type: typ, Offset: r.off, Msg: "missing call_id"}
	}
	u := new(UtilityOutput)
	if u.CallID, u.CallIDNegative, err = r.intRaw(); err != nil {
		return nil, fieldErr(err, typ, "call_id")
	}
	if n >= 2 {
		if u.Failure, err = r.optStr(); err != nil {
			return nil, fieldErr(err, typ, "failure_message")
		}
	}
	if n >= 3 && !r.nextNil() {
		m, err := r.arrayHeader()
		if err != nil {
			return nil, fieldErr(err, typ, "result")
		}
		if m < 2 {
			return nil, &DecodeError{Type: typ, Field: "result", Offset: r.off, Msg: "expected [type_info, value]"}
		}
		u.HasResult = true
		if u.ResultType, err = r.raw(); err == nil {
			u.Result, err = r.raw()
		}
		if err == nil {
			err = r.skipRest(m - 2)
		}
		if err != nil {
			return nil, fieldErr(err, typ, "result")
		}
	}
	return u, fieldErr(r.skipRest(n-3), typ, "")
}

// logprobsLists reads [token_ids, logprobs, sampled_token_ranks, cu_num_generated_tokens].
func (r *reader) logprobsLists(frames [][]byte) (*LogprobsLists, error) {
	const typ = "LogprobsLists"
	n, err := r.arrayHeader()
	if err != nil {
		return nil, fieldErr(err, typ, "")
	}
	if n < 3 {
		return nil, &DecodeError{Type: typ, Offset: r.off, Msg: "expected at least 3 fields, got " + itoa(n)}
	}
	l := new(LogprobsLists)
	if l.LogprobTokenIDs, err = r.tensor(frames); err != nil {
		return nil, fieldErr(err, typ, "logprob_token_ids")
	}
	if l.Logprobs, err = r.tensor(frames); err != nil {
		return nil, fieldErr(err, typ, "logprobs")
	}
	if l.SampledTokenRanks, err = r.tensor(frames); err != nil {
		return nil, fieldErr(err, typ, "sampled_token_ranks")
	}
	if n >= 4 {
		if l.CuNumGeneratedTokens, err = r.optInts(); err != nil {
			return nil, fieldErr(err, typ, "cu_num_generated_tokens")
		}
	}
	return l, fieldErr(r.skipRest(n-4), typ, "")
}

// logprobsTensors reads [token_ids, logprobs, selected_token_ranks, ...].
func (r *reader) logprobsTensors(frames [][]byte) (*LogprobsTensors, error) {
	const typ = "LogprobsTensors"
	n, err := r.arrayHeader()
	if err != nil {
		return nil, fieldErr(err, typ, "")
	}
	if n < 3 {
		return nil, &DecodeError{Type: typ, Offset: r.off, Msg: "expected at least 3 fields, got " + itoa(n)}
	}
	l := new(LogprobsTensors)
	if l.LogprobTokenIDs, err = r.tensor(frames); err != nil {
		return nil, fieldErr(err, typ, "logprob_token_ids")
	}
	if l.Logprobs, err = r.tensor(frames); err != nil {
		return nil, fieldErr(err, typ, "logprobs")
	}
	if l.SelectedTokenRanks, err = r.tensor(frames); err != nil {
		return nil, fieldErr(err, typ, "selected_token_ranks")
	}
	return l, fieldErr(r.skipRest(n-3), typ, "")
}
