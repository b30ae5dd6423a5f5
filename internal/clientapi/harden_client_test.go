package server

// Regression tests for issue 17's client-protocol and serve items.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/testwait"
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
	if n := h.f.utilities.Load(); n != 0 {
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
	if n := h.f.utilities.Load(); n != 0 {
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

// A request id longer than MaxRequestIDLen is refused, and not echoed (it would
// be repeated in every output of the request).
func TestClientProtocolLongRequestID(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.add(t, strings.Repeat("i", 300<<10), 2, wire.OptInt{})
	m := h.next(t)
	e := h.decodeError(t, m)
	if e["type"] != ErrTypeInvalidRequest || e["request_id"] != nil || len(m[0]) > 1024 {
		t.Errorf("error (%d bytes) %v", len(m[0]), e["type"])
	}
	h.f.noAdds(t)
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
	h.f.noAdds(t)
}

// An engine that registers max_model_len 0 or less is kept out of routing with a
// log line; the dispatcher read 0 as "unknown" and took every prompt for it.
func TestEngineNonPositiveMaxModelLen(t *testing.T) {
	for _, n := range []int64{0, -5} {
		f := newFakeCore(t, 0)
		logs := make(chan string, 8)
		ev := &engineEvents{d: f.d, log: slog.New(msgHandler{logs})}
		ev.EngineUp(0, frontend.EngineInfo{Rank: 0, Ready: wire.ReadyResponse{MaxModelLen: wire.SomeInt(n)}})
		waitMsg(t, logs, "refusing engine: invalid max_model_len")
		st := f.d.Engines()
		if len(st) != 1 || st[0].State == dispatcher.EngineStateUp || !strings.Contains(st[0].Cause, "max_model_len") {
			t.Errorf("max_model_len %d: %+v", n, st)
		}
		if _, err := f.d.Submit(context.Background(), mkEngineReq("x")); !errors.Is(err, dispatcher.ErrNoEngines) {
			t.Errorf("max_model_len %d: submit %v, want ErrNoEngines", n, err)
		}
	}
}

func mkEngineReq(id string) *wire.EngineCoreRequest {
	sp := wire.DefaultSamplingParams()
	sp.IgnoreEOS = true
	sp.Normalize()
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1}, Sampling: &sp}
}

// The bootstrap registry's log lines carry component=bootstrap once (serve added
// it, and so did the registry).
func TestServeBootstrapComponentOnce(t *testing.T) {
	var buf lockedBuffer
	startServer(t, func(c *Config) {
		c.BootstrapAddress = "127.0.0.1:0"
		c.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	})
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), `"component":"bootstrap"`) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // the registry logs from its own goroutine
	}
	seen := 0
	for line := range strings.SplitSeq(buf.String(), "\n") {
		if n := strings.Count(line, `"component":"bootstrap"`); n > 0 {
			seen++
			if strings.Count(line, `"component"`) != 1 {
				t.Errorf("component repeated: %s", line)
			}
		}
	}
	if seen == 0 {
		t.Fatalf("no bootstrap log line in:\n%s", buf.String())
	}
}

// During the drain a new HTTP request gets the 503 the README promises; the
// listener used to close at once (connection refused, or a broken pipe).
func TestServeShutdownAnswers503(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HTTPAddress = "127.0.0.1:0"
	cfg.ClientAddress = ""
	cfg.MockEngines = 1
	cfg.MockStep = 20 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.HTTPAddr()
	long := make(chan error, 1)
	go func() {
		resp, err := testwait.HTTPClient.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [1], "max_tokens": 40}`))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		long <- err
	}()
	for deadline := time.Now().Add(testwait.Deadline); s.d.InFlight() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the long request never became in flight")
		}
	}
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	for deadline := time.Now().Add(testwait.Deadline); s.shutdownReason.Load() == nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the drain never started")
		}
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testwait.Deadline}
	resp, err := c.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [1], "max_tokens": 1}`))
	if err != nil {
		t.Fatalf("new request during the drain: %v; want a 503", err)
	}
	var e errorBody
	_ = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(e.Error.Message, "shutting down") {
		t.Errorf("new request during the drain: %d %+v", resp.StatusCode, e)
	}
	if err := testwait.Recv(t, long, "the in-flight request"); err != nil {
		t.Errorf("in-flight request: %v", err)
	}
	if err := testwait.Recv(t, shut, "Shutdown"); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// A prompt over MaxPromptTokens is refused from its raw length, before decoding
// (which made an int64 of every one-byte id: 8x the frame); it used to be decoded
// and sent on.
func TestClientProtocolPromptLimit(t *testing.T) {
	h := newClientHarness(t, ClientConfig{MaxFrameBytes: 4 << 20, MaxMessageBytes: 4 << 20})
	req := mkEngineReq("big")
	req.PromptTokenIDs = make([]int64, MaxPromptTokens+1)
	h.send(t, req)
	e := h.nextError(t)
	if e["type"] != ErrTypeInvalidRequest || !strings.Contains(e["message"].(string), "more than the limit") {
		t.Errorf("error %v", e)
	}
	h.f.noAdds(t)
	if n, ok := addPromptLen(func() []byte {
		b, _, _ := wire.AppendAdd(nil, mkEngineReq("x"))
		return b
	}()); !ok || n != 1 {
		t.Errorf("addPromptLen of a 1-token ADD: %d %v", n, ok)
	}
}
