package wire

import "encoding/binary"

// Decoding EngineCoreOutputs, the hot receive path: a busy engine sends one message
// per step holding one entry per running request. The decoder keeps its scratch
// between calls and allocates per message, not per entry: every entry's token ids
// share one backing array and every request id is a substring of one string.

// OutputsDecoder decodes output messages, reusing its scratch space and the Outputs
// slice of the target between calls. Not safe for concurrent use; one per receive loop.
//
// What survives the next Decode: request ids, token-id slices, Raw values and tensor
// data (these never point into the decoder's scratch; Raw and tensor data alias the
// frames). What does not: the Outputs slice itself, which the next Decode into the
// same *EngineCoreOutputs overwrites; copy an entry (a struct copy is enough) to keep it.
// Because one message's ids share one string and its tokens one array, keeping any
// entry's id or tokens keeps that message's few kilobytes alive; copy (strings.Clone,
// slices.Clone) what is kept for long.
type OutputsDecoder struct {
	// Layout is the engine's wire layout; nil is the native (newest) one. Set it
	// before the first Decode.
	Layout *Layout

	tokens []int64 // every entry's new_token_ids, back to back
	ids    []byte  // every request id (and finished id), back to back
	spans  []span  // where each entry's id and tokens sit in the scratch
	fin    []span  // where each finished_requests id sits in ids

	// The shortest and longest EngineCoreOutput array of the last Decode, for
	// CheckLayout (0 when it had no entry).
	minFields, maxFields int
}

type span struct{ idStart, idEnd, tokStart, tokEnd int }

// DecodeOutputs decodes one output message (frames[0] the body, frames[1:] aux
// frames) into a fresh *o.
func DecodeOutputs(frames [][]byte, o *EngineCoreOutputs) error {
	var d OutputsDecoder
	*o = EngineCoreOutputs{}
	return d.Decode(frames, o)
}

// Decode decodes one output message into o, reusing o.Outputs' capacity. It follows
// msgspec: shorter arrays take defaults for missing trailing fields, longer arrays
// have their extra elements ignored, maps may carry unknown keys.
func (d *OutputsDecoder) Decode(frames [][]byte, o *EngineCoreOutputs) error {
	const typ = "EngineCoreOutputs"
	outs := o.Outputs[:0]
	*o = EngineCoreOutputs{}
	if len(frames) == 0 {
		return &DecodeError{Type: typ, Msg: "no frames"}
	}
	d.tokens, d.ids, d.spans, d.fin = d.tokens[:0], d.ids[:0], d.spans[:0], d.fin[:0]
	d.minFields, d.maxFields = 0, 0
	if d.Layout == nil {
		d.Layout = Native()
	}
	r := reader{b: frames[0]}
	n, err := r.arrayHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	names := &outputsFieldNames
	for i := range min(n, len(names)) {
		switch i {
		case 0:
			o.EngineIndex, err = r.int()
		case 1:
			outs, err = d.outputs(&r, frames, outs)
		case 2:
			if !r.nextNil() {
				o.SchedulerStats, err = r.schedulerStats()
			}
		case 3:
			o.Timestamp, err = r.float()
		case 4:
			if !r.nextNil() {
				o.UtilityOutput, err = r.utilityOutput()
			}
		case 5:
			err = d.finished(&r)
		case 6:
			o.WaveComplete, err = r.optInt()
		case 7:
			o.StartWave, err = r.optInt()
		}
		if err != nil {
			o.Outputs = outs[:0] // keep the capacity for the next call
			return fieldErr(err, typ, names[i])
		}
	}
	if err := r.skipRest(n - len(names)); err != nil {
		return fieldErr(err, typ, "")
	}
	if !r.done() {
		return &DecodeError{Type: typ, Offset: r.off, Msg: "trailing bytes after the message"}
	}
	d.publish(o, outs)
	return nil
}

