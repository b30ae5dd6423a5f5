package frontend

import (
	"slices"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

// A libzmq engine (pyzmq) of each release whose LoRARequest differs (newest;
// v0.18, without is_3d_lora_weight; v0.11, with lora_local_path and
// long_lora_max_len), which reads LoRARequest as msgspec reads vLLM's array_like
// struct, is sent the add_lora utility and an ADD carrying a LoRARequest, both
// encoded in its layout: it decodes every field (answering them back), and
// generates the LoRA request's tokens.
func TestInteropLoRAPythonEngine(t *testing.T) {
	for _, name := range []string{"newest", "v0.18", "v0.11"} {
		t.Run(name, func(t *testing.T) { loraInterop(t, name) })
	}
}

func loraInterop(t *testing.T, layout string) {
	rec := newRecorder()
	got := make(chan *wire.UtilityOutput, 1)
	f := startFrontend(t, testConfig(t, "ipc", 1), utilityCatcher{rec, got})
	pyEngineLayout(t, f.HandshakeAddress(), 0, 0, layout)
	waitReady(t, f, 1)
	l := f.Engines()[0].Layout
	// load_inplace exists from v0.15 on.
	inplace := layout != "v0.11"
	lr := &wire.LoRARequest{Name: "sql", IntID: 3, Path: "/loras/sql", BaseModelName: wire.SomeString("m"), LoadInplace: inplace}
	args, err := l.AppendLoRAArgs(nil, lr)
	if err != nil {
		t.Fatal(err)
	}
	body, err := wire.AppendUtility(wire.GetBuffer(), 0, 7, "add_lora", args)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Send(0, wire.RequestUtility, body, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-got:
		var m map[string]any
		if u.Failure.Valid || msgpack.Unmarshal(u.Result, &m) != nil {
			t.Fatalf("add_lora refused: %+v", u)
		}
		want := map[string]any{"lora_name": "sql", "lora_int_id": int8(3), "lora_path": "/loras/sql", "base_model_name": "m",
			"tensorizer_config_dict": nil}
		switch layout {
		case "newest":
			want["load_inplace"], want["is_3d_lora_weight"] = true, false
		case "v0.18":
			want["load_inplace"] = true
		case "v0.11":
			want["lora_local_path"], want["long_lora_max_len"] = nil, nil
		}
		if len(m) != len(want) {
			t.Errorf("the engine read %d fields, want %d: %v", len(m), len(want), m)
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("the engine read %s = %#v, want %#v (all: %v)", k, m[k], v, m)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no add_lora reply")
	}
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(4)
	req := wire.EngineCoreRequest{RequestID: "lora-1", PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp, ArrivalTime: 1767225600.25, LoRA: lr}
	add, _, err := l.AppendAdd(wire.GetBuffer(), &req)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Send(0, wire.RequestAdd, add, nil); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the LoRA request to finish", func() bool { return rec.allFinished([]string{"lora-1"}) })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if want := []int64{4000, 4001, 4002, 4003}; !slices.Equal(rec.tokens["lora-1"], want) {
		t.Errorf("LoRA request's tokens %v, want %v (the engine read lora_int_id 3)", rec.tokens["lora-1"], want)
	}
}
