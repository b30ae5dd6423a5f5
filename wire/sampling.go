package wire

// SamplingParams codec. vLLM declares SamplingParams with omit_defaults and dict=True,
// so msgspec writes a map holding only the fields that differ from their defaults and
// the engine restores every absent key's default. Key order does not matter on the
// wire; we write vLLM's declaration order so our bytes match a Python frontend's.

// appendSampling writes p as a sparse map, leaving out every set key whose bit is not
// in allow (bit i for samplingKeyNames[i], bit 63 for Unknown keys) and reporting
// those in dropped: a layout's engines do not know them, and the caller decides
// whether leaving one out changes the request (it refuses it then).
func appendSampling(b []byte, p *SamplingParams, allow uint64) (_ []byte, dropped uint64) {
	// msgspec writes an omit_defaults map with a map16 header whatever the count (it
	// reserves the header before it knows how many fields differ); so do we.
	pos := len(b)
	b = append(b, 0xde, 0, 0)
	n := 0
	key := func(k string, bit uint) bool {
		if allow&(1<<bit) == 0 {
			dropped |= 1 << bit
			return false
		}
		b = appendStr(b, k)
		n++
		return true
	}
	if p.N != 1 && key("n", 0) {
		b = appendInt(b, p.N)
	}
	if p.PresencePenalty != 0 && key("presence_penalty", 1) {
		b = appendFloat(b, p.PresencePenalty)
	}
	if p.FrequencyPenalty != 0 && key("frequency_penalty", 2) {
		b = appendFloat(b, p.FrequencyPenalty)
	}
	if p.RepetitionPenalty != 1 && key("repetition_penalty", 3) {
		b = appendFloat(b, p.RepetitionPenalty)
	}
	if p.Temperature != 1 && key("temperature", 4) {
		b = appendFloat(b, p.Temperature)
	}
	if p.TopP != 1 && key("top_p", 5) {
		b = appendFloat(b, p.TopP)
	}
	if p.TopK != 0 && key("top_k", 6) {
		b = appendInt(b, p.TopK)
	}
	if p.MinP != 0 && key("min_p", 7) {
		b = appendFloat(b, p.MinP)
	}
	if p.Seed.Valid && key("seed", 8) {
		b = appendInt(b, p.Seed.Value)
	}
	if p.Stop != nil && key("stop", 9) {
		b = appendStrs(b, p.Stop)
	}
	if p.StopTokenIDs != nil && key("stop_token_ids", 10) {
		b = appendInts(b, p.StopTokenIDs)
	}
	if p.IgnoreEOS && key("ignore_eos", 11) {
		b = appendBool(b, true)
	}
	if !p.MaxTokens.Valid || p.MaxTokens.Value != 16 && key("max_tokens", 12) {
		b = appendOptInt(b, p.MaxTokens)
	}
	if p.MinTokens != 0 && key("min_tokens", 13) {
		b = appendInt(b, p.MinTokens)
	}
	if p.Logprobs.Valid && key("logprobs", 14) {
		b = appendInt(b, p.Logprobs.Value)
	}
	if p.PromptLogprobs.Valid && key("prompt_logprobs", 15) {
		b = appendInt(b, p.PromptLogprobs.Value)
	}
	if p.PromptLogprobTokenIDs != nil && key("prompt_logprob_token_ids", 16) {
		b = appendInts(b, p.PromptLogprobTokenIDs)
	}
	if p.PromptLogprobStart.Valid && key("prompt_logprob_start", 17) {
		b = appendInt(b, p.PromptLogprobStart.Value)
	}
	if p.LogprobTokenIDs != nil && key("logprob_token_ids", 18) {
		b = appendInts(b, p.LogprobTokenIDs)
	}
	if p.FlatLogprobs && key("flat_logprobs", 19) {
		b = appendBool(b, true)
	}
	if !p.Detokenize && key("detokenize", 20) {
		b = appendBool(b, false)
	}
	if !p.SkipSpecialTokens && key("skip_special_tokens", 21) {
		b = appendBool(b, false)
	}
	if !p.SpacesBetweenSpecialTokens && key("spaces_between_special_tokens", 22) {
		b = appendBool(b, false)
	}
	if p.IncludeStopStrInOutput && key("include_stop_str_in_output", 23) {
		b = appendBool(b, true)
	}
	if p.OutputKind != 0 && key("output_kind", 24) {
		b = appendInt(b, p.OutputKind)
	}
	if p.StreamInterval.Valid && key("stream_interval", 25) {
		b = appendInt(b, p.StreamInterval.Value)
	}
	if p.SkipClone && key("skip_clone", 26) {
		b = appendBool(b, true)
	}
	if p.OutputTextBufferLength != 0 && key("output_text_buffer_length", 27) {
		b = appendInt(b, p.OutputTextBufferLength)
	}
	if p.EOSTokenID.Valid && key("_eos_token_id", 28) {
		b = appendInt(b, p.EOSTokenID.Value)
	}
	// The default is an empty set, so [] is omitted too.
	if len(p.AllStopTokenIDs) > 0 && key("_all_stop_token_ids", 29) {
		b = appendInts(b, p.AllStopTokenIDs)
	}
	if p.StructuredOutputs != nil && key("structured_outputs", 30) {
		b = appendRaw(b, p.StructuredOutputs)
	}
	if p.LogitBias != nil && key("logit_bias", 31) {
		b = appendRaw(b, p.LogitBias)
	}
	if p.AllowedTokenIDs != nil && key("allowed_token_ids", 32) {
		b = appendInts(b, p.AllowedTokenIDs)
	}
	if p.ExtraArgs != nil && key("extra_args", 33) {
		b = appendRaw(b, p.ExtraArgs)
	}
	if p.BadWords != nil && key("bad_words", 34) {
		b = appendStrs(b, p.BadWords)
	}
	if p.BadWordsTokenIDs != nil && key("_bad_words_token_ids", 35) {
		b = appendRaw(b, p.BadWordsTokenIDs)
	}
	if p.SkipReadingPrefixCache.Valid && key("skip_reading_prefix_cache", 36) {
		b = appendBool(b, p.SkipReadingPrefixCache.Value)
	}
	if p.ThinkingTokenBudget.Valid && key("thinking_token_budget", 37) {
		b = appendInt(b, p.ThinkingTokenBudget.Value)
	}
	if p.RepetitionDetection != nil && key("repetition_detection", 38) {
		b = appendRaw(b, p.RepetitionDetection)
	}
	if p.RoutedExpertsPromptStart != 0 && key("routed_experts_prompt_start", 39) {
		b = appendInt(b, p.RoutedExpertsPromptStart)
	}
	if p.TraceDecodeTokenIDs != nil && key("trace_decode_token_ids", 40) {
		b = appendInts(b, p.TraceDecodeTokenIDs)
	}
	for _, f := range p.Unknown {
		if key(f.Key, 63) {
			b = appendRaw(b, f.Value)
		}
	}
	if n > 0xffff { // only reachable through a huge Unknown list
		hdr := appendMapHeader(nil, n)
		return append(append(b[:pos:pos], hdr...), b[pos+3:]...), dropped
	}
	b[pos+1], b[pos+2] = byte(n>>8), byte(n)
	return b, dropped
}

