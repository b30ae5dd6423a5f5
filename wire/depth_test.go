package wire

import (
	"errors"
	"fmt"
	"testing"
)

// checkDepthByHeaders is CheckMsgpackDepth without its scalar fast path: every value
// through MsgpackValueHeader. The fuzz test holds the two to the same answers.
func checkDepthByHeaders(b []byte, limit int) error {
	var stack [MaxMsgpackDepth + 1]int
	depth := 0
	for off := 0; off < len(b); {
		n, size, container, next, err := MsgpackValueHeader(b, off)
		if err != nil {
			return err
		}
		off = next + size
		if off > len(b) {
			return ErrMsgpackTruncated
		}
		if depth > 0 {
			stack[depth]--
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
			depth--
		}
	}
	return nil
}

func sameDepthAnswer(t *testing.T, b []byte, limit int) {
	t.Helper()
	got, want := CheckMsgpackDepth(b, limit), checkDepthByHeaders(b, limit)
	if (got == nil) != (want == nil) || (got != nil && !errors.Is(got, want) && got.Error() != want.Error()) {
		t.Fatalf("CheckMsgpackDepth(% x, %d) = %v, the header walk says %v", b, limit, got, want)
	}
}

func TestCheckMsgpackDepthScalars(t *testing.T) {
	sp := DefaultSamplingParams()
	sp.MaxTokens = SomeInt(8)
	req := EngineCoreRequest{RequestID: "r", PromptTokenIDs: []int64{1, 300, 70000, 1 << 40, -5}, Sampling: &sp, ArrivalTime: 1.5}
	add, _, err := AppendAdd(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b    []byte
		want error
	}{
		{add, nil},
		{add[:len(add)-1], nil}, // an element short: the decoders' business, not depth
		{[]byte{0x92, 0xcd, 0x01}, ErrMsgpackTruncated},         // a uint16 cut short
		{[]byte{0x92, 0xd6, 0x01, 0, 0, 0, 0, 0x91, 0xc0}, nil}, // a fixext 4, then [nil]
		{[]byte{0x91, 0x91, 0x91, 0xc0}, ErrMsgpackTooDeep},     // limit 2 below
	} {
		limit := MaxMsgpackDepth
		if tc.want == ErrMsgpackTooDeep {
			limit = 2
		}
		if err := CheckMsgpackDepth(tc.b, limit); !errors.Is(err, tc.want) {
			t.Errorf("CheckMsgpackDepth(% x) = %v, want %v", tc.b, err, tc.want)
		}
		sameDepthAnswer(t, tc.b, limit)
	}
}

func FuzzCheckMsgpackDepthFastPath(f *testing.F) {
	f.Add([]byte{0x93, 0xcd, 0x01, 0x2c, 0xa1, 'k', 0x91, 0xc0}, 3)
	f.Add([]byte{0xdf, 0, 0, 0, 1, 0xa1, 'k', 0x90}, 64)
	f.Add([]byte{0x91, 0xd8, 1}, 64)
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		sameDepthAnswer(t, b, limit)
	})
}

// Token ids of every int encoding decode alike through ints' inline cases and int.
func TestIntsEveryEncoding(t *testing.T) {
	ids := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<63 - 1, -1, -32, -33, -200, -70000}
	sp := DefaultSamplingParams()
	req := EngineCoreRequest{RequestID: "r", PromptTokenIDs: ids, Sampling: &sp, ArrivalTime: 1}
	body, _, err := AppendAdd(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	var got EngineCoreRequest
	if err := DecodeAdd([][]byte{body}, &got); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.PromptTokenIDs) != fmt.Sprint(ids) {
		t.Fatalf("prompt_token_ids = %v, want %v", got.PromptTokenIDs, ids)
	}
	for _, tc := range [][]byte{{0x92, 0xcd, 0x01}, {0x92, 0x01, 0xce, 0, 0}, {0x91, 0xc1}} {
		r := reader{b: tc}
		if _, err := r.ints(nil); err == nil {
			t.Errorf("ints(% x) took a cut-short or invalid id", tc)
		}
	}
}
