package dispatcher

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// A prompt must fit the chosen engine's max_model_len with room for one token, or
// nothing is sent: vLLM refuses prompt_len > max_model_len, and == leaves max_tokens 0.
func TestPromptMustFitEngine(t *testing.T) {
	h := newHarness(t, Config{})
	h.d.EngineUpWith(0, EngineLimits{MaxModelLen: 3}) // mkReq's prompt has 3 tokens
	h.d.EngineUpWith(1, EngineLimits{MaxModelLen: 2})
	ctx := context.Background()

	_, err := h.d.Submit(ctx, pinned("eq", 0))
	var tl *PromptTooLongError
	if !errors.As(err, &tl) || tl.Rank != 0 || tl.PromptLen != 3 || tl.MaxModelLen != 3 {
		t.Fatalf("prompt as long as max_model_len: %v, want *PromptTooLongError on rank 0", err)
	}
	if _, err := h.d.Submit(ctx, mkReq("unpinned")); !errors.As(err, &tl) || tl.Rank != 0 || tl.MaxModelLen != 3 {
		t.Fatalf("no engine fits: %v, want *PromptTooLongError naming the longest context (rank 0)", err)
	}
	if len(h.s.sent(wire.RequestAdd)) != 0 {
		t.Fatal("a refused request reached an engine")
	}
	// A longer-context engine joins: unpinned requests go there, pinned ones to
	// a short engine are still refused.
	h.d.EngineUpWith(2, EngineLimits{MaxModelLen: 100})
	for i := range 4 {
		if _, err := h.d.Submit(ctx, mkReq("r"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
		if fr := h.s.next(t, wire.RequestAdd); fr.rank != 2 {
			t.Fatalf("request went to rank %d, whose context it does not fit", fr.rank)
		}
	}
	if _, err := h.d.Submit(ctx, pinned("p1", 1)); !errors.As(err, &tl) || tl.Rank != 1 {
		t.Fatalf("pinned to a short engine: %v", err)
	}
	// Unknown limits (EngineUp) are not checked.
	h.d.EngineUp(3)
	if _, err := h.d.Submit(ctx, pinned("p3", 3)); err != nil {
		t.Fatalf("unknown max_model_len: %v", err)
	}
}

// max_tokens is capped at max_model_len - prompt length, as vLLM's serving layer
// does; a min_tokens beyond it is refused. The caller's params are left alone.
func TestMaxTokensCappedToContext(t *testing.T) {
	h := newHarness(t, Config{})
	h.d.EngineUpWith(0, EngineLimits{MaxModelLen: 10})
	req := pinned("cap", 0)
	req.Sampling.MaxTokens = wire.SomeInt(50)
	if _, err := h.d.Submit(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := h.s.next(t, wire.RequestAdd).add.Sampling.MaxTokens; got != wire.SomeInt(7) {
		t.Errorf("max_tokens sent %+v, want 7 (10 - 3)", got)
	}
	if req.Sampling.MaxTokens != wire.SomeInt(50) {
		t.Error("the caller's params were modified")
	}
	fit := pinned("fit", 0)
	fit.Sampling.MaxTokens = wire.SomeInt(5)
	if _, err := h.d.Submit(context.Background(), fit); err != nil {
		t.Fatal(err)
	}
	if got := h.s.next(t, wire.RequestAdd).add.Sampling.MaxTokens; got != wire.SomeInt(5) {
		t.Errorf("max_tokens 5 (fits) sent as %+v", got)
	}
	bad := pinned("min", 0)
	bad.Sampling.MinTokens = 8
	_, err := h.d.Submit(context.Background(), bad)
	var inv *wire.ValidationError
	if !errors.As(err, &inv) || inv.Field != "sampling_params.min_tokens" {
		t.Fatalf("min_tokens beyond the context: %v", err)
	}
}
