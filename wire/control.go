package wire

// The small control messages: ABORT and UTILITY (frontend -> engine), START_DP_WAVE
// (coordinator -> engine), the coordinator's publish to frontends and FIRST_REQ
// (frontend -> coordinator). The engine decodes ABORT and UTILITY untyped, so their
// decoders here are lenient about trailing elements and strict about element types
// and UTF-8.

import "unicode/utf8"

// AppendAbort appends the ABORT body: an array of request ids.
func AppendAbort(dst []byte, ids []string) []byte { return appendStrs(dst, ids) }

// DecodeAbort decodes an ABORT body.
func DecodeAbort(body []byte) ([]string, error) {
	r := reader{b: body, text: true}
	ids, err := r.optStrs()
	if err == nil && ids == nil {
		err = &DecodeError{Msg: "expected array, got nil"}
	}
	if err == nil && !r.done() {
		err = &DecodeError{Offset: r.off, Msg: "trailing bytes"}
	}
	if err != nil {
		return nil, fieldErr(err, "Abort", "request_ids")
	}
	return ids, nil
}

// AppendUtility appends a UTILITY body [client_index, call_id, method, args]. args
// must be one msgpack array (nil or empty means no arguments and is written as []).
func AppendUtility(dst []byte, clientIndex int64, callID uint64, method string, args Raw) ([]byte, error) {
	if len(args) > 0 && (kindOf(args[0]) != kindArray || !validRaw(args)) {
		return dst, ErrUtilityArgsArray
	}
	// The engine decodes the body untyped in its input thread: a str that is not
	// UTF-8 or an ext it has no hook for raises there and kills the thread.
	if !utf8.ValidString(method) {
		return dst, &EncodeError{Type: "Utility", Field: "method", Msg: "not valid UTF-8"}
	}
	if msg := checkAny(args); msg != "" {
		return dst, &EncodeError{Type: "Utility", Field: "args", Msg: msg}
	}
	b := append(dst, 0x94)
	b = appendInt(b, clientIndex)
	b = appendUint(b, callID)
	b = appendStr(b, method)
	if len(args) == 0 {
		return append(b, 0x90), nil
	}
	return append(b, args...), nil
}

// DecodeUtility decodes a UTILITY body. A negative call id comes back as its two's
// complement bit pattern; args is the raw msgpack array (a view into body).
func DecodeUtility(body []byte) (clientIndex int64, callID uint64, method string, args Raw, err error) {
	const typ = "Utility"
	r := reader{b: body, text: true}
	n, err := r.arrayHeader()
	if err != nil {
		return 0, 0, "", nil, fieldErr(err, typ, "")
	}
	if n < 4 {
		return 0, 0, "", nil, &DecodeError{Type: typ, Msg: "expected [client_index, call_id, method, args], got an array of " + itoa(n)}
	}
	if clientIndex, err = r.int(); err != nil {
		return 0, 0, "", nil, fieldErr(err, typ, "client_index")
	}
	if callID, _, err = r.intRaw(); err != nil {
		return 0, 0, "", nil, fieldErr(err, typ, "call_id")
	}
	if method, err = r.str(); err != nil {
		return 0, 0, "", nil, fieldErr(err, typ, "method")
	}
	if r.peek() != kindArray {
		return 0, 0, "", nil, fieldErr(r.expected("array"), typ, "args")
	}
	start := r.off
	if args, err = r.raw(); err != nil {
		return 0, 0, "", nil, fieldErr(err, typ, "args")
	}
	if msg := checkAny(args); msg != "" { // what AppendUtility refuses
		return 0, 0, "", nil, &DecodeError{Type: typ, Field: "args", Offset: start, Msg: msg}
	}
	if err = r.skipRest(n - 4); err == nil && !r.done() {
		err = &DecodeError{Offset: r.off, Msg: "trailing bytes"}
	}
	if err != nil {
		return 0, 0, "", nil, fieldErr(err, typ, "")
	}
	return clientIndex, callID, method, args, nil
}

// AppendStartDPWave appends [wave, exclude_engine_index | nil].
func AppendStartDPWave(dst []byte, w StartDPWave) []byte {
	b := append(dst, 0x92)
	b = appendInt(b, w.Wave)
	return appendOptInt(b, w.Exclude)
}

// DecodeStartDPWave decodes a START_DP_WAVE body. A Python coordinator forwards the
// target engine as a 2-byte identity (bin) in exclude; a real engine compares exclude
// with its int index, which bytes never equal, so every engine wakes. We decode it
// the same way: Exclude unset.
func DecodeStartDPWave(body []byte) (StartDPWave, error) {
	const typ = "StartDPWave"
	var w StartDPWave
	r := reader{b: body}
	n, err := r.arrayHeader()
	if err != nil {
		return w, fieldErr(err, typ, "")
	}
	if n < 2 {
		return w, &DecodeError{Type: typ, Msg: "expected [wave, exclude_engine_index], got an array of " + itoa(n)}
	}
	if w.Wave, err = r.int(); err != nil {
		return w, fieldErr(err, typ, "wave")
	}
	if r.peek() == kindBin {
		if _, err = r.bin(); err != nil {
			return w, fieldErr(err, typ, "exclude_engine_index")
		}
	} else if w.Exclude, err = r.optInt(); err != nil {
		return w, fieldErr(err, typ, "exclude_engine_index")
	}
	if err = r.skipRest(n - 2); err == nil && !r.done() {
		err = &DecodeError{Offset: r.off, Msg: "trailing bytes"}
	}
	return w, fieldErr(err, typ, "")
}

