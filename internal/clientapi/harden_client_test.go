package clientapi

// Regression tests for the client protocol's hardening.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// msgHandler sends each log message to a channel (non-blocking).
type msgHandler struct{ ch chan string }

func (h msgHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h msgHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}
func (h msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h msgHandler) WithGroup(string) slog.Handler      { return h }

func waitMsg(t *testing.T, ch chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-ch:
			if m == want {
				return
			}
		case <-deadline:
			t.Fatalf("no log %q", want)
		}
	}
}

// sendUtility sends a UTILITY body built by hand (msgpack of [0, callID, method, args]).
func (h *clientHarness) sendUtility(t *testing.T, callID any, method string, args []byte) {
	t.Helper()
	var b bytes.Buffer
	enc := msgpack.NewEncoder(&b)
	_ = enc.EncodeArrayLen(4)
	_ = enc.EncodeInt(0)
	_ = enc.Encode(callID)
	_ = enc.EncodeString(method)
	b.Write(args)
	if err := h.cli.Send([]byte{wire.RequestUtility}, b.Bytes()); err != nil {
		t.Fatal(err)
	}
}

// A negative call_id is refused; it was echoed back as 2^64-1.
func TestClientProtocolNegativeCallID(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.sendUtility(t, int64(-1), "is_sleeping", []byte{0x90})
	m := h.next(t)
	if m[0][0]&0xf0 != 0x80 {
		var o wire.EngineCoreOutputs
		_ = wire.DecodeOutputs(m, &o)
		t.Fatalf("answered with outputs %+v; want an error message", o.UtilityOutput)
	}
	e := h.decodeError(t, m)
	if e["type"] != ErrTypeInvalidMessage || !strings.Contains(e["message"].(string), "call_id") {
		t.Errorf("error %v", e)
	}
	if n := h.f.Utilities.Load(); n != 0 {
		t.Errorf("%d utility calls reached engines", n)
	}
}

// Utility arguments nested past the bound are refused before the dynamic decode
// (which recurses per level without a bound of its own); they were forwarded.
func TestClientProtocolDeepUtilityArgs(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	const depth = 100000
	args := append(append([]byte{0x91}, bytes.Repeat([]byte{0x91}, depth)...), 0xc0)
	h.sendUtility(t, uint64(9), "collective_rpc", args)
	o := h.nextOutputs(t)
	if u := o.UtilityOutput; u == nil || u.CallID != 9 || !u.Failure.Valid || !strings.Contains(u.Failure.Value, "nested") {
		t.Errorf("reply %+v", o.UtilityOutput)
	}
	if e := h.nextError(t); e["type"] != ErrTypeInvalidMessage {
		t.Errorf("error %v", e)
	}
	if n := h.f.Utilities.Load(); n != 0 {
		t.Errorf("%d utility calls reached engines", n)
	}
	ok := append(bytes.Repeat([]byte{0x91}, maxMsgpackDepth), 0xc0)
	if err := checkMsgpackDepth(ok, maxMsgpackDepth); err != nil {
		t.Errorf("depth %d refused: %v", maxMsgpackDepth, err)
	}
	if err := checkMsgpackDepth(append([]byte{0x91}, ok...), maxMsgpackDepth); !errors.Is(err, errMsgpackTooDeep) {
		t.Errorf("depth %d: %v", maxMsgpackDepth+1, err)
	}
}

// A request id longer than apicore.MaxRequestIDLen is refused, and not echoed (it would
// be repeated in every output of the request).
func TestClientProtocolLongRequestID(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.add(t, strings.Repeat("i", 300<<10), 2, wire.OptInt{})
	m := h.next(t)
	e := h.decodeError(t, m)
	if e["type"] != ErrTypeInvalidRequest || e["request_id"] != nil || len(m[0]) > 1024 {
		t.Errorf("error (%d bytes) %v", len(m[0]), e["type"])
	}
	h.f.NoAdds(t)
}

// A client that sends a frame over --client-max-frame-bytes is disconnected before
// it is read (the transport's default allowed 256 MiB frames, 1 GiB messages).
func TestClientProtocolFrameLimit(t *testing.T) {
	logs := make(chan string, 64)
	h := newClientHarness(t, ClientConfig{MaxFrameBytes: 4096, MaxMessageBytes: 8192, Logger: slog.New(msgHandler{logs})})
	if err := h.cli.Send([]byte{wire.RequestAdd}, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	waitMsg(t, logs, "transport: dropped peer sending an oversized frame or message")
	h.f.NoAdds(t)
}

// A prompt over apicore.MaxPromptTokens is refused from its raw length, before decoding
// (which made an int64 of every one-byte id: 8x the frame); it used to be decoded
// and sent on.
func TestClientProtocolPromptLimit(t *testing.T) {
	h := newClientHarness(t, ClientConfig{MaxFrameBytes: 4 << 20, MaxMessageBytes: 4 << 20})
	req := mkEngineReq("big")
	req.PromptTokenIDs = make([]int64, apicore.MaxPromptTokens+1)
	h.send(t, req)
	e := h.nextError(t)
	if e["type"] != ErrTypeInvalidRequest || !strings.Contains(e["message"].(string), "more than the limit") {
		t.Errorf("error %v", e)
	}
	h.f.NoAdds(t)
	if n, ok := addPromptLen(func() []byte {
		b, _, _ := wire.AppendAdd(nil, mkEngineReq("x"))
		return b
	}()); !ok || n != 1 {
		t.Errorf("addPromptLen of a 1-token ADD: %d %v", n, ok)
	}
}

func mkEngineReq(id string) *wire.EngineCoreRequest {
	sp := wire.DefaultSamplingParams()
	sp.IgnoreEOS = true
	sp.Normalize()
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1}, Sampling: &sp}
}