// PeekEngineIndex reads an output message's engine_index (its first field in every
// layout) without decoding the rest, so a socket shared by engines of several
// layouts can pick the decoder.
func PeekEngineIndex(body []byte) (int64, error) {
	r := reader{b: body}
	n, err := r.arrayHeader()
	if err == nil && n < 1 {
		err = r.errorf("empty EngineCoreOutputs")
	}
	if err != nil {
		return 0, fieldErr(err, "EngineCoreOutputs", "")
	}
	v, err := r.int()
	return v, fieldErr(err, "EngineCoreOutputs", "engine_index")
}

// publish gives the entries their ids and tokens: one string and one []int64 for the
// whole message, sliced per entry, so nothing points into the reused scratch.
func (d *OutputsDecoder) publish(o *EngineCoreOutputs, outs []EngineCoreOutput) {
	ids := string(d.ids)
	var toks []int64
	if len(d.tokens) > 0 {
		toks = make([]int64, len(d.tokens))
		copy(toks, d.tokens)
	}
	for i := range outs {
		s := d.spans[i]
		outs[i].RequestID = ids[s.idStart:s.idEnd]
		if toks == nil {
			outs[i].NewTokenIDs = []int64{} // [] on the wire: empty, not absent
		} else {
			outs[i].NewTokenIDs = toks[s.tokStart:s.tokEnd:s.tokEnd]
		}
	}
	o.Outputs = outs
	if len(d.fin) > 0 { // d.fin[0] is the "present" marker
		o.FinishedRequests = make([]string, len(d.fin)-1)
		for i, s := range d.fin[1:] {
			o.FinishedRequests[i] = ids[s.idStart:s.idEnd]
		}
	}
}

// outputs reads [EngineCoreOutput]; the list is not optional.
func (d *OutputsDecoder) outputs(r *reader, frames [][]byte, outs []EngineCoreOutput) ([]EngineCoreOutput, error) {
	n, err := r.arrayHeader()
	if err != nil {
		return outs, err
	}
	if cap(outs) < n {
		outs = make([]EngineCoreOutput, 0, r.capFor(n, 3)) // ["", []] takes 3 bytes
	}
	if outs == nil {
		outs = []EngineCoreOutput{} // [] on the wire: present and empty
	}
	for range n {
		outs = append(outs, EngineCoreOutput{})
		if err := d.output(r, frames, &outs[len(outs)-1]); err != nil {
			return outs, err
		}
	}
	return outs, nil
}

// output reads one EngineCoreOutput of d.Layout. request_id and new_token_ids are
// required (every layout starts with them); fields past the layout's are skipped.
func (d *OutputsDecoder) output(r *reader, frames [][]byte, e *EngineCoreOutput) error {
	const typ = "EngineCoreOutput"
	n, err := r.arrayHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	if n < 2 {
		return &DecodeError{Type: typ, Offset: r.off, Msg: "expected at least 2 fields (request_id, new_token_ids), got " + itoa(n)}
	}
	e.FinishReason = FinishNone
	if d.minFields == 0 || n < d.minFields {
		d.minFields = n
	}
	d.maxFields = max(d.maxFields, n)
	var s span
	slots := d.Layout.out
	for i := range min(n, len(slots)) {
		if i >= 2 && r.nextNil() { // most fields are nil in most steps
			continue
		}
		id := slots[i].id
		switch id {
		case outRequestID:
			var b []byte
			if b, err = r.strBytes(); err == nil {
				s.idStart = len(d.ids)
				d.ids = append(d.ids, b...)
				s.idEnd = len(d.ids)
			}
		case outNewTokenIDs:
			s.tokStart = len(d.tokens)
			d.tokens, err = r.appendInts(d.tokens)
			s.tokEnd = len(d.tokens)
		case outNewLogprobs:
			e.NewLogprobs, err = r.logprobsLists(frames)
		case outNewPromptLogprobsTensors:
			e.NewPromptLogprobsTensors, err = r.logprobsTensors(frames)
		case outPoolingOutput:
			e.PoolingOutput, err = r.optTensor(frames)
		case outFinishReason:
			e.FinishReason, err = r.finishReason()
		case outStopReason:
			e.StopReason, err = r.stopReason()
		case outEvents:
			e.Events, err = r.events()
		case outKVTransferParams:
			e.KVTransferParams, err = r.rawOf(kindMap)
		case outECTransferParams:
			e.ECTransferParams, err = r.rawOf(kindMap)
		case outTraceHeaders:
			e.TraceHeaders, err = r.rawOf(kindMap)
		case outNumCachedTokens:
			e.NumCachedTokens, err = r.int()
		case outNumExternalComputedTokens:
			e.NumExternalComputedTokens, err = r.int()
		case outPrefillStats:
			e.PrefillStats, err = r.prefillStats()
		case outRoutedExperts:
			e.RoutedExperts, err = r.optTensor(frames)
		case outNumNaNsInLogits:
			e.NumNaNsInLogits, err = r.int()
		case outMMCacheMissHashes:
			e.MMCacheMissHashes, err = r.optStrs()
		case outNewSamplingMask:
			e.NewSamplingMask, err = r.raw()
		case outSpecDecodeMetrics:
			e.SpecDecodeMetrics, err = r.rawOf(kindMap)
		default:
			err = r.skip()
		}
		if err != nil {
			return fieldErr(err, typ, d.Layout.Output[i].Name)
		}
	}
	d.spans = append(d.spans, s)
	return fieldErr(r.skipRest(n-len(slots)), typ, "")
}

