package server

// LoRA (--enable-lora, --max-loras, --lora-modules): the adapter registry and
// the activity tracker (internal/lora), built beside the dispatcher; the engine
// events give every engine that comes up the adapters, and its scheduler stats
// to the tracker.

import (
	"fmt"

	"github.com/switchyard-llm/switchyard/internal/lora"
	"github.com/switchyard-llm/switchyard/wire"
)

// LoRAConfig is serve's LoRA flags.
type LoRAConfig struct {
	// Enable serves LoRA adapters (vLLM's --enable-lora; the engines must be
	// started with it too).
	Enable bool
	// MaxLoRAs is vLLM's --max-loras, which the engines take themselves: here
	// the max_lora label of vllm:lora_requests_info and the built-in mock
	// engines' value.
	MaxLoRAs int
	// Modules are --lora-modules values: name=path or vLLM's JSON form.
	Modules []string
}

// DefaultMaxLoRAs is vLLM's --max-loras default.
const DefaultMaxLoRAs = 1

func (c LoRAConfig) validate() error {
	if !c.Enable {
		if len(c.Modules) > 0 {
			return bad("lora-modules", "needs --enable-lora")
		}
		return nil
	}
	if c.MaxLoRAs < 1 {
		return bad("max-loras", "must be at least 1, got %d", c.MaxLoRAs)
	}
	if len(c.Modules) > lora.MaxAdapters {
		return bad("lora-modules", "%d adapters, more than the limit of %d", len(c.Modules), lora.MaxAdapters)
	}
	for _, m := range c.Modules {
		if _, err := lora.ParseModule(m); err != nil {
			return err
		}
	}
	return nil
}

// mockMaxLoRAs is the built-in mock engines' max_loras: 0 (no LoRA) unless on.
func (c LoRAConfig) mockMaxLoRAs() int {
	if !c.Enable {
		return 0
	}
	return c.MaxLoRAs
}

// newLoRAActivity builds the tracker (and its gauge) before the dispatcher,
// whose router reads it; nil without --enable-lora.
func newLoRAActivity(cfg Config) (*lora.Activity, error) {
	if !cfg.LoRA.Enable {
		return nil, nil
	}
	a, err := lora.NewActivity(lora.ActivityConfig{Registerer: cfg.Registry, MaxLoRAs: cfg.LoRA.MaxLoRAs})
	if err != nil {
		return nil, fmt.Errorf("lora metrics: %w", err)
	}
	return a, nil
}

// newLoRARegistry builds the registry with the static adapters, once the
// dispatcher that calls the engines exists; nil without --enable-lora.
func newLoRARegistry(cfg Config, caller lora.Caller) (*lora.Registry, error) {
	if !cfg.LoRA.Enable {
		return nil, nil
	}
	mods := make([]lora.Module, 0, len(cfg.LoRA.Modules))
	for _, v := range cfg.LoRA.Modules {
		m, err := lora.ParseModule(v)
		if err != nil {
			return nil, err
		}
		mods = append(mods, m)
	}
	return lora.New(lora.Config{Caller: caller, BaseModel: cfg.ModelName(), Static: mods,
		Logger: cfg.Logger.With("component", "lora")})
}

// loraEngineUp gives a ready engine every adapter.
func (h *engineEvents) loraEngineUp(rank int) {
	if h.lora != nil {
		h.lora.EngineUp(rank)
	}
}

// loraOutputs hands the engine's scheduler stats to the tracker.
func (h *engineEvents) loraOutputs(rank int, outs *wire.EngineCoreOutputs) {
	if h.loraActivity != nil && outs.SchedulerStats != nil {
		h.loraActivity.Observe(rank, outs.SchedulerStats)
	}
}

// loraEngineDown forgets what the engine held.
func (h *engineEvents) loraEngineDown(rank int) {
	if h.loraActivity != nil {
		h.loraActivity.EngineDown(rank)
	}
}
