package wire

import "slices"

// typeFrames backs TypeFrame: one static byte per request type.
var typeFrames = [4]byte{RequestAdd, RequestAbort, RequestStartDPWave, RequestUtility}

// TypeFrame returns the one-byte type frame for t, refusing anything the engine's
// enum constructor would reject or treat as an internal sentinel (04, 05). The
// returned slice is shared and must not be modified.
func TypeFrame(t byte) ([]byte, error) {
	if t > RequestUtility {
		return nil, ErrBadRequestType
	}
	return typeFrames[t : t+1 : t+1], nil
}

// ParseRequestType reads an engine input type frame (the mock engine's side).
func ParseRequestType(frame []byte) (byte, error) {
	if len(frame) != 1 || frame[0] > RequestUtility {
		return 0, ErrBadRequestType
	}
	return frame[0], nil
}

// AppendAdd appends the ADD body for r in the native (newest) layout; see
// Layout.AppendAdd.
func AppendAdd(dst []byte, r *EngineCoreRequest) (body []byte, aux [][]byte, err error) {
	return Native().AppendAdd(dst, r)
}

// AppendAdd appends the ADD body for r to dst in l and returns it with the aux frames
// its large tensors need (nil when there are none): every field of l, as vLLM's own
// frontend of that release writes them. It refuses (*LayoutError) a request that
// sets something l has no place for, rather than leave it out: the engine would run
// a different request than the one asked for. Call Validate (after Prepare) before
// sending: AppendAdd only refuses what cannot be encoded at all, and a prompt_embeds
// tensor the engine cannot view.
func (l *Layout) AppendAdd(dst []byte, r *EngineCoreRequest) (body []byte, aux [][]byte, err error) {
	if r == nil {
		return dst, nil, ErrNilRequest
	}
	if (r.Sampling == nil) == !r.IsPooling() || (r.Pooling != nil && r.PoolingParams != nil) {
		return dst, nil, ErrParamsExclusive
	}
	if t := r.PromptEmbeds; t != nil {
		// A tensor the engine's decode hook cannot view kills its input thread;
		// refuse it even when the caller skipped Validate.
		if err := t.CheckTorch(); err != nil {
			return dst, nil, &EncodeError{Type: "EngineCoreRequest", Field: "prompt_embeds", Msg: err.(*ValidationError).Field + ": " + err.(*ValidationError).Msg}
		}
	}
	if err := l.fits(r); err != nil {
		return dst, nil, err
	}
	// _eos_token_id travels at eos_token_id in the older layouts.
	allow := l.sampling &^ l.eosBit()
	b := appendArrayHeader(dst, len(l.req))
	for _, s := range l.req {
		switch s.id {
		case reqRequestID:
			b = appendStr(b, r.RequestID)
		case reqPromptTokenIDs:
			if r.PromptTokenIDs == nil {
				b = appendNil(b)
			} else {
				b = appendInts(b, r.PromptTokenIDs)
			}
		case reqMMFeatures:
			b = appendRaw(b, r.MMFeatures)
		case reqSampling:
			if r.Sampling == nil {
				b = appendNil(b)
				break
			}
			var dropped uint64
			b, dropped = appendSampling(b, r.Sampling, allow)
			if dropped &^= harmless(r.Sampling) | l.eosBit(); dropped != 0 {
				return dst, nil, &LayoutError{Layout: l.Name, Field: "sampling_params." + firstBitName(dropped, samplingKeyNames[:]),
					Msg: "not known to engines of this vLLM release"}
			}
		case reqPooling:
			if r.Pooling != nil {
				if b, err = l.appendPooling(b, r.Pooling); err != nil {
					return dst, nil, err
				}
				break
			}
			b = appendRaw(b, r.PoolingParams)
		case reqEOSTokenID:
			if r.Sampling != nil {
				b = appendOptInt(b, r.Sampling.EOSTokenID)
			} else {
				b = appendNil(b)
			}
		case reqArrivalTime:
			b = appendFloat(b, r.ArrivalTime)
		case reqLoRA:
			if r.LoRA != nil {
				b = l.appendLoRA(b, r.LoRA)
			} else {
				b = appendNil(b)
			}
		case reqCacheSalt:
			b = appendOptStr(b, r.CacheSalt)
		case reqDPRank:
			b = appendOptInt(b, r.DataParallelRank)
		case reqPromptEmbeds:
			if r.PromptEmbeds != nil {
				b, aux = appendTensor(b, r.PromptEmbeds, aux)
			} else {
				b = appendNil(b)
			}
		case reqPromptIsTokenIDs:
			if r.PromptIsTokenIDs == nil {
				b = appendNil(b)
			} else {
				b = appendArrayHeader(b, len(r.PromptIsTokenIDs))
				for _, v := range r.PromptIsTokenIDs {
					b = appendBool(b, v)
				}
			}
		case reqClientIndex:
			b = appendInt(b, r.ClientIndex)
		case reqCurrentWave:
			b = appendInt(b, r.CurrentWave)
		case reqPriority:
			b = appendInt(b, r.Priority)
		case reqTraceHeaders:
			b = appendStrMap(b, r.TraceHeaders)
		case reqResumable:
			b = appendBool(b, r.Resumable)
		case reqExternalReqID:
			b = appendOptStr(b, r.ExternalReqID)
		case reqReasoningEnded:
			b = appendOptBool(b, r.ReasoningEnded)
		case reqReasoningParserKwargs:
			b = appendRaw(b, r.ReasoningParserKwargs)
		case reqAbortImmediately:
			b = appendBool(b, r.AbortImmediately)
		case reqSessionID:
			b = appendOptStr(b, r.SessionID)
		case reqKVHints:
			b = appendRaw(b, r.KVHints)
		default:
			b = append(b, s.def...)
		}
	}
	return b, aux, nil
}

