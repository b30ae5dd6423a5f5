package wire

import "slices"

// addFields is the number of EngineCoreRequest fields msgspec 0.19 writes (0..20);
// kv_hints (21) is appended only when set.
const (
	addFields         = 21
	addRequiredFields = 9
)

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

// AppendAdd appends the ADD body for r to dst and returns it with the aux frames its
// large tensors need (nil when there are none): 21 positional fields, plus kv_hints
// when set. Call Validate (after Prepare) before sending: AppendAdd only refuses
// what cannot be encoded at all, and a prompt_embeds tensor the engine cannot view.
func AppendAdd(dst []byte, r *EngineCoreRequest) (body []byte, aux [][]byte, err error) {
	if r == nil {
		return dst, nil, ErrNilRequest
	}
	if (r.Sampling == nil) == (r.PoolingParams == nil) {
		return dst, nil, ErrParamsExclusive
	}
	if t := r.PromptEmbeds; t != nil {
		// A tensor the engine's decode hook cannot view kills its input thread;
		// refuse it even when the caller skipped Validate.
		if err := t.CheckTorch(); err != nil {
			return dst, nil, &EncodeError{Type: "EngineCoreRequest", Field: "prompt_embeds", Msg: err.(*ValidationError).Field + ": " + err.(*ValidationError).Msg}
		}
	}
	b := dst
	if r.KVHints != nil {
		b = appendArrayHeader(b, addFields+1)
	} else {
		b = appendArrayHeader(b, addFields)
	}
	b = appendStr(b, r.RequestID)
	if r.PromptTokenIDs == nil {
		b = appendNil(b)
	} else {
		b = appendInts(b, r.PromptTokenIDs)
	}
	b = appendRaw(b, r.MMFeatures)
	if r.Sampling != nil {
		b = appendSampling(b, r.Sampling)
	} else {
		b = appendNil(b)
	}
	b = appendRaw(b, r.PoolingParams)
	b = appendFloat(b, r.ArrivalTime)
	if r.LoRA != nil {
		b = appendLoRA(b, r.LoRA)
	} else {
		b = appendNil(b)
	}
	b = appendOptStr(b, r.CacheSalt)
	b = appendOptInt(b, r.DataParallelRank)
	if r.PromptEmbeds != nil {
		b, aux = appendTensor(b, r.PromptEmbeds, aux)
	} else {
		b = appendNil(b)
	}
	if r.PromptIsTokenIDs == nil {
		b = appendNil(b)
	} else {
		b = appendArrayHeader(b, len(r.PromptIsTokenIDs))
		for _, v := range r.PromptIsTokenIDs {
			b = appendBool(b, v)
		}
	}
	b = appendInt(b, r.ClientIndex)
	b = appendInt(b, r.CurrentWave)
	b = appendInt(b, r.Priority)
	b = appendStrMap(b, r.TraceHeaders)
	b = appendBool(b, r.Resumable)
	b = appendOptStr(b, r.ExternalReqID)
	b = appendOptBool(b, r.ReasoningEnded)
	b = appendRaw(b, r.ReasoningParserKwargs)
	b = appendBool(b, r.AbortImmediately)
	b = appendOptStr(b, r.SessionID)
	if r.KVHints != nil {
		b = appendRaw(b, r.KVHints)
	}
	return b, aux, nil
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

// appendLoRA writes all seven LoRARequest fields.
func appendLoRA(b []byte, l *LoRARequest) []byte {
	b = append(b, 0x97)
	b = appendStr(b, l.Name)
	b = appendInt(b, l.IntID)
	b = appendStr(b, l.Path)
	b = appendOptStr(b, l.BaseModelName)
	b = appendRaw(b, l.TensorizerConfigDict)
	b = appendBool(b, l.LoadInplace)
	return appendBool(b, l.Is3DLoRAWeight)
}

// DecodeAdd decodes an ADD (frames[0] the body, frames[1:] aux frames) as strictly
// as the engine's msgspec decode does: the 9 required fields must be present, every
// field must have its declared type, trailing extra fields are ignored. Raw fields
// and tensor data alias the frames. It does not run SamplingParams' post-init
// checks; call Validate for those.
func DecodeAdd(frames [][]byte, req *EngineCoreRequest) error {
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
	if n < addRequiredFields {
		return &DecodeError{Type: typ, Msg: "expected at least 9 fields, got " + itoa(n)}
	}
	for i := range n {
		if i > 21 {
			if err := r.skipRest(n - i); err != nil {
				return fieldErr(err, typ, "")
			}
			break
		}
		if err := r.addField(frames, req, i); err != nil {
			return fieldErr(err, typ, addFieldNames[i])
		}
	}
	if !r.done() {
		return &DecodeError{Type: typ, Offset: r.off, Msg: "trailing bytes after the request"}
	}
	if (req.Sampling == nil) == (req.PoolingParams == nil) {
		return &DecodeError{Type: typ, Field: "sampling_params", Msg: "exactly one of sampling_params and pooling_params must be set"}
	}
	return nil
}

var addFieldNames = [...]string{
	"request_id", "prompt_token_ids", "mm_features", "sampling_params", "pooling_params",
	"arrival_time", "lora_request", "cache_salt", "data_parallel_rank", "prompt_embeds",
	"prompt_is_token_ids", "client_index", "current_wave", "priority", "trace_headers",
	"resumable", "external_req_id", "reasoning_ended", "reasoning_parser_kwargs",
	"abort_immediately", "session_id", "kv_hints",
}

func (r *reader) addField(frames [][]byte, q *EngineCoreRequest, i int) (err error) {
	switch i {
	case 0:
		q.RequestID, err = r.str()
	case 1:
		q.PromptTokenIDs, err = r.optInts()
	case 2:
		q.MMFeatures, err = r.rawOf(kindArray)
	case 3:
		if !r.nextNil() {
			q.Sampling = new(SamplingParams)
			err = r.samplingParams(q.Sampling)
		}
	case 4:
		q.PoolingParams, err = r.rawOf(kindArray)
	case 5:
		q.ArrivalTime, err = r.float()
	case 6:
		if !r.nextNil() {
			q.LoRA = new(LoRARequest)
			err = r.lora(q.LoRA)
		}
	case 7:
		q.CacheSalt, err = r.optStr()
	case 8:
		q.DataParallelRank, err = r.optInt()
	case 9:
		start := r.off
		if q.PromptEmbeds, err = r.optTensor(frames); err == nil && q.PromptEmbeds != nil {
			// The engine's decode hook (_decode_tensor) raises on these; AppendAdd
			// refuses them too, so whatever decodes here can be encoded again.
			if cerr := q.PromptEmbeds.CheckTorch(); cerr != nil {
				ve := cerr.(*ValidationError)
				err = &DecodeError{Type: "Tensor", Field: ve.Field, Offset: start, Msg: ve.Msg}
			}
		}
	case 10:
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
	case 11:
		q.ClientIndex, err = r.int()
	case 12:
		q.CurrentWave, err = r.int()
	case 13:
		q.Priority, err = r.int()
	case 14:
		q.TraceHeaders, err = r.strMap()
	case 15:
		q.Resumable, err = r.bool()
	case 16:
		q.ExternalReqID, err = r.optStr()
	case 17:
		q.ReasoningEnded, err = r.optBool()
	case 18:
		q.ReasoningParserKwargs, err = r.rawOf(kindMap)
	case 19:
		q.AbortImmediately, err = r.bool()
	case 20:
		q.SessionID, err = r.optStr()
	case 21:
		q.KVHints, err = r.rawOf(kindMap)
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

// lora reads a LoRARequest array: name and int id are required, the rest default.
func (r *reader) lora(l *LoRARequest) error {
	const typ = "LoRARequest"
	n, err := r.arrayHeader()
	if err != nil {
		return fieldErr(err, typ, "")
	}
	if n < 2 {
		return &DecodeError{Type: typ, Offset: r.off, Msg: "expected at least 2 fields, got " + itoa(n)}
	}
	names := [...]string{"lora_name", "lora_int_id", "lora_path", "base_model_name", "tensorizer_config_dict", "load_inplace", "is_3d_lora_weight"}
	for i := range min(n, len(names)) {
		switch i {
		case 0:
			l.Name, err = r.str()
		case 1:
			l.IntID, err = r.int()
		case 2:
			l.Path, err = r.str()
		case 3:
			l.BaseModelName, err = r.optStr()
		case 4:
			l.TensorizerConfigDict, err = r.rawOf(kindMap)
		case 5:
			l.LoadInplace, err = r.bool()
		case 6:
			l.Is3DLoRAWeight, err = r.bool()
		}
		if err != nil {
			return fieldErr(err, typ, names[i])
		}
	}
	return fieldErr(r.skipRest(n-len(names)), typ, "")
}
