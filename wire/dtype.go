package wire

import (
	"math/bits"
	"strconv"
)

// The engine turns a [dtype, shape, data] tensor back into a torch tensor in its
// decode hook (vllm/v1/serial_utils.py MsgpackDecoder._decode_tensor): it looks the
// dtype up with getattr(torch, dtype), views the bytes as that dtype, then as shape.
// The hook runs inside add_request_decoder.decode, outside the input thread's try
// block, so an unknown name, a byte count that is not a whole number of elements, or
// a shape that does not match the element count kills the thread. We check all three
// before a tensor is sent.

// torchDType is one dtype getattr(torch, name) resolves and torch can view a byte
// buffer as.
type torchDType struct {
	size      int  // bytes per element
	canonical bool // str(dtype) without "torch."; the name a Python peer writes
}

// torchDTypes lists the names c10/core/ScalarType.cpp (getDtypeNames) gives torch's
// dtypes, with their legacy aliases (float, half, long...), which getattr resolves
// too. Left out on purpose: sub-byte types (uint1..uint7, bits*), quantized types
// and anything newer than the float8 family, whose view from uint8 we cannot vouch
// for; refusing those is the safe side.
var torchDTypes = map[string]torchDType{
	"bool":            {1, true},
	"uint8":           {1, true},
	"int8":            {1, true},
	"int16":           {2, true},
	"short":           {2, false},
	"uint16":          {2, true},
	"int32":           {4, true},
	"int":             {4, false},
	"uint32":          {4, true},
	"int64":           {8, true},
	"long":            {8, false},
	"uint64":          {8, true},
	"float16":         {2, true},
	"half":            {2, false},
	"bfloat16":        {2, true},
	"float32":         {4, true},
	"float":           {4, false},
	"float64":         {8, true},
	"double":          {8, false},
	"complex32":       {4, true},
	"chalf":           {4, false},
	"complex64":       {8, true},
	"cfloat":          {8, false},
	"complex128":      {16, true},
	"cdouble":         {16, false},
	"float8_e5m2":     {1, true},
	"float8_e4m3fn":   {1, true},
	"float8_e5m2fnuz": {1, true},
	"float8_e4m3fnuz": {1, true},
}

// TorchDTypeSize returns the element size of a torch dtype name the engine's decode
// hook accepts, and whether it is the canonical spelling (str(dtype) without
// "torch."). ok is false for any other name.
func TorchDTypeSize(name string) (size int, canonical, ok bool) {
	d, ok := torchDTypes[name]
	return d.size, d.canonical, ok
}

// CheckTorch reports why the engine's decode hook would fail on t as a torch tensor
// (vllm/v1/serial_utils.py _decode_tensor), or nil. Aliases such as "float" are
// accepted here, as getattr(torch, "float") is a dtype; Validate asks for the
// canonical name on top.
func (t *Tensor) CheckTorch() error {
	d, ok := torchDTypes[t.DType]
	if !ok {
		return invalid("dtype", "unknown torch dtype "+quote(t.DType))
	}
	// The element count must equal len(data)/size exactly. It is computed with an
	// overflow check, since a shape comes from a client and can claim 2^70 elements.
	elems, over, zero := uint64(1), false, false
	for _, dim := range t.Shape {
		if dim < 0 {
			return invalid("shape", "negative dimension "+itoa(int(dim)))
		}
		if dim == 0 {
			zero = true
		}
		hi, lo := bits.Mul64(elems, uint64(dim))
		over = over || hi != 0
		elems = lo
	}
	if zero {
		elems, over = 0, false // _decode_tensor returns torch.empty(shape) for no data
	}
	if over || elems > uint64(len(t.Data))/uint64(d.size) || elems*uint64(d.size) != uint64(len(t.Data)) {
		return invalid("data", itoa(len(t.Data))+" bytes is not shape "+shapeString(t.Shape)+" of "+t.DType+" ("+itoa(d.size)+" bytes each)")
	}
	return nil
}

func shapeString(s []int64) string {
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, itoa(int(d))...)
	}
	return string(append(b, ']'))
}

// quote writes s for an error message, escaping invalid UTF-8 and control bytes.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
