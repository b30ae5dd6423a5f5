package wire

// The pooling_output tensor as float32s. vLLM's poolers hand back a CPU torch
// tensor in the head's dtype (float32 by default, the model's float16 or bfloat16
// when the head runs in it), sent as [dtype, shape, data] with little-endian data.
// An engine is not trusted with its size: the caller bounds the elements it will
// take before anything is converted.

import (
	"encoding/binary"
	"math"
)

// MaxPoolingDims is the most dimensions a pooling output may have: [hidden] or
// [labels] for sequence tasks, [tokens, hidden] for token tasks.
const MaxPoolingDims = 2

// PoolingFloats converts a pooling_output tensor to float32s, row-major, with its
// shape. It refuses (a *ValidationError naming the part) a dtype other than
// float32, float16 and bfloat16 (torch names, or numpy's "<f4"/"<f2"), more than
// MaxPoolingDims dimensions, a shape whose element count is above maxElems, and data
// whose length is not the shape's element count times the dtype's size. A 0-d
// tensor is one element.
func PoolingFloats(t *Tensor, maxElems int) (shape []int64, data []float32, err error) {
	if t == nil {
		return nil, nil, invalid("pooling_output", "missing")
	}
	var size int
	switch t.DType {
	case "float32", "<f4":
		size = 4
	case "float16", "bfloat16", "<f2":
		size = 2
	default:
		return nil, nil, invalid("pooling_output.dtype", "unsupported dtype "+quote(t.DType)+" (float32, float16, bfloat16)")
	}
	if len(t.Shape) > MaxPoolingDims {
		return nil, nil, invalid("pooling_output.shape", "more than "+itoa(MaxPoolingDims)+" dimensions: "+shapeString(t.Shape))
	}
	n := int64(1)
	for _, d := range t.Shape {
		if d < 0 || d > int64(maxElems) {
			return nil, nil, invalid("pooling_output.shape", "shape "+shapeString(t.Shape)+" has more than "+itoa(maxElems)+" elements")
		}
		n *= d // each factor <= maxElems and at most 2 of them: no overflow for int maxElems
		if n > int64(maxElems) {
			return nil, nil, invalid("pooling_output.shape", "shape "+shapeString(t.Shape)+" has more than "+itoa(maxElems)+" elements")
		}
	}
	if int64(len(t.Data)) != n*int64(size) {
		return nil, nil, invalid("pooling_output.data", itoa(len(t.Data))+" bytes for shape "+shapeString(t.Shape)+" of "+t.DType)
	}
	data = make([]float32, n)
	src := t.Data
	switch t.DType {
	case "float32", "<f4":
		for i := range data {
			data[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case "bfloat16":
		for i := range data {
			data[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	default:
		for i := range data {
			data[i] = float16(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return append([]int64(nil), t.Shape...), data, nil
}

// float16 widens an IEEE 754 half to float32 exactly (subnormals, inf and NaN too).
func float16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0xff<<23 | frac<<13)
	case exp == 0 && frac == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: frac * 2^-24
		v := float32(frac) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
}
