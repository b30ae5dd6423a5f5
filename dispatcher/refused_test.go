package dispatcher

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A request pinned to a rank whose engine was refused before it came up is told
// why, not only that the rank is not connected; once the rank comes up it is
// served, and a later refusal-free outage says only "not connected" again.
func TestPinnedToRefusedRank(t *testing.T) {
	h := newHarness(t, Config{}, 1)
	why := errors.New("frontend: engine rank 0 refused: the engine's wire layout cannot be placed: no layout covers vLLM 0.99.0")
	h.d.EngineRefused(0, why)
	_, err := h.d.Submit(context.Background(), pinned("a", 0))
	var inv *InvalidDataParallelRank
	if !errors.As(err, &inv) || inv.Reason != why.Error() {
		t.Fatalf("Submit to a refused rank: %v", err)
	}
	want := "data parallel rank 0 is not connected to this frontend; connected ranks: [1]; its engine was refused: " + why.Error()
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	h.d.EngineRefused(0, errors.New(strings.Repeat("x", 10000)))
	if _, err := h.d.Submit(context.Background(), pinned("b", 0)); len(err.Error()) > maxRefusedReason+200 {
		t.Errorf("a huge refusal kept whole: %d bytes", len(err.Error()))
	}
	h.d.EngineUp(0)
	if _, err := h.d.Submit(context.Background(), pinned("c", 0)); err != nil {
		t.Fatalf("after EngineUp: %v", err)
	}
	h.d.EngineDown(0, errors.New("gone"))
	_, err = h.d.Submit(context.Background(), pinned("d", 0))
	if !errors.As(err, &inv) || inv.Reason != "" {
		t.Errorf("down after coming up: %v", err)
	}
}
