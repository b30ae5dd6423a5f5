package main

import (
	"slices"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/server"
)

// vLLM's `--lora-modules a=/p b=/q` (several values after one flag) reaches serve
// with b=/q as a positional argument; it is taken as a module, the model kept.
func TestLoRAArgs(t *testing.T) {
	c := server.LoRAConfig{Modules: []string{"a=/p"}}
	rest := loraArgs([]string{"/models/m=1", "b=/q", `{"name": "c", "path": "/r"}`, "models/llama"}, &c)
	if !slices.Equal(rest, []string{"/models/m=1", "models/llama"}) {
		t.Errorf("rest %q", rest)
	}
	if !slices.Equal(c.Modules, []string{"a=/p", "b=/q", `{"name": "c", "path": "/r"}`}) {
		t.Errorf("modules %q", c.Modules)
	}
}