// CheckLayout confirms the last decoded message fits d.Layout exactly: msgspec writes
// every field of an array_like struct, so each EngineCoreOutput must have as many
// fields as the layout. Decode itself is lenient (a longer array's extra fields are
// skipped); the frontend calls this on an engine's first outputs, where a mismatch
// means it was placed on the wrong layout.
func (d *OutputsDecoder) CheckLayout() error {
	want := len(d.Layout.out)
	if d.maxFields == 0 || d.minFields == want && d.maxFields == want {
		return nil
	}
	got := d.maxFields
	if d.maxFields == want {
		got = d.minFields
	}
	return &LayoutMismatchError{Layout: d.Layout.Name, Msg: "EngineCoreOutput has " + itoa(got) + " fields, the layout " + itoa(want) + " (" + fieldList(d.Layout.Output) + ")"}
}

func fieldList(fs []Field) string {
	var b []byte
	for i, f := range fs {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, f.Name...)
	}
	return string(b)
}

// appendInts reads [int] onto buf.
func (r *reader) appendInts(buf []int64) ([]int64, error) {
	n, err := r.arrayHeader()
	if err != nil {
		return buf, err
	}
	buf = growInts(buf, n)
	for range n {
		// Token ids are almost always positive fixints, uint16 or uint32: those are
		// read inline, the rest (and every error) through int.
		if b := r.b[r.off:]; len(b) > 0 {
			switch c := b[0]; {
			case c <= 0x7f:
				r.off++
				buf = append(buf, int64(c))
				continue
			case c == 0xcd && len(b) >= 3:
				r.off += 3
				buf = append(buf, int64(binary.BigEndian.Uint16(b[1:])))
				continue
			case c == 0xce && len(b) >= 5:
				r.off += 5
				buf = append(buf, int64(binary.BigEndian.Uint32(b[1:])))
				continue
			}
		}
		v, err := r.int()
		if err != nil {
			return buf, err
		}
		buf = append(buf, v)
	}
	return buf, nil
}

func growInts(buf []int64, n int) []int64 {
	if cap(buf)-len(buf) < n {
		nb := make([]int64, len(buf), 2*cap(buf)+n)
		copy(nb, buf)
		return nb
	}
	return buf
}

// finished reads finished_requests ([str] | nil) into the id scratch.
func (d *OutputsDecoder) finished(r *reader) error {
	if r.nextNil() {
		return nil
	}
	n, err := r.arrayHeader()
	if err != nil {
		return err
	}
	d.fin = append(d.fin, span{}) // marks "present", even when empty
	for range n {
		id, err := r.strBytes()
		if err != nil {
			return err
		}
		s := span{idStart: len(d.ids)}
		d.ids = append(d.ids, id...)
		s.idEnd = len(d.ids)
		d.fin = append(d.fin, s)
	}
	return nil
}