// eosBit is _eos_token_id's bit for layouts that carry the EOS id in the request.
func (l *Layout) eosBit() uint64 {
	if l.eosInRequest {
		return 1 << 28
	}
	return 0
}

// harmless is the set keys of p whose value is what an engine that does not know the
// key does anyway, so leaving them out does not change the request:
// skip_reading_prefix_cache false (post-init's value when prompt logprobs are off).
func harmless(p *SamplingParams) uint64 {
	var h uint64
	if p.SkipReadingPrefixCache.Valid && !p.SkipReadingPrefixCache.Value {
		h |= 1 << 36
	}
	return h
}

// fits refuses a request that sets a field l has no place for, or a pass-through
// value written for another layout. One mask of what is set, compared with the
// layout's: a few ns per request.
func (l *Layout) fits(r *EngineCoreRequest) error {
	var set uint64
	bit := func(id uint8, on bool) {
		if on {
			set |= 1 << id
		}
	}
	bit(reqMMFeatures, r.MMFeatures != nil)
	bit(reqPooling, r.PoolingParams != nil)
	bit(reqLoRA, r.LoRA != nil)
	bit(reqCacheSalt, r.CacheSalt.Valid)
	bit(reqDPRank, r.DataParallelRank.Valid)
	bit(reqPromptEmbeds, r.PromptEmbeds != nil)
	bit(reqPromptIsTokenIDs, r.PromptIsTokenIDs != nil)
	bit(reqCurrentWave, r.CurrentWave != 0)
	bit(reqPriority, r.Priority != 0)
	bit(reqTraceHeaders, r.TraceHeaders != nil)
	bit(reqResumable, r.Resumable)
	// external_req_id only names the request in the engine's logs and events (the
	// user's id): a release without it is told nothing less, so it is not checked.
	bit(reqReasoningEnded, r.ReasoningEnded.Valid)
	bit(reqReasoningParserKwargs, r.ReasoningParserKwargs != nil)
	bit(reqAbortImmediately, r.AbortImmediately)
	bit(reqSessionID, r.SessionID.Valid)
	bit(reqKVHints, r.KVHints != nil)
	if miss := set &^ l.reqHas; miss != 0 {
		return &LayoutError{Layout: l.Name, Field: firstBitName(miss, requestFieldNames[:]), Msg: "engines of this vLLM release have no such field"}
	}
	// Raw values are written as the client protocol (the native layout) shaped them;
	// their inner structs moved between releases too.
	const raw = 1<<reqMMFeatures | 1<<reqPooling | 1<<reqKVHints
	if p := set & raw; p != 0 && !l.Native {
		return &LayoutError{Layout: l.Name, Field: firstBitName(p, requestFieldNames[:]), Msg: "passed through only to engines of the native layout (" + Native().Name + ")"}
	}
	if r.LoRA != nil {
		return l.loraCarries(r.LoRA)
	}
	return nil
}

