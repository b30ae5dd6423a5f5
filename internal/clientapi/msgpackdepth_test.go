package clientapi

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestCheckMsgpackDepth(t *testing.T) {
	nest := func(depth int, open []byte) []byte {
		var b []byte
		for range depth {
			b = append(b, open...)
		}
		return append(b, 0xc0)
	}
	enc := func(v any) []byte {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, nil},
		{"scalars", enc([]any{1, -1, 1 << 40, "s", []byte("b"), 1.5, true, nil, map[string]any{"k": []any{}}}), nil},
		{"64 arrays", nest(64, []byte{0x91}), nil},
		{"65 arrays", nest(65, []byte{0x91}), errMsgpackTooDeep},
		{"65 maps", nest(65, []byte{0x81, 0xc0}), errMsgpackTooDeep},
		{"array16", nest(65, []byte{0xdc, 0, 1}), errMsgpackTooDeep},
		{"siblings do not add up", bytes.Repeat(nest(40, []byte{0x91}), 100), nil},
		{"wide then deep", append(enc([]int{1, 2, 3}), nest(64, []byte{0x91})...), nil},
		{"long string", enc(string(make([]byte, 70000))), nil},
		{"ext", []byte{0xc7, 0x02, 0x03, 0xaa, 0xbb}, nil},
		{"truncated string", []byte{0xd9, 0x10, 'a'}, errMsgpackTruncated},
	} {
		if err := checkMsgpackDepth(tt.b, maxMsgpackDepth); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestUtilityCallID(t *testing.T) {
	for _, tt := range []struct {
		callID  any
		id      uint64
		neg, ok bool
	}{
		{uint64(7), 7, false, true}, {int64(-1), 0, true, true}, {int64(-300), 0, true, true},
		{uint64(1) << 63, 1 << 63, false, true}, {int64(70000), 70000, false, true}, {"x", 0, false, false},
	} {
		b, _ := msgpack.Marshal([]any{0, tt.callID, "m", []any{}})
		id, neg, ok := utilityCallID(b)
		if neg != tt.neg || ok != tt.ok || (!neg && id != tt.id) {
			t.Errorf("%v: %d %v %v", tt.callID, id, neg, ok)
		}
	}
}

func FuzzCheckMsgpackDepth(f *testing.F) {
	f.Add([]byte{0x91, 0x91, 0xc0})
	f.Add([]byte{0xdf, 0, 0, 0, 1, 0xa1, 'k', 0x90})
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkMsgpackDepth(b, maxMsgpackDepth) // never panics
		_, _, _ = utilityCallID(b)
	})
}
