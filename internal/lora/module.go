package lora

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Module is one --lora-modules value: an adapter loaded at start.
type Module struct {
	Name          string `json:"name"`
	Path          string `json:"path"`
	BaseModelName string `json:"base_model_name,omitempty"`
}

// ParseModule reads a --lora-modules value as vLLM does: name=path, or a JSON
// object {"name": ..., "path": ..., "base_model_name": ...}. Unknown JSON keys are
// refused, as vLLM's LoRAModulePath(**dict) refuses them.
func ParseModule(v string) (Module, error) {
	v = strings.TrimSpace(v)
	if name, path, ok := strings.Cut(v, "="); ok && !strings.HasPrefix(v, "{") {
		if name == "" || path == "" || strings.Contains(path, "=") {
			return Module{}, fmt.Errorf("--lora-modules %q: want name=path or a JSON object", v)
		}
		return Module{Name: name, Path: path}, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	var m Module
	if err := dec.Decode(&m); err != nil {
		return Module{}, fmt.Errorf("--lora-modules %q: invalid JSON or fields: %v", v, err)
	}
	if dec.More() {
		return Module{}, fmt.Errorf("--lora-modules %q: one JSON object per value", v)
	}
	if m.Name == "" || m.Path == "" {
		return Module{}, fmt.Errorf("--lora-modules %q: name and path are required", v)
	}
	return m, nil
}
