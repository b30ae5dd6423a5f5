package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// clientHarness is a ClientServer over fake engines plus one DEALER client.
type clientHarness struct {
	f   *fakeEngines
	cs  *ClientServer
	cli transport.Socket
	in  chan [][]byte // messages the client received
}

func newClientHarness(t *testing.T, cfg ClientConfig) *clientHarness {
	t.Helper()
	return newClientHarnessOn(t, newFakeCore(t, 2), cfg)
}

// newClientHarnessOn is newClientHarness over the given fake engines.
func newClientHarnessOn(t *testing.T, f *fakeEngines, cfg ClientConfig) *clientHarness {
	t.Helper()
	if cfg.Address == "" {
		cfg.Address = "tcp://127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := ListenClients(ctx, cfg, f.d)
	if err != nil {
		t.Fatal(err)
	}
	end := cs.EndBatch
	f.after.Store(&end)
	cli, err := transport.Dial(ctx, transport.Dealer, cs.Addr(), transport.Options{Identity: []byte("client-1")})
	if err != nil {
		t.Fatal(err)
	}
	h := &clientHarness{f: f, cs: cs, cli: cli, in: make(chan [][]byte, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := cli.Recv()
			if err != nil {
				return
			}
			h.in <- msg
		}
	}()
	t.Cleanup(func() {
		cli.Close()
		testwait.Closed(t, done, "the client's reader to end")
		f.d.Close() // end what is live before the server closes
		cs.Close()
	})
	return h
}

func (h *clientHarness) add(t *testing.T, id string, maxTokens int64, rank wire.OptInt) {
	t.Helper()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(maxTokens)
	sp.IgnoreEOS = true
	sp.Normalize()
	body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{
		RequestID: id, PromptTokenIDs: []int64{1, 2}, Sampling: &sp, DataParallelRank: rank,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cli.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message the client received.
func (h *clientHarness) next(t *testing.T) [][]byte {
	t.Helper()
	return testwait.Recv(t, h.in, "a message from the server")
}

// nextOutputs expects an EngineCoreOutputs.
func (h *clientHarness) nextOutputs(t *testing.T) *wire.EngineCoreOutputs {
	t.Helper()
	m := h.next(t)
	var o wire.EngineCoreOutputs
	if err := wire.DecodeOutputs(m, &o); err != nil {
		t.Fatalf("not an EngineCoreOutputs (%v): % x", err, m[0])
	}
	return &o
}

// nextError expects an error map.
func (h *clientHarness) nextError(t *testing.T) map[string]any {
	t.Helper()
	return h.decodeError(t, h.next(t))
}

// decodeError decodes an error map.
func (h *clientHarness) decodeError(t *testing.T, m [][]byte) map[string]any {
	t.Helper()
	var e map[string]any
	if len(m) != 1 || len(m[0]) == 0 || m[0][0]&0xf0 != 0x80 {
		t.Fatalf("not an error map: % x", m[0])
	}
	if err := msgpack.Unmarshal(m[0], &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestClientProtocolAdd(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.add(t, "r1", 3, wire.OptInt{})
	var tokens []int64
	for {
		o := h.nextOutputs(t)
		if len(o.Outputs) != 1 || o.Outputs[0].RequestID != "r1" {
			t.Fatalf("outputs %+v", o.Outputs)
		}
		tokens = append(tokens, o.Outputs[0].NewTokenIDs...)
		if o.Outputs[0].Finished() {
			if o.Outputs[0].FinishReason != wire.FinishLength {
				t.Errorf("finish %v", o.Outputs[0].FinishReason)
			}
			if diff := cmp.Diff([]string{"r1"}, o.FinishedRequests); diff != "" {
				t.Errorf("finished_requests (-want +got):\n%s", diff)
			}
			break
		}
	}
	if diff := cmp.Diff([]int64{100, 101, 102}, tokens); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	// The engine saw our id, namespaced by the client's identity.
	if req := testwait.Recv(t, h.f.adds, "the ADD"); req.RequestID != "c"+"636c69656e742d31"+"-r1" {
		t.Errorf("engine request id %q", req.RequestID)
	}
}

func TestClientProtocolRejects(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.add(t, "pinned", 3, wire.SomeInt(9))
	e := h.nextError(t)
	want := map[string]any{
		"request_id":      "pinned",
		"type":            "InvalidDataParallelRank",
		"message":         "data parallel rank 9 is not connected to this frontend; connected ranks: [0, 1]",
		"connected_ranks": []any{int8(0), int8(1)},
	}
	if diff := cmp.Diff(want, e); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
	h.f.noAdds(t)

	if err := h.cli.Send([]byte{0x07}, []byte{0x90}); err != nil {
		t.Fatal(err)
	}
	if e := h.nextError(t); e["type"] != ErrTypeInvalidMessage || e["request_id"] != nil {
		t.Errorf("unknown type byte: %v", e)
	}
	if err := h.cli.Send([]byte{wire.RequestAdd}, []byte{0xc1}); err != nil {
		t.Fatal(err)
	}
	if e := h.nextError(t); e["type"] != ErrTypeInvalidMessage {
		t.Errorf("garbage ADD: %v", e)
	}
	h.f.noAdds(t)
}

func TestClientProtocolDuplicateAndAbort(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.f.hold.Store(true)
	h.add(t, "a", 50, wire.OptInt{})
	added := testwait.Recv(t, h.f.adds, "the ADD")
	if o := h.nextOutputs(t); o.Outputs[0].RequestID != "a" {
		t.Fatalf("outputs %+v", o)
	}
	h.add(t, "a", 50, wire.OptInt{})
	if e := h.nextError(t); e["type"] != "DuplicateRequestId" || e["request_id"] != "a" {
		t.Errorf("duplicate: %v", e)
	}
	if err := h.cli.Send([]byte{wire.RequestAbort}, wire.AppendAbort(nil, []string{"a", "unknown"})); err != nil {
		t.Fatal(err)
	}
	h.f.expectAbort(t, added.RequestID)
	o := h.nextOutputs(t)
	if len(o.Outputs) != 1 || o.Outputs[0].RequestID != "a" || o.Outputs[0].FinishReason != wire.FinishAbort {
		t.Errorf("after ABORT: %+v", o.Outputs)
	}
}

func TestClientProtocolGoneClientAborted(t *testing.T) {
	t.Run("connection closed", func(t *testing.T) {
		h := newClientHarness(t, ClientConfig{})
		h.f.hold.Store(true)
		h.add(t, "x", 50, wire.OptInt{})
		added := testwait.Recv(t, h.f.adds, "the ADD")
		h.nextOutputs(t)
		h.cli.Close()
		h.f.expectAbort(t, added.RequestID)
	})
	t.Run("silent", func(t *testing.T) {
		h := newClientHarness(t, ClientConfig{Timeout: 100 * time.Millisecond})
		h.f.hold.Store(true)
		h.add(t, "y", 50, wire.OptInt{})
		added := testwait.Recv(t, h.f.adds, "the ADD")
		h.f.expectAbort(t, added.RequestID)
	})
}

func TestClientProtocolUtility(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	body, err := wire.AppendUtility(nil, 0, 42, "is_sleeping", wire.Raw{0x90})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cli.Send([]byte{wire.RequestUtility}, body); err != nil {
		t.Fatal(err)
	}
	o := h.nextOutputs(t)
	u := o.UtilityOutput
	if u == nil || u.CallID != 42 || u.Failure.Valid || !u.HasResult || string(u.Result) != "\xc3" {
		t.Errorf("utility reply %+v", u)
	}
}

// send encodes req as the client's ADD.
func (h *clientHarness) send(t *testing.T, req *wire.EngineCoreRequest) {
	t.Helper()
	body, aux, err := wire.AppendAdd(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cli.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...); err != nil {
		t.Fatal(err)
	}
}

// The client's values are range-checked before the greedy reset, as vLLM's
// SamplingParams does: temperature 0 with top_p 0 is refused by name. Normalize
// used to reset top_p to 1 and send it.
func TestClientProtocolPrepareRefuses(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	sp := wire.DefaultSamplingParams()
	sp.Temperature, sp.TopP = 0, 0
	sp.MaxTokens = wire.SomeInt(3)
	h.send(t, &wire.EngineCoreRequest{RequestID: "greedy", PromptTokenIDs: []int64{1}, Sampling: &sp})
	e := h.nextError(t)
	if e["type"] != ErrTypeInvalidRequest || e["request_id"] != "greedy" ||
		!strings.Contains(e["message"].(string), "sampling_params.top_p") {
		t.Errorf("error %v, want InvalidRequest naming sampling_params.top_p", e)
	}
	h.f.noAdds(t)
	// The id was never reserved: it can be used at once.
	h.add(t, "greedy", 2, wire.OptInt{})
	if o := h.nextOutputs(t); o.Outputs[0].RequestID != "greedy" {
		t.Errorf("outputs %+v", o.Outputs)
	}
}

// The model's EOS ids complete a request that has none, as on the HTTP API.
func TestClientProtocolSeveralEOS(t *testing.T) {
	h := newClientHarness(t, ClientConfig{Model: ModelRules{EOSTokenIDs: []int64{2, 9}}})
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1)
	h.send(t, &wire.EngineCoreRequest{RequestID: "e", PromptTokenIDs: []int64{1}, Sampling: &sp})
	req := testwait.Recv(t, h.f.adds, "the ADD")
	got := req.Sampling
	if got.EOSTokenID != wire.SomeInt(2) || !cmp.Equal(got.StopTokenIDs, []int64{9}) || !cmp.Equal(got.AllStopTokenIDs, []int64{2, 9}) {
		t.Errorf("_eos_token_id %+v stop_token_ids %v _all_stop_token_ids %v; want 2, [9], [2 9]",
			got.EOSTokenID, got.StopTokenIDs, got.AllStopTokenIDs)
	}
}

// --vocab-size and --max-logprobs bound msgpack clients too.
func TestClientProtocolModelBounds(t *testing.T) {
	h := newClientHarness(t, ClientConfig{Model: ModelRules{VocabSize: 50, MaxLogprobs: 5}})
	for _, tt := range []struct {
		id, field string
		edit      func(q *wire.EngineCoreRequest)
	}{
		{"v1", "prompt_token_ids", func(q *wire.EngineCoreRequest) { q.PromptTokenIDs = []int64{50} }},
		{"v2", "sampling_params.stop_token_ids", func(q *wire.EngineCoreRequest) { q.Sampling.StopTokenIDs = []int64{1, 77} }},
		{"v3", "sampling_params.logprobs", func(q *wire.EngineCoreRequest) { q.Sampling.Logprobs = wire.SomeInt(6) }},
	} {
		sp := wire.DefaultSamplingParams()
		sp.IgnoreEOS = true
		q := &wire.EngineCoreRequest{RequestID: tt.id, PromptTokenIDs: []int64{1}, Sampling: &sp}
		tt.edit(q)
		h.send(t, q)
		e := h.nextError(t)
		if e["type"] != ErrTypeInvalidRequest || e["request_id"] != tt.id || !strings.Contains(e["message"].(string), tt.field) {
			t.Errorf("%s: error %v, want InvalidRequest naming %s", tt.id, e, tt.field)
		}
	}
	h.f.noAdds(t)
}

// Only the utility methods vLLM's frontend calls reach an engine (plus those
// allowed by flag): handle_fault_tolerance kills an engine's input thread on bad
// args, and private methods are reachable by name.
func TestClientProtocolUtilityAllowlist(t *testing.T) {
	h := newClientHarness(t, ClientConfig{AllowUtilityMethods: []string{"custom_method"}})
	for i, method := range []string{"handle_fault_tolerance", "_handle_client_request", "shutdown"} {
		body, err := wire.AppendUtility(nil, 0, uint64(10+i), method, wire.Raw{0x90})
		if err != nil {
			t.Fatal(err)
		}
		if err := h.cli.Send([]byte{wire.RequestUtility}, body); err != nil {
			t.Fatal(err)
		}
		u := h.nextOutputs(t).UtilityOutput
		if u == nil || u.CallID != uint64(10+i) || !u.Failure.Valid || !strings.Contains(u.Failure.Value, method) {
			t.Errorf("%s: reply %+v, want a failure naming it", method, u)
		}
		if e := h.nextError(t); e["type"] != ErrTypeUtilityFailed || !strings.Contains(e["message"].(string), method) {
			t.Errorf("%s: error %v", method, e)
		}
	}
	for i, method := range []string{"custom_method", "reset_prefix_cache"} {
		body, _ := wire.AppendUtility(nil, 0, uint64(20+i), method, wire.Raw{0x90})
		if err := h.cli.Send([]byte{wire.RequestUtility}, body); err != nil {
			t.Fatal(err)
		}
		if u := h.nextOutputs(t).UtilityOutput; u == nil || u.Failure.Valid {
			t.Errorf("%s: reply %+v, want success", method, u)
		}
	}
	// The replies came from the fake engines, so they have counted every UTILITY
	// they saw: the two allowed calls on both ranks, none of the refused ones.
	if n := h.f.utilities.Load(); n != 4 {
		t.Errorf("engines received %d UTILITY frames, want 4 (2 allowed calls x 2 ranks)", n)
	}
}

// A prompt that does not fit the engine's max_model_len is refused by name.
func TestClientProtocolPromptTooLong(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.f.d.EngineUpWith(0, dispatcher.EngineLimits{MaxModelLen: 2})
	h.add(t, "long", 3, wire.SomeInt(0)) // a 2-token prompt
	if e := h.nextError(t); e["type"] != ErrTypeInvalidRequest || e["request_id"] != "long" ||
		!strings.Contains(e["message"].(string), "maximum model length") {
		t.Errorf("error %v", e)
	}
	h.f.noAdds(t)
}
