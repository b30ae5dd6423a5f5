package mockengine

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

func pdReq(t *testing.T, id string, prompt []int64, maxTokens int64, kv map[string]any) *wire.EngineCoreRequest {
	t.Helper()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(maxTokens)
	if kv != nil {
		b, err := msgpack.Marshal(map[string]any{"kv_transfer_params": kv})
		if err != nil {
			t.Fatal(err)
		}
		sp.ExtraArgs = b
	}
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: prompt, Sampling: &sp}
}

func TestMockPrefillAndDecodeRoles(t *testing.T) {
	prompt := []int64{5, 6, 7, 8}
	pre := NewScheduler(1, 0, 0)
	if err := pre.SetRole(RolePrefill, "mock-prefill-0"); err != nil {
		t.Fatal(err)
	}
	if err := pre.Add(pdReq(t, "p", prompt, 1, map[string]any{"do_remote_decode": true, "transfer_id": "t1"})); err != nil {
		t.Fatal(err)
	}
	outs := pre.Step(nil)
	if len(outs) != 1 || outs[0].FinishReason != wire.FinishLength || outs[0].KVTransferParams == nil {
		t.Fatalf("prefill output %+v", outs)
	}
	var params map[string]any
	if err := msgpack.Unmarshal(outs[0].KVTransferParams, &params); err != nil {
		t.Fatal(err)
	}
	if params["do_remote_prefill"] != true || params["transfer_id"] != "t1" || params["mock_handle"] != PDHandle(prompt, "t1") {
		t.Fatalf("params %v", params)
	}
	dec := NewScheduler(1, 0, 0)
	if err := dec.SetRole(RoleDecode, "mock-decode-0"); err != nil {
		t.Fatal(err)
	}
	// The right handle: decoded.
	if err := dec.Add(pdReq(t, "ok", prompt, 3, params)); err != nil {
		t.Fatal(err)
	}
	// Another prompt with the same params: refused.
	if err := dec.Add(pdReq(t, "bad", []int64{9, 9}, 3, params)); err != nil {
		t.Fatal(err)
	}
	// Plain: a local prefill.
	if err := dec.Add(pdReq(t, "local", prompt, 3, nil)); err != nil {
		t.Fatal(err)
	}
	got := map[string]wire.EngineCoreOutput{}
	for range 3 {
		for _, o := range dec.Step(nil) {
			if o.Finished() {
				got[o.RequestID] = o.EngineCoreOutput
			}
		}
	}
	if o := got["bad"]; o.FinishReason != wire.FinishError || len(o.NewTokenIDs) != 0 {
		t.Errorf("mismatched handle: %+v", o)
	}
	if o := got["ok"]; o.FinishReason != wire.FinishLength {
		t.Errorf("matching handle: %+v", o)
	}
	want := PDStats{RemotePrefills: 1, LocalPrefills: 1, Refused: 1}
	if st := dec.PDStats(); st != want {
		t.Errorf("decode stats %+v, want %+v", st, want)
	}
	if st := pre.PDStats(); st.Prefills != 1 {
		t.Errorf("prefill stats %+v", st)
	}
	if err := dec.SetRole("both", ""); err == nil {
		t.Error("unknown role accepted")
	}
}
