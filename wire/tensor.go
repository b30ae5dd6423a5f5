package wire

import "strconv"

// Tensors and ndarrays travel as [dtype, shape, data] (vllm/v1/serial_utils.py):
// data is ext 3 (raw bytes) inline when the buffer is smaller than the zero-copy
// threshold, otherwise an int index into the message's frames (frame 0 is the
// msgpack body, so the first aux frame is index 1).

// AuxThreshold is vLLM's VLLM_MSGPACK_ZERO_COPY_THRESHOLD default: buffers of at
// least this many bytes are sent as separate frames.
const AuxThreshold = 256

// appendTensor writes t, moving its data into aux when it is large. aux indices
// count from 1 because the body is frame 0.
func appendTensor(b []byte, t *Tensor, aux [][]byte) ([]byte, [][]byte) {
	b = append(b, 0x93)
	b = appendStr(b, t.DType)
	b = appendInts(b, t.Shape)
	if len(t.Data) < AuxThreshold {
		return appendExt(b, extRawView, t.Data), aux
	}
	aux = append(aux, t.Data)
	return appendInt(b, int64(len(aux))), aux
}

// tensor reads [dtype, shape, data]. Data aliases the frame it came from (inline or
// aux); extra trailing elements are ignored as msgspec ignores them.
func (r *reader) tensor(frames [][]byte) (Tensor, error) {
	var t Tensor
	n, err := r.arrayHeader()
	if err != nil {
		return t, fieldErr(err, "Tensor", "")
	}
	if n < 3 {
		return t, &DecodeError{Type: "Tensor", Offset: r.off, Msg: "expected [dtype, shape, data], got an array of " + itoa(n)}
	}
	if t.DType, err = r.str(); err != nil {
		return t, fieldErr(err, "Tensor", "dtype")
	}
	if t.Shape, err = r.ints(nil); err != nil {
		return t, fieldErr(err, "Tensor", "shape")
	}
	for _, d := range t.Shape {
		if d < 0 {
			return t, &DecodeError{Type: "Tensor", Field: "shape", Offset: r.off, Msg: "negative dimension"}
		}
	}
	switch r.peek() {
	case kindExt:
		start := r.off
		code, data, err := r.ext()
		if err != nil {
			return t, fieldErr(err, "Tensor", "data")
		}
		if code != extRawView {
			return t, &DecodeError{Type: "Tensor", Field: "data", Offset: start, Msg: "unsupported ext type " + itoa(int(code)) + " (only 3, raw bytes, is accepted)"}
		}
		t.Data = data
	case kindBin:
		if t.Data, err = r.bin(); err != nil {
			return t, fieldErr(err, "Tensor", "data")
		}
	case kindInt:
		start := r.off
		idx, err := r.int()
		if err != nil {
			return t, fieldErr(err, "Tensor", "data")
		}
		if idx < 1 || idx >= int64(len(frames)) {
			return t, &DecodeError{Type: "Tensor", Field: "data", Offset: start, Msg: "aux frame index " + itoa(int(idx)) + " out of range (" + itoa(len(frames)) + " frames)"}
		}
		t.AuxIndex = int(idx)
		t.Data = frames[idx]
	default:
		return t, fieldErr(r.expected("ext 3, bin or aux frame index"), "Tensor", "data")
	}
	return t, fieldErr(r.skipRest(n-3), "Tensor", "")
}

// optTensor reads tensor | nil.
func (r *reader) optTensor(frames [][]byte) (*Tensor, error) {
	if r.nextNil() {
		return nil, nil
	}
	t, err := r.tensor(frames)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// ints reads [int] into buf[:0] (allocating only when buf is too small).
func (r *reader) ints(buf []int64) ([]int64, error) {
	v, err := r.appendInts(buf[:0])
	if err != nil {
		return nil, err
	}
	return v, nil
}

// optInts reads [int] | nil (nil slice for nil, non-nil empty slice for []).
func (r *reader) optInts() ([]int64, error) {
	if r.nextNil() {
		return nil, nil
	}
	v, err := r.ints(nil)
	if v == nil && err == nil {
		v = []int64{}
	}
	return v, err
}

// strs reads [str] | nil.
func (r *reader) optStrs() ([]string, error) {
	if r.nextNil() {
		return nil, nil
	}
	n, err := r.arrayHeader()
	if err != nil {
		return nil, err
	}
	v := make([]string, n)
	for i := range v {
		if v[i], err = r.str(); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