// AppendCoordinatorPublish appends [counts | nil, current_wave, engines_running] with
// three-element counts [waiting, running, kv_cache_usage].
func AppendCoordinatorPublish(dst []byte, p *CoordinatorPublish) []byte {
	b := append(dst, 0x93)
	if p.Counts == nil {
		b = appendNil(b)
	} else {
		b = appendArrayHeader(b, len(p.Counts))
		for _, c := range p.Counts {
			b = append(b, 0x93)
			b = appendInt(b, c.Waiting)
			b = appendInt(b, c.Running)
			b = appendFloat(b, c.KVCacheUsage)
		}
	}
	b = appendInt(b, p.CurrentWave)
	return appendBool(b, p.EnginesRunning)
}

// DecodeCoordinatorPublish decodes a publish; counts entries may be the older
// two-element [waiting, running] (KVCacheUsage 0) or longer.
func DecodeCoordinatorPublish(body []byte) (CoordinatorPublish, error) {
	const typ = "CoordinatorPublish"
	var p CoordinatorPublish
	r := reader{b: body}
	n, err := r.arrayHeader()
	if err != nil {
		return p, fieldErr(err, typ, "")
	}
	if n < 3 {
		return p, &DecodeError{Type: typ, Msg: "expected [counts, current_wave, engines_running], got an array of " + itoa(n)}
	}
	if !r.nextNil() {
		m, err := r.arrayHeader()
		if err != nil {
			return p, fieldErr(err, typ, "counts")
		}
		p.Counts = make([]EngineLoad, 0, r.capFor(m, 3)) // [w, r] takes 3 bytes at least
		for range m {
			var l EngineLoad
			if err := r.engineLoad(&l); err != nil {
				return p, fieldErr(err, typ, "counts")
			}
			p.Counts = append(p.Counts, l)
		}
	}
	if p.CurrentWave, err = r.int(); err != nil {
		return p, fieldErr(err, typ, "current_wave")
	}
	if p.EnginesRunning, err = r.bool(); err != nil {
		return p, fieldErr(err, typ, "engines_running")
	}
	if err = r.skipRest(n - 3); err == nil && !r.done() {
		err = &DecodeError{Offset: r.off, Msg: "trailing bytes"}
	}
	return p, fieldErr(err, typ, "")
}

func (r *reader) engineLoad(l *EngineLoad) error {
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	if n < 2 {
		return &DecodeError{Offset: r.off, Msg: "expected [waiting, running, kv_cache_usage]"}
	}
	if l.Waiting, err = r.int(); err != nil {
		return err
	}
	if l.Running, err = r.int(); err != nil {
		return err
	}
	if n >= 3 {
		if l.KVCacheUsage, err = r.float(); err != nil {
			return err
		}
	}
	return r.skipRest(n - 3)
}

// AppendFirstReq appends [target_engine, current_wave]: the identity as bin when
// HasIdentity (what Python sends), else the engine index as an int.
func AppendFirstReq(dst []byte, f FirstReq) []byte {
	b := append(dst, 0x92)
	if f.HasIdentity {
		b = appendBin(b, f.Identity[:])
	} else {
		b = appendInt(b, f.EngineIndex)
	}
	return appendInt(b, f.Wave)
}

// DecodeFirstReq decodes FIRST_REQ, accepting the engine as a 2-byte bin identity or
// an int. EngineIndex is filled in both cases.
func DecodeFirstReq(body []byte) (FirstReq, error) {
	const typ = "FirstReq"
	var f FirstReq
	r := reader{b: body}
	n, err := r.arrayHeader()
	if err != nil {
		return f, fieldErr(err, typ, "")
	}
	if n < 2 {
		return f, &DecodeError{Type: typ, Msg: "expected [target_engine, current_wave], got an array of " + itoa(n)}
	}
	switch r.peek() {
	case kindBin:
		start := r.off
		b, _ := r.bin()
		id, ok := ParseIdentity(b)
		if !ok {
			return f, &DecodeError{Type: typ, Field: "target_engine", Offset: start, Msg: "bin identity must be 2 bytes"}
		}
		f.Identity, f.HasIdentity, f.EngineIndex = id, true, int64(id.Rank())
	case kindInt:
		if f.EngineIndex, err = r.int(); err != nil {
			return f, fieldErr(err, typ, "target_engine")
		}
	default:
		return f, fieldErr(r.expected("bin or int"), typ, "target_engine")
	}
	if f.Wave, err = r.int(); err != nil {
		return f, fieldErr(err, typ, "current_wave")
	}
	if err = r.skipRest(n - 2); err == nil && !r.done() {
		err = &DecodeError{Offset: r.off, Msg: "trailing bytes"}
	}
	return f, fieldErr(err, typ, "")
}
