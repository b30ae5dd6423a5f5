package httpapi

// How pooled vectors are written: base64 of the values in the dtype and byte
// order asked for (vLLM's tensor2binary), and Python reprs for vLLM's messages.

import (
	"encoding/binary"
	"math"
	"strings"
)

// encodeVector is vLLM's tensor2binary: the values in embed_dtype, in the
// endianness asked for ("native" is little on every platform vLLM runs on).
func encodeVector(v []float32, enc poolEncoding) []byte {
	var order binary.ByteOrder = binary.LittleEndian
	if enc.bigEndian {
		order = binary.BigEndian
	}
	switch enc.dtype {
	case "float16", "bfloat16":
		b := make([]byte, 2*len(v))
		for i, x := range v {
			h := bfloat16Bits(x)
			if enc.dtype == "float16" {
				h = float16Bits(x)
			}
			order.PutUint16(b[2*i:], h)
		}
		return b
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		order.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// bfloat16Bits rounds to nearest even, as torch's .to(torch.bfloat16).
func bfloat16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	if f != f {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// float16Bits rounds to nearest even with subnormals and overflow to infinity,
// as torch's .to(torch.float16).
func float16Bits(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int32(u>>23&0xff) - 127
	mant := u & 0x7fffff
	switch {
	case f != f:
		return sign | 0x7e00
	case exp > 15:
		return sign | 0x7c00
	case exp >= -14:
		m := mant >> 13
		rem := mant & 0x1fff
		h := uint32(exp+15)<<10 | m
		if rem > 0x1000 || rem == 0x1000 && m&1 == 1 {
			h++ // may carry into the exponent, up to infinity: still correct
		}
		return sign | uint16(h)
	case exp >= -25:
		mant |= 0x800000
		shift := uint32(-14-exp) + 13
		m := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && m&1 == 1 {
			m++
		}
		return sign | uint16(m)
	}
	return sign
}

// pyRepr and pyTuple write a str and a tuple of str as Python's repr does, for
// vLLM's messages that embed them.
func pyRepr(s string) string { return "'" + strings.ReplaceAll(s, "'", "\\'") + "'" }

func pyTuple(l []string) string {
	parts := make([]string, len(l))
	for i, s := range l {
		parts[i] = pyRepr(s)
	}
	if len(parts) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}