// loraCarries refuses a LoRARequest that l's release cannot carry: one whose
// fields l does not know, or one that sets a field the release does not have
// (load_inplace before v0.15, is_3d_lora_weight before v0.21), which an engine
// of that release would not see.
func (l *Layout) loraCarries(lr *LoRARequest) error {
	if l.lora == nil {
		return &LayoutError{Layout: l.Name, Field: "lora_request", Msg: "LoRARequest's fields are not known for this vLLM release; load a layout file generated from its classes"}
	}
	has := func(id uint8) bool {
		for _, s := range l.lora {
			if s.id == id {
				return true
			}
		}
		return false
	}
	if lr.LoadInplace && !has(loraLoadInplace) {
		return &LayoutError{Layout: l.Name, Field: "lora_request.load_inplace", Msg: "engines of this vLLM release have no such field"}
	}
	if lr.Is3DLoRAWeight && !has(lora3DWeight) {
		return &LayoutError{Layout: l.Name, Field: "lora_request.is_3d_lora_weight", Msg: "engines of this vLLM release have no such field"}
	}
	return nil
}

// appendStrMap writes a {str: str} map (nil map = msgpack nil) with sorted keys, so
// the same request always encodes to the same bytes.
func appendStrMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return appendNil(b)
	}
	b = appendMapHeader(b, len(m))
	var stack [8]string
	keys := stack[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = appendStr(b, k)
		b = appendStr(b, m[k])
	}
	return b
}

// appendLoRA writes every LoRARequest field of l.
func (l *Layout) appendLoRA(b []byte, lr *LoRARequest) []byte {
	b = appendArrayHeader(b, len(l.lora))
	for _, s := range l.lora {
		switch s.id {
		case loraName:
			b = appendStr(b, lr.Name)
		case loraIntID:
			b = appendInt(b, lr.IntID)
		case loraPath:
			b = appendStr(b, lr.Path)
		case loraBaseModelName:
			b = appendOptStr(b, lr.BaseModelName)
		case loraTensorizerConfigDict:
			b = appendRaw(b, lr.TensorizerConfigDict)
		case loraLoadInplace:
			b = appendBool(b, lr.LoadInplace)
		case lora3DWeight:
			b = appendBool(b, lr.Is3DLoRAWeight)
		default:
			b = append(b, s.def...)
		}
	}
	return b
}

// DecodeAdd decodes an ADD in the native layout; see Layout.DecodeAdd.
func DecodeAdd(frames [][]byte, req *EngineCoreRequest) error {
	return Native().decodeAdd(frames, req, nil)
}

// DecodeAddWith is DecodeAdd with sp as the storage of the request's sampling
// params (req.Sampling is sp when it has them; sp is overwritten): a caller that
// allocates the two together saves the decoder an allocation of about a kilobyte
// per request.
func DecodeAddWith(frames [][]byte, req *EngineCoreRequest, sp *SamplingParams) error {
	return Native().decodeAdd(frames, req, sp)
}

