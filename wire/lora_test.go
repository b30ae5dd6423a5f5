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
	// v0.18 has load_inplace but not is_3d_lora_weight; v0.11 has neither, and
	// two fields (lora_local_path, long_lora_max_len) that are always nil.
	v018 := BuiltinLayout("v0.18")
	b, err = v018.AppendLoRAArgs(nil, lr)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0x91, 0x96, 0xa3, 's', 'q', 'l', 0x03}; !bytes.HasPrefix(b, want) {
		t.Errorf("v0.18 add_lora args % x, want prefix % x", b, want)
	}
	v011 := BuiltinLayout("v0.11")
	plain := &LoRARequest{Name: "sql", IntID: 3, Path: "/p", BaseModelName: SomeString("m")}
	b, err = v011.AppendLoRAArgs(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	// [[name, id, path, lora_local_path nil, long_lora_max_len nil, base, tensorizer nil]]
	want = []byte{0x91, 0x97, 0xa3, 's', 'q', 'l', 0x03, 0xa2, '/', 'p', 0xc0, 0xc0, 0xa1, 'm', 0xc0}
	if !bytes.Equal(b, want) {
		t.Errorf("v0.11 add_lora args % x, want % x", b, want)
	}
	if got, err := v011.DecodeLoRAArgs(b); err != nil || got.Name != "sql" || got.BaseModelName.Value != "m" {
		t.Errorf("v0.11 round trip: %+v %v", got, err)
	}
	var le *LayoutError
	if _, err := v011.AppendLoRAArgs(nil, lr); !errors.As(err, &le) || le.Field != "lora_request.load_inplace" {
		t.Errorf("load_inplace to v0.11: %v", err)
	}
	if _, err := v018.AppendLoRAArgs(nil, &LoRARequest{Name: "x", IntID: 1, Path: "/p", Is3DLoRAWeight: true}); !errors.As(err, &le) || le.Field != "lora_request.is_3d_lora_weight" {
		t.Errorf("is_3d_lora_weight to v0.18: %v", err)
	}
}
