package wire

// A depth bound for msgpack from clients and engines, checked on the raw bytes
// before anything decodes them. The reflection decoder (vmihailenco/msgpack) that turns UTILITY
// arguments into dynamic values recurses once per nesting level with no bound of
// its own, so arguments nested a few million levels deep (one byte a level) would
// exhaust the goroutine stack and crash the process; the wire decoders' walks are
// iterative but keep a stack entry per level (24 MB for a 1 MiB frame of nested
// arrays). This walk reads only headers, keeps one counter per open level and
// stops at the bound, so it costs little even on a large prompt.

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxMsgpackDepth bounds the nesting of a client message or an engine's utility
// result: an ADD is three levels deep before its untyped fields (a
// structured-output JSON schema, logit_bias), and vLLM's utility arguments and
// results nest a handful.
const MaxMsgpackDepth = 64

// Errors of CheckMsgpackDepth.
var (
	ErrMsgpackTooDeep   = fmt.Errorf("nested more than %d levels deep", MaxMsgpackDepth)
	ErrMsgpackTruncated = errors.New("truncated msgpack value")
)

// CheckMsgpackDepth walks the msgpack values in b (one after another; b may be
// empty) and refuses nesting deeper than limit. Malformed input is left to the
// decoders, which name the field at fault: only the depth is judged here.
func CheckMsgpackDepth(b []byte, limit int) error {
	var stack [MaxMsgpackDepth + 1]int // values left per open level
	depth := 0
	for off := 0; off < len(b); {
		n, container := 0, false
		if w := scalarLen[b[off]]; w != 0 {
			// A scalar of a fixed or one-byte-prefixed size (a token id, a float, a
			// short key): most of an ADD's values, measured without the general
			// header read, which was most of this walk's cost.
			off += int(w)
		} else {
			var size, next int
			var err error
			if n, size, container, next, err = MsgpackValueHeader(b, off); err != nil {
				return err
			}
			off = next + size
		}
		if off > len(b) {
			return ErrMsgpackTruncated
		}
		if depth > 0 {
			stack[depth]-- // one of its parent's values
		}
		if container && n > 0 {
			if depth >= limit || depth >= MaxMsgpackDepth {
				return ErrMsgpackTooDeep
			}
			depth++
			stack[depth] = n
			continue
		}
		for depth > 0 && stack[depth] == 0 {
			depth-- // the last value of this level (and maybe its parents) ended
		}
	}
	return nil
}

// scalarLen is the whole length (type byte included) of the scalars whose length
// the type byte alone gives: fixints, nil, bools, fixstrs, fixed-size numbers and
// fixexts. 0 for everything else (containers, length-prefixed values, 0xc1).
var scalarLen = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
			t[c] = 1
		case c >= 0xa0 && c <= 0xbf:
			t[c] = uint8(1 + c&0x1f)
		case c == 0xcc, c == 0xd0:
			t[c] = 2
		case c == 0xcd, c == 0xd1:
			t[c] = 3
		case c == 0xca, c == 0xce, c == 0xd2:
			t[c] = 5
		case c == 0xcb, c == 0xcf, c == 0xd3:
			t[c] = 9
		case c >= 0xd4 && c <= 0xd8: // fixext: the ext type byte, then 1..16 bytes
			t[c] = uint8(2 + 1<<(c-0xd4))
		}
	}
	return t
}()

// depthLenHeader reads the length-prefixed forms: it returns a container's element
// count (maps count keys and values) or the bytes to skip.
func depthLenHeader(c byte, b []byte, off int) (n, size int, container bool, next int, err error) {
	be := func(w int) (int, bool) {
		if off+w > len(b) {
			return 0, false
		}
		var v uint64
		switch w {
		case 1:
			v = uint64(b[off])
		case 2:
			v = uint64(binary.BigEndian.Uint16(b[off:]))
		case 4:
			v = uint64(binary.BigEndian.Uint32(b[off:]))
		}
		off += w
		return int(v), true
	}
	var ok bool
	switch c {
	case 0xcc, 0xd0:
		size = 1
	case 0xcd, 0xd1:
		size = 2
	case 0xca, 0xce, 0xd2:
		size = 4
	case 0xcb, 0xcf, 0xd3:
		size = 8
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16, plus the type byte
		size = 1 + 1<<(c-0xd4)
	case 0xc4, 0xd9:
		size, ok = be(1)
	case 0xc5, 0xda:
		size, ok = be(2)
	case 0xc6, 0xdb:
		size, ok = be(4)
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32: length, then the type byte
		size, ok = be(1 << (c - 0xc7))
		size++
	case 0xdc:
		n, ok = be(2)
		container = true
	case 0xdd:
		n, ok = be(4)
		container = true
	case 0xde:
		n, ok = be(2)
		n, container = 2*n, true
	case 0xdf:
		n, ok = be(4)
		n, container = 2*n, true
	default: // 0xc1, never used
		return 0, 0, false, off, fmt.Errorf("invalid msgpack type byte 0x%02x", c)
	}
	switch c {
	case 0xcc, 0xd0, 0xcd, 0xd1, 0xca, 0xce, 0xd2, 0xcb, 0xcf, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8:
		ok = true
	}
	if !ok {
		return 0, 0, false, off, ErrMsgpackTruncated
	}
	return n, size, container, off, nil
}

// MsgpackValueHeader reads the header of the value at off: its element count if it is a
// container, else the bytes of payload after the header (at next).
func MsgpackValueHeader(b []byte, off int) (n, size int, container bool, next int, err error) {
	c := b[off]
	off++
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		return 0, 0, false, off, nil
	case c >= 0x80 && c <= 0x8f:
		return 2 * int(c&0x0f), 0, true, off, nil
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), 0, true, off, nil
	case c >= 0xa0 && c <= 0xbf:
		return 0, int(c & 0x1f), false, off, nil
	}
	return depthLenHeader(c, b, off)
}
