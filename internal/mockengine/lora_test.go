package mockengine

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

func TestLoRAUtilities(t *testing.T) {
	dir := t.TempDir()
	e := &engine{cfg: Config{MaxLoRAs: 2, Layout: wire.Native()}, log: slog.New(slog.DiscardHandler)}
	add := func(name string, id int64, path string) (wire.Raw, string) {
		args, err := wire.Native().AppendLoRAArgs(nil, &wire.LoRARequest{Name: name, IntID: id, Path: path})
		if err != nil {
			t.Fatal(err)
		}
		res, fail, ok := e.loraUtility("add_lora", args)
		if !ok {
			t.Fatal("add_lora not answered")
		}
		return res, fail
	}
	if res, fail := add("a", 1, dir); fail != "" || string(res) != string(rawTrue) {
		t.Fatalf("add_lora: %x %q", res, fail)
	}
	if _, fail := add("b", 2, "/nonexistent/adapter"); fail != "Loading lora b failed: No adapter found for /nonexistent/adapter" {
		t.Errorf("missing path: %q", fail)
	}
	if _, fail := add("hub", 3, "org/adapter"); fail != "" {
		t.Errorf("a hub name: %q", fail)
	}
	id := func(v int64) wire.Raw { b, _ := msgpack.Marshal([]int64{v}); return b }
	res, _, _ := e.loraUtility("list_loras", wire.Raw{0x90})
	var ids []int64
	if err := msgpack.Unmarshal(res, &ids); err != nil || !slices.Equal(ids, []int64{1, 3}) {
		t.Errorf("list_loras %v %v", ids, err)
	}
	if res, _, _ := e.loraUtility("pin_lora", id(1)); string(res) != string(rawTrue) {
		t.Errorf("pin_lora: %x", res)
	}
	if res, _, _ := e.loraUtility("remove_lora", id(1)); string(res) != string(rawTrue) {
		t.Errorf("remove_lora: %x", res)
	}
	if res, _, _ := e.loraUtility("remove_lora", id(1)); string(res) != string(rawFalse) {
		t.Errorf("remove_lora of an unknown id: %x, want False", res)
	}
	off := &engine{cfg: Config{Layout: wire.Native()}}
	if _, fail, _ := off.loraUtility("list_loras", wire.Raw{0x90}); fail != loraDisabled {
		t.Errorf("without LoRA: %q", fail)
	}
	if _, _, ok := e.loraUtility("is_sleeping", wire.Raw{0x90}); ok {
		t.Error("answered another method")
	}
}

func TestLoRAChangesTheAnswerAndTheStats(t *testing.T) {
	s := NewScheduler(4, 4096, 8)
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens, sp.IgnoreEOS = wire.SomeInt(4), true
	prompt := []int64{1, 2, 3}
	for _, r := range []*wire.EngineCoreRequest{
		{RequestID: "base", PromptTokenIDs: prompt, Sampling: &sp},
		{RequestID: "sql", PromptTokenIDs: prompt, Sampling: &sp, LoRA: &wire.LoRARequest{Name: "sql", IntID: 1, Path: "/p"}},
	} {
		if err := s.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	st := s.withLoRAStats(s.Stats())
	var m map[string]any
	if err := msgpack.Unmarshal(st.Raw, &m); err != nil {
		t.Fatal(err)
	}
	if r, ok := m["running_lora_adapters"].(map[string]any); !ok || len(r) != 1 || r["sql"] == nil {
		t.Errorf("running_lora_adapters %v", m["running_lora_adapters"])
	}
	got := map[string][]int64{}
	for _, o := range s.Step(nil) {
		got[o.RequestID] = o.NewTokenIDs
	}
	if !slices.Equal(got["base"], TokensFor(prompt, 4)) || !slices.Equal(got["sql"], TokensForLoRA("sql", prompt, 4)) || slices.Equal(got["base"], got["sql"]) {
		t.Errorf("answers %v", got)
	}
}