// DecodeAdd decodes an ADD of layout l (frames[0] the body, frames[1:] aux frames) as
// strictly as the engine's msgspec decode does: l's required fields must be present,
// every field must have its declared type, trailing extra fields are ignored. It is
// stricter than an engine in one way: a SamplingParams key l does not list is an
// error (an engine would ignore it, and run another request than the one meant). An
// eos_token_id field (older layouts) lands in Sampling.EOSTokenID. Raw fields and
// tensor data alias the frames. It does not run SamplingParams' post-init checks;
// call Validate for those.
func (l *Layout) DecodeAdd(frames [][]byte, req *EngineCoreRequest) error {
	return l.decodeAdd(frames, req, nil)
}

// decodeAdd is DecodeAdd with sp, when not nil, as the sampling params' storage.
func (l *Layout) decodeAdd(frames [][]byte, req *EngineCoreRequest, sp *SamplingParams) error {
	const typ = "EngineCoreRequest"
	*req = EngineCoreRequest{}
	if len(frames) == 0 {
		return &DecodeError{Type: typ, Msg: "no frames"}
	}
	r := reader{b: frames[0], text: true}
	n, err := r.arrayHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	if n < l.RequestRequired {
		return &DecodeError{Type: typ, Msg: "expected at least " + itoa(l.RequestRequired) + " fields, got " + itoa(n)}
	}
	var eos OptInt
	for i := range min(n, len(l.req)) {
		id := l.req[i].id
		switch id {
		case reqEOSTokenID:
			eos, err = r.optInt()
		case reqLoRA:
			if !r.nextNil() {
				if l.lora == nil {
					return &DecodeError{Type: typ, Field: "lora_request", Offset: r.off, Msg: "LoRARequest's fields are unknown for layout " + l.Name}
				}
				req.LoRA = new(LoRARequest)
				err = r.lora(req.LoRA, l.lora)
			}
		default:
			err = r.addField(frames, req, id, sp)
		}
		if err != nil {
			return fieldErr(err, typ, l.Request[i].Name)
		}
	}
	if err := r.skipRest(n - len(l.req)); err != nil {
		return fieldErr(err, typ, "")
	}
	if !r.done() {
		return &DecodeError{Type: typ, Offset: r.off, Msg: "trailing bytes after the request"}
	}
	if (req.Sampling == nil) == (req.PoolingParams == nil) {
		return &DecodeError{Type: typ, Field: "sampling_params", Msg: "exactly one of sampling_params and pooling_params must be set"}
	}
	if p := req.Sampling; p != nil {
		if l.eosInRequest {
			if p.EOSTokenID.Valid {
				return &DecodeError{Type: typ, Field: "sampling_params", Msg: "_eos_token_id: layout " + l.Name + " carries the EOS id in eos_token_id"}
			}
			p.EOSTokenID = eos
		}
		if !l.Native { // the native layout keeps unknown keys in Unknown; Validate refuses them
			if err := l.knowsSampling(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// knowsSampling refuses a decoded SamplingParams holding a key l does not list.
func (l *Layout) knowsSampling(p *SamplingParams) error {
	// Encoding into a pooled buffer is how the set keys are found: one list of
	// "what is set" (appendSampling's), and no allocation per request.
	buf, dropped := appendSampling(GetBuffer(), p, l.sampling|l.eosBit())
	PutBuffer(buf)
	if dropped != 0 {
		k := firstBitName(dropped, samplingKeyNames[:])
		if dropped&samplingUnknownBit != 0 && len(p.Unknown) > 0 {
			k = p.Unknown[0].Key
		}
		return &DecodeError{Type: "SamplingParams", Field: k, Msg: "not a key of layout " + l.Name}
	}
	return nil
}

func (r *reader) addField(frames [][]byte, q *EngineCoreRequest, id uint8, sp *SamplingParams) (err error) {
	switch id {
	case reqRequestID:
		q.RequestID, err = r.str()
	case reqPromptTokenIDs:
		q.PromptTokenIDs, err = r.optInts()
	case reqMMFeatures:
		q.MMFeatures, err = r.rawOf(kindArray)
	case reqSampling:
		if !r.nextNil() {
			if sp == nil {
				sp = new(SamplingParams)
			}
			q.Sampling = sp // samplingParams overwrites all of it
			err = r.samplingParams(q.Sampling)
		}
	case reqPooling:
		q.PoolingParams, err = r.rawOf(kindArray)
	case reqArrivalTime:
		q.ArrivalTime, err = r.float()
	case reqCacheSalt:
		q.CacheSalt, err = r.optStr()
	case reqDPRank:
		q.DataParallelRank, err = r.optInt()
	case reqPromptEmbeds:
		start := r.off
		if q.PromptEmbeds, err = r.optTensor(frames); err == nil && q.PromptEmbeds != nil {
			// The engine's decode hook (_decode_tensor) raises on these; AppendAdd
			// refuses them too, so whatever decodes here can be encoded again.
			if cerr := q.PromptEmbeds.CheckTorch(); cerr != nil {
				ve := cerr.(*ValidationError)
				err = &DecodeError{Type: "Tensor", Field: ve.Field, Offset: start, Msg: ve.Msg}
			}
		}
	case reqPromptIsTokenIDs:
		if r.nextNil() {
			return nil
		}
		var n int
		if n, err = r.arrayHeader(); err != nil {
			return err
		}
		q.PromptIsTokenIDs = make([]bool, n)
		for j := range q.PromptIsTokenIDs {
			if q.PromptIsTokenIDs[j], err = r.bool(); err != nil {
				return err
			}
		}
	case reqClientIndex:
		q.ClientIndex, err = r.int()
	case reqCurrentWave:
		q.CurrentWave, err = r.int()
	case reqPriority:
		q.Priority, err = r.int()
	case reqTraceHeaders:
		q.TraceHeaders, err = r.strMap()
	case reqResumable:
		q.Resumable, err = r.bool()
	case reqExternalReqID:
		q.ExternalReqID, err = r.optStr()
	case reqReasoningEnded:
		q.ReasoningEnded, err = r.optBool()
	case reqReasoningParserKwargs:
		q.ReasoningParserKwargs, err = r.rawOf(kindMap)
	case reqAbortImmediately:
		q.AbortImmediately, err = r.bool()
	case reqSessionID:
		q.SessionID, err = r.optStr()
	case reqKVHints:
		q.KVHints, err = r.rawOf(kindMap)
	default:
		err = r.skip()
	}
	return err
}

// strMap reads {str: str} | nil.
func (r *reader) strMap() (map[string]string, error) {
	if r.nextNil() {
		return nil, nil
	}
	n, err := r.mapHeader()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, n)
	for range n {
		k, err := r.str()
		if err != nil {
			return nil, err
		}
		v, err := r.str()
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// lora reads a LoRARequest array of the given layout: name and int id are required,
// the rest default.
func (r *reader) lora(l *LoRARequest, slots []slot) error {
	const typ = "LoRARequest"
	n, err := r.arrayHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	if n < 2 {
		return &DecodeError{Type: typ, Offset: r.off, Msg: "expected at least 2 fields, got " + itoa(n)}
	}
	for i := range min(n, len(slots)) {
		id := slots[i].id
		switch id {
		case loraName:
			l.Name, err = r.str()
		case loraIntID:
			l.IntID, err = r.int()
		case loraPath:
			l.Path, err = r.str()
		case loraBaseModelName:
			l.BaseModelName, err = r.optStr()
		case loraTensorizerConfigDict:
			l.TensorizerConfigDict, err = r.rawOf(kindMap)
		case loraLoadInplace:
			l.LoadInplace, err = r.bool()
		case lora3DWeight:
			l.Is3DLoRAWeight, err = r.bool()
		default:
			err = r.skip()
		}
		if err != nil {
			return fieldErr(err, typ, loraFieldNames[id])
		}
	}
	return fieldErr(r.skipRest(n-len(slots)), typ, "")
}
