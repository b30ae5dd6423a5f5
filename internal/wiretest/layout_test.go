package wiretest

import "testing"

func TestNoLoRALayout(t *testing.T) {
	l := NoLoRALayout(t)
	if l.HasLoRA() || !l.HasPooling() {
		t.Fatalf("LoRA %v, pooling %v: want the layout without LoRA, the rest kept", l.HasLoRA(), l.HasPooling())
	}
}
