package wire

// The msgpack writer: append-style, choosing the forms msgspec chooses so that our
// bytes equal a Python peer's for the same content.

import (
	"encoding/binary"
	"math"
	"slices"
)

func appendNil(b []byte) []byte { return append(b, 0xc0) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// appendInt writes the smallest form, as msgspec does: positive values use the
// unsigned forms, negative values the signed ones.
func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(b, uint64(v))
	}
	switch {
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return append(b, 0xd1, byte(v>>8), byte(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= 0x7f:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return append(b, 0xcd, byte(v>>8), byte(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

func appendOptInt(b []byte, v OptInt) []byte {
	if !v.Valid {
		return appendNil(b)
	}
	return appendInt(b, v.Value)
}

func appendOptBool(b []byte, v OptBool) []byte {
	if !v.Valid {
		return appendNil(b)
	}
	return appendBool(b, v.Value)
}

// appendFloat always writes float64: Python floats are doubles and msgspec never
// narrows them.
func appendFloat(b []byte, v float64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(v))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n <= 31:
		b = append(b, 0xa0|byte(n))
	default:
		b = appendLen(b, 0xd9, n)
	}
	return append(b, s...)
}

func appendOptStr(b []byte, s OptString) []byte {
	if !s.Valid {
		return appendNil(b)
	}
	return appendStr(b, s.Value)
}

func appendBin(b []byte, v []byte) []byte {
	return append(appendLen(b, 0xc4, len(v)), v...)
}

// appendExt uses fixext for 1/2/4/8/16 bytes, as msgspec does.
func appendExt(b []byte, code int8, v []byte) []byte {
	switch n := len(v); n {
	case 1:
		b = append(b, 0xd4)
	case 2:
		b = append(b, 0xd5)
	case 4:
		b = append(b, 0xd6)
	case 8:
		b = append(b, 0xd7)
	case 16:
		b = append(b, 0xd8)
	default:
		b = appendLen(b, 0xc7, n)
	}
	b = append(b, byte(code))
	return append(b, v...)
}

// appendLen writes the type byte and big-endian length of the smallest str, bin or
// ext form that holds n bytes: c8 (8-bit length), c8+1 (16-bit) or c8+2 (32-bit).
func appendLen(b []byte, c8 byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(b, c8, byte(n))
	case n <= math.MaxUint16:
		return append(b, c8+1, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint32(append(b, c8+2), uint32(n))
}

func appendArrayHeader(b []byte, n int) []byte { return appendHeader(b, 0x90, 0xdc, n) }

func appendMapHeader(b []byte, n int) []byte { return appendHeader(b, 0x80, 0xde, n) }

// appendHeader writes the smallest array or map header for n items: the fix form
// (fix|n), c16 with a 16-bit count, or c16+1 with a 32-bit one.
func appendHeader(b []byte, fix, c16 byte, n int) []byte {
	switch {
	case n <= 15:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return append(b, c16, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint32(append(b, c16+1), uint32(n))
}

// appendRaw writes an undecoded value; nil Raw is msgpack nil.
func appendRaw(b []byte, v Raw) []byte {
	if len(v) == 0 {
		return appendNil(b)
	}
	return append(b, v...)
}

// appendInts writes [int]. Token-id lists dominate ADD bodies, so it reserves room
// for the common forms (up to uint32, 5 bytes) once and stores without append's
// per-element capacity checks; negative or larger values take the general path.
func appendInts(b []byte, v []int64) []byte {
	b = appendArrayHeader(b, len(v))
	b = slices.Grow(b, 5*len(v))
	n := len(b)
	b = b[:cap(b)]
	for i, x := range v {
		u := uint64(x)
		switch {
		case u <= 0x7f:
			b[n] = byte(u)
			n++
		case u <= 0xff:
			b[n], b[n+1] = 0xcc, byte(u)
			n += 2
		case u <= 0xffff:
			b[n], b[n+1], b[n+2] = 0xcd, byte(u>>8), byte(u)
			n += 3
		case u <= 0xffffffff:
			_ = b[n+4]
			b[n], b[n+1], b[n+2], b[n+3], b[n+4] = 0xce, byte(u>>24), byte(u>>16), byte(u>>8), byte(u)
			n += 5
		default:
			b = b[:n]
			for _, x := range v[i:] {
				b = appendInt(b, x)
			}
			return b
		}
	}
	return b[:n]
}

func appendStrs(b []byte, v []string) []byte {
	b = appendArrayHeader(b, len(v))
	for _, s := range v {
		b = appendStr(b, s)
	}
	return b
}
