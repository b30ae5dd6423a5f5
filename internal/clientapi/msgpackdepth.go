package clientapi

// Raw-byte checks of client messages: the depth bound (wire.CheckMsgpackDepth,
// shared with the dispatcher's decoding of engine utility results) and the
// fields read before any decoder runs.

import (
	"github.com/switchyard-llm/switchyard/wire"
)

const maxMsgpackDepth = wire.MaxMsgpackDepth

var (
	errMsgpackTooDeep   = wire.ErrMsgpackTooDeep
	errMsgpackTruncated = wire.ErrMsgpackTruncated
)

// checkMsgpackDepth: see wire.CheckMsgpackDepth.
func checkMsgpackDepth(b []byte, limit int) error { return wire.CheckMsgpackDepth(b, limit) }

// valueHeader: see wire.MsgpackValueHeader.
func valueHeader(b []byte, off int) (n, size int, container bool, next int, err error) {
	return wire.MsgpackValueHeader(b, off)
}

// utilityCallID reads a UTILITY body's call_id (its second element) from the
// raw bytes, so a body refused before decoding can still resolve the client's
// call. neg reports a negative call_id, which the wire decoder would read as its
// unsigned bits (-1 as 2^64-1).
func utilityCallID(body []byte) (id uint64, neg, ok bool) {
	off := 1 // past the array header: fixarray, array16 or array32
	switch {
	case len(body) == 0:
		return 0, false, false
	case body[0] == 0xdc:
		off = 3
	case body[0] == 0xdd:
		off = 5
	}
	if off >= len(body) {
		return 0, false, false
	}
	off += 1 + intLen(body[off]) // client_index, an int
	if off >= len(body) {
		return 0, false, false
	}
	c := body[off]
	w := intLen(c)
	if off+1+w > len(body) {
		return 0, false, false
	}
	v := body[off+1 : off+1+w]
	switch {
	case c <= 0x7f:
		return uint64(c), false, true
	case c >= 0xe0:
		return uint64(int64(int8(c))), true, true
	case c >= 0xcc && c <= 0xcf:
		for _, x := range v {
			id = id<<8 | uint64(x)
		}
		return id, false, true
	case c >= 0xd0 && c <= 0xd3:
		for _, x := range v {
			id = id<<8 | uint64(x)
		}
		return id, v[0]&0x80 != 0, true
	}
	return 0, false, false
}

// negativeCallID reports whether a UTILITY body's call_id is negative.
func negativeCallID(body []byte) bool {
	_, neg, ok := utilityCallID(body)
	return ok && neg
}

// intLen is how many bytes follow an int's type byte.
func intLen(c byte) int {
	switch c {
	case 0xcc, 0xd0:
		return 1
	case 0xcd, 0xd1:
		return 2
	case 0xce, 0xd2:
		return 4
	case 0xcf, 0xd3:
		return 8
	}
	return 0
}

// addPromptLen reads the length of an ADD body's prompt_token_ids (its second
// element, after the request id) from the raw bytes, so a prompt too long for any
// engine is refused before it is decoded: decoding makes an int64 of each id, 8
// bytes for a 1-byte id, so a 15 MiB frame cost 120 MB before the length check.
func addPromptLen(body []byte) (n int, ok bool) {
	off := 1
	switch {
	case len(body) == 0:
		return 0, false
	case body[0] == 0xdc:
		off = 3
	case body[0] == 0xdd:
		off = 5
	case body[0] < 0x90 || body[0] > 0x9f:
		return 0, false
	}
	if off >= len(body) {
		return 0, false
	}
	_, size, container, next, err := valueHeader(body, off)
	if err != nil || container {
		return 0, false
	}
	off = next + size // past the request id
	if off >= len(body) {
		return 0, false
	}
	n, _, container, _, err = valueHeader(body, off)
	if err != nil || !container || body[off]&0xf0 == 0x80 || body[off] == 0xde || body[off] == 0xdf {
		return 0, false // nil (prompt embeds instead) or not an array
	}
	return n, true
}
