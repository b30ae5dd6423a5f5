package wiretest

import (
	"encoding/json"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// NoLoRALayout is v0.18's layout without LoRARequest's fields: what a layout
// file for a release whose fields are unknown gives (every built-in knows them).
// It is built through the layout's JSON, as such a file would be read.
func NoLoRALayout(t testing.TB) *wire.Layout {
	t.Helper()
	b, err := wire.BuiltinLayout("v0.18").JSON()
	if err != nil {
		t.Fatal(err)
	}
	var f map[string]any
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	delete(f["structs"].(map[string]any), "LoRARequest")
	f["name"] = "v0.18-no-lora"
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	l, err := wire.ParseLayout(b, "test")
	if err != nil {
		t.Fatal(err)
	}
	return l
}
