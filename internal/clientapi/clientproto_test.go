package clientapi

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"bytes"
	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

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
	if req := testwait.Recv(t, h.f.Adds, "the ADD"); req.RequestID != "c"+"636c69656e742d31"+"-r1" {
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
	h.f.NoAdds(t)

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
	h.f.NoAdds(t)
}

func TestClientProtocolDuplicateAndAbort(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.f.Hold.Store(true)
	h.add(t, "a", 50, wire.OptInt{})
	added := testwait.Recv(t, h.f.Adds, "the ADD")
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
	h.f.ExpectAbort(t, added.RequestID)
	o := h.nextOutputs(t)
	if len(o.Outputs) != 1 || o.Outputs[0].RequestID != "a" || o.Outputs[0].FinishReason != wire.FinishAbort {
		t.Errorf("after ABORT: %+v", o.Outputs)
	}
}

func TestClientProtocolGoneClientAborted(t *testing.T) {
	t.Run("connection closed", func(t *testing.T) {
		h := newClientHarness(t, ClientConfig{})
		h.f.Hold.Store(true)
		h.add(t, "x", 50, wire.OptInt{})
		added := testwait.Recv(t, h.f.Adds, "the ADD")
		h.nextOutputs(t)
		h.cli.Close()
		h.f.ExpectAbort(t, added.RequestID)
	})
	t.Run("silent", func(t *testing.T) {
		h := newClientHarness(t, ClientConfig{Timeout: 100 * time.Millisecond})
		h.f.Hold.Store(true)
		h.add(t, "y", 50, wire.OptInt{})
		added := testwait.Recv(t, h.f.Adds, "the ADD")
		h.f.ExpectAbort(t, added.RequestID)
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
	h.f.NoAdds(t)
	// The id was never reserved: it can be used at once.
	h.add(t, "greedy", 2, wire.OptInt{})
	if o := h.nextOutputs(t); o.Outputs[0].RequestID != "greedy" {
		t.Errorf("outputs %+v", o.Outputs)
	}
}

// The model's EOS ids complete a request that has none, as on the HTTP API.
func TestClientProtocolSeveralEOS(t *testing.T) {
	h := newClientHarness(t, ClientConfig{Model: apicore.ModelRules{EOSTokenIDs: []int64{2, 9}}})
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1)
	h.send(t, &wire.EngineCoreRequest{RequestID: "e", PromptTokenIDs: []int64{1}, Sampling: &sp})
	req := testwait.Recv(t, h.f.Adds, "the ADD")
	got := req.Sampling
	if got.EOSTokenID != wire.SomeInt(2) || !cmp.Equal(got.StopTokenIDs, []int64{9}) || !cmp.Equal(got.AllStopTokenIDs, []int64{2, 9}) {
		t.Errorf("_eos_token_id %+v stop_token_ids %v _all_stop_token_ids %v; want 2, [9], [2 9]",
			got.EOSTokenID, got.StopTokenIDs, got.AllStopTokenIDs)
	}
}

// --vocab-size and --max-logprobs bound msgpack clients too.
func TestClientProtocolModelBounds(t *testing.T) {
	h := newClientHarness(t, ClientConfig{Model: apicore.ModelRules{VocabSize: 50, MaxLogprobs: 5}})
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
	h.f.NoAdds(t)
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
	if n := h.f.Utilities.Load(); n != 4 {
		t.Errorf("engines received %d UTILITY frames, want 4 (2 allowed calls x 2 ranks)", n)
	}
}

// A prompt that does not fit the engine's max_model_len is refused by name.
func TestClientProtocolPromptTooLong(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	h.f.D.EngineUpWith(0, dispatcher.EngineLimits{MaxModelLen: 2})
	h.add(t, "long", 3, wire.SomeInt(0)) // a 2-token prompt
	if e := h.nextError(t); e["type"] != ErrTypeInvalidRequest || e["request_id"] != "long" ||
		!strings.Contains(e["message"].(string), "maximum model length") {
		t.Errorf("error %v", e)
	}
	h.f.NoAdds(t)
}

// A UTILITY's args reach the engine byte for byte: decoding them to Go values
// and encoding again reordered maps and refused an int-keyed map and an ext
// value (both of which the engine accepts).
func TestClientProtocolUtilityArgsPassThrough(t *testing.T) {
	h := newClientHarness(t, ClientConfig{})
	args := wire.Raw{
		0x93,                                                    // [
		0x83, 0x01, 0xa1, 'a', 0xa1, 'z', 0x01, 0xa1, 'b', 0x02, // {1: "a", "z": 1, "b": 2}
		0xc7, 0x03, 0x03, 'x', 'y', 'z', // ext 3 (raw bytes) "xyz"
		0x92, 0x01, 0x02, // [1, 2]
	}
	body, err := wire.AppendUtility(nil, 0, 7, "collective_rpc", args)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cli.Send([]byte{wire.RequestUtility}, body); err != nil {
		t.Fatal(err)
	}
	got := testwait.Recv(t, h.f.UtilityBodies, "the UTILITY at an engine")
	_, _, method, gotArgs, err := wire.DecodeUtility(got)
	if err != nil {
		t.Fatal(err)
	}
	if method != "collective_rpc" || !bytes.Equal(gotArgs, args) {
		t.Errorf("engine got %s % x; want collective_rpc % x", method, gotArgs, args)
	}
	if u := h.nextOutputs(t).UtilityOutput; u == nil || u.CallID != 7 || u.Failure.Valid {
		t.Errorf("utility reply %+v", u)
	}
}
