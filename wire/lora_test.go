package wire

import (
	"bytes"
	"errors"
	"testing"
)

func TestLoRAArgs(t *testing.T) {
	lr := &LoRARequest{Name: "sql", IntID: 3, Path: "/loras/sql", BaseModelName: SomeString("m"), LoadInplace: true}
	b, err := Native().AppendLoRAArgs(nil, lr)
	if err != nil {
		t.Fatal(err)
	}
	// [[name, id, path, base, nil, load_inplace, is_3d]] in the newest field order.
	want := []byte{0x91, 0x97, 0xa3, 's', 'q', 'l', 0x03}
	if !bytes.HasPrefix(b, want) {
		t.Errorf("add_lora args % x, want prefix % x", b, want)
	}
	got, err := Native().DecodeLoRAArgs(b)
	if err != nil || got.Name != "sql" || got.IntID != 3 || got.Path != "/loras/sql" || got.BaseModelName.Value != "m" || !got.LoadInplace {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	var inv *ValidationError
	if _, err := Native().AppendLoRAArgs(nil, &LoRARequest{Name: "x", IntID: 0, Path: "/p"}); !errors.As(err, &inv) {
		t.Errorf("id 0: %v", err)
	}
	if _, err := Native().AppendLoRAArgs(nil, &LoRARequest{Name: "x", IntID: 1}); !errors.As(err, &inv) {
		t.Errorf("empty path: %v", err)
	}
	old := BuiltinLayout("v0.18")
	var le *LayoutError
	if _, err := old.AppendLoRAArgs(nil, lr); !errors.As(err, &le) || old.HasLoRA() {
		t.Errorf("a layout without LoRARequest's fields: %v", err)
	}
}
