package server

// A depth bound for client msgpack that is decoded into dynamic values. The
// reflection decoder (vmihailenco/msgpack) recurses once per nesting level and has
// no bound of its own, so a UTILITY whose args nest a few million arrays deep
// (one byte per level) would exhaust the goroutine stack and crash the process.
// This walk is iterative and runs before any dynamic decode of client input.

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// maxMsgpackDepth bounds the nesting of a client's dynamic values: vLLM's utility
// arguments (LoRA requests, collective_rpc arguments) nest a handful of levels.
const maxMsgpackDepth = 32

var errMsgpackTooDeep = fmt.Errorf("nested more than %d levels deep", maxMsgpackDepth)

// checkMsgpackDepth walks one msgpack value (b may be empty) and refuses nesting
// deeper than limit. Scalars are skipped without recursion.
func checkMsgpackDepth(b []byte, limit int) error {
	if len(b) == 0 {
		return nil
	}
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	left := []int{1} // values still to read, per open level
	for len(left) > 0 {
		top := len(left) - 1
		if left[top] == 0 {
			left = left[:top]
			continue
		}
		left[top]--
		c, err := dec.PeekCode()
		if err != nil {
			return err
		}
		var n int
		switch {
		case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
			n, err = dec.DecodeArrayLen()
		case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
			n, err = dec.DecodeMapLen()
			n *= 2
		default:
			err = dec.Skip() // a scalar: no recursion
			n = -1
		}
		if err != nil {
			return err
		}
		if n > 0 {
			if len(left) > limit { // left holds a level for the root value too
				return errMsgpackTooDeep
			}
			left = append(left, n)
		}
	}
	return nil
}

// negativeCallID reports whether a UTILITY body's call_id (its second element) is
// a negative integer, which the wire decoder reads as its unsigned bits.
func negativeCallID(body []byte) bool {
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	if n, err := dec.DecodeArrayLen(); err != nil || n < 2 {
		return false
	}
	if dec.Skip() != nil {
		return false
	}
	c, err := dec.PeekCode()
	if err != nil {
		return false
	}
	if !msgpcode.IsFixedNum(c) && c != msgpcode.Int8 && c != msgpcode.Int16 && c != msgpcode.Int32 && c != msgpcode.Int64 {
		return false
	}
	v, err := dec.DecodeInt64()
	return err == nil && v < 0
}
