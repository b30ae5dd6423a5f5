package server

import (
	"log/slog"
	"testing"

	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// An engine that comes up (first, or again after a restart) is sent every
// adapter with add_lora, in its layout, through the composition root's events.
func TestEngineUpGetsTheAdapters(t *testing.T) {
	f := newFakeCore(t, 0)
	cfg := DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.LoRA = LoRAConfig{Enable: true, MaxLoRAs: 1, Modules: []string{"sql=/loras/sql", `{"name": "chat", "path": "/loras/chat"}`}}
	reg, err := newLoRARegistry(cfg, f.D)
	if err != nil {
		t.Fatal(err)
	}
	ev := &engineEvents{d: f.D, log: cfg.Logger, lora: reg}
	for round := range 2 {
		ev.EngineUp(0, frontend.EngineInfo{Rank: 0, Layout: wire.Native()})
		var got []string
		for range 2 {
			body := testwait.Recv(t, f.UtilityBodies, "an add_lora call")
			_, _, method, args, err := wire.DecodeUtility(body)
			if err != nil || method != "add_lora" {
				t.Fatalf("round %d: %s %v", round, method, err)
			}
			lr, err := wire.Native().DecodeLoRAArgs(args)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, lr.Name+"@"+lr.Path)
		}
		if got[0] != "sql@/loras/sql" || got[1] != "chat@/loras/chat" {
			t.Errorf("round %d: %v", round, got)
		}
		ev.EngineDown(0, nil)
	}
}

func TestLoRAConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg LoRAConfig
		ok  bool
	}{
		{LoRAConfig{MaxLoRAs: 1}, true},
		{LoRAConfig{Modules: []string{"a=/p"}, MaxLoRAs: 1}, false},
		{LoRAConfig{Enable: true, MaxLoRAs: 0}, false},
		{LoRAConfig{Enable: true, MaxLoRAs: 2, Modules: []string{"a=/p", "nonsense"}}, false},
		{LoRAConfig{Enable: true, MaxLoRAs: 2, Modules: []string{"a=/p"}}, true},
	} {
		if err := c.cfg.validate(); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c.cfg, err)
		}
	}
}