// samplingParams decodes the map strictly, as msgspec types it for the engine:
// absent keys keep vLLM's defaults, unknown keys are kept in Unknown, and a value
// of the wrong type is an error naming the key.
func (r *reader) samplingParams(p *SamplingParams) error {
	const typ = "SamplingParams"
	*p = DefaultSamplingParams()
	n, err := r.mapHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	for range n {
		kb, err := r.strBytes()
		if err != nil {
			return fieldErr(err, typ, "")
		}
		if err := r.samplingField(p, kb); err != nil {
			return fieldErr(err, typ, string(kb))
		}
	}
	return nil
}

func (r *reader) samplingField(p *SamplingParams, k []byte) (err error) {
	switch string(k) {
	case "n":
		p.N, err = r.int()
	case "presence_penalty":
		p.PresencePenalty, err = r.float()
	case "frequency_penalty":
		p.FrequencyPenalty, err = r.float()
	case "repetition_penalty":
		p.RepetitionPenalty, err = r.float()
	case "temperature":
		p.Temperature, err = r.float()
	case "top_p":
		p.TopP, err = r.float()
	case "top_k":
		p.TopK, err = r.int()
	case "min_p":
		p.MinP, err = r.float()
	case "seed":
		p.Seed, err = r.optInt()
	case "stop":
		// str | list[str] | None: a single string is one stop string.
		if r.peek() == kindStr {
			var s string
			s, err = r.str()
			p.Stop = []string{s}
		} else {
			p.Stop, err = r.optStrs()
		}
	case "stop_token_ids":
		p.StopTokenIDs, err = r.optInts()
	case "ignore_eos":
		p.IgnoreEOS, err = r.bool()
	case "max_tokens":
		p.MaxTokens, err = r.optInt()
	case "min_tokens":
		p.MinTokens, err = r.int()
	case "logprobs":
		p.Logprobs, err = r.optInt()
	case "prompt_logprobs":
		p.PromptLogprobs, err = r.optInt()
	case "prompt_logprob_token_ids":
		p.PromptLogprobTokenIDs, err = r.optInts()
	case "prompt_logprob_start":
		p.PromptLogprobStart, err = r.optInt()
	case "trace_decode_token_ids":
		p.TraceDecodeTokenIDs, err = r.optInts()
	case "logprob_token_ids":
		p.LogprobTokenIDs, err = r.optInts()
	case "flat_logprobs":
		p.FlatLogprobs, err = r.bool()
	case "detokenize":
		p.Detokenize, err = r.bool()
	case "skip_special_tokens":
		p.SkipSpecialTokens, err = r.bool()
	case "spaces_between_special_tokens":
		p.SpacesBetweenSpecialTokens, err = r.bool()
	case "include_stop_str_in_output":
		p.IncludeStopStrInOutput, err = r.bool()
	case "output_kind":
		start := r.off
		if p.OutputKind, err = r.int(); err == nil && (p.OutputKind < 0 || p.OutputKind > 2) {
			err = &DecodeError{Offset: start, Msg: "invalid RequestOutputKind " + itoa(int(p.OutputKind))}
		}
	case "stream_interval":
		p.StreamInterval, err = r.optInt()
	case "skip_clone":
		p.SkipClone, err = r.bool()
	case "output_text_buffer_length":
		p.OutputTextBufferLength, err = r.int()
	case "_eos_token_id":
		p.EOSTokenID, err = r.optInt()
	case "_all_stop_token_ids":
		p.AllStopTokenIDs, err = r.ints(nil) // set[int]: not optional
	case "structured_outputs":
		p.StructuredOutputs, err = r.rawOf(kindMap)
	case "logit_bias":
		p.LogitBias, err = r.rawOf(kindMap)
	case "allowed_token_ids":
		p.AllowedTokenIDs, err = r.optInts()
	case "extra_args":
		p.ExtraArgs, err = r.rawOf(kindMap)
	case "routed_experts_prompt_start":
		p.RoutedExpertsPromptStart, err = r.int()
	case "bad_words":
		p.BadWords, err = r.optStrs()
	case "_bad_words_token_ids":
		p.BadWordsTokenIDs, err = r.rawOf(kindArray)
	case "skip_reading_prefix_cache":
		p.SkipReadingPrefixCache, err = r.optBool()
	case "thinking_token_budget":
		p.ThinkingTokenBudget, err = r.optInt()
	case "repetition_detection":
		p.RepetitionDetection, err = r.rawOf(kindMap)
	default:
		var v Raw
		if v, err = r.raw(); err != nil {
			return err
		}
		p.Unknown = append(p.Unknown, RawField{Key: string(k), Value: v})
	}
	return err
}
