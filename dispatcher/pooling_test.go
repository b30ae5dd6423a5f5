package dispatcher

import (
	"context"
	"errors"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// A pooling request generates nothing, so a prompt exactly as long as the context
// is sent (vLLM's pooling endpoints take it); a longer one is refused.
func TestPoolingPromptMayFillContext(t *testing.T) {
	h := newHarness(t, Config{})
	h.d.EngineUpWith(0, EngineLimits{MaxModelLen: 3})
	pool := func(id string, n int) *wire.EngineCoreRequest {
		return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: make([]int64, n), Pooling: &wire.PoolingParams{Task: "embed"},
			DataParallelRank: wire.SomeInt(0)}
	}
	if _, err := h.d.Submit(context.Background(), pool("eq", 3)); err != nil {
		t.Fatalf("a 3-token pooling prompt on a 3-token context: %v", err)
	}
	h.s.next(t, wire.RequestAdd)
	var tl *PromptTooLongError
	if _, err := h.d.Submit(context.Background(), pool("long", 4)); !errors.As(err, &tl) || tl.PromptLen != 4 {
		t.Fatalf("a 4-token pooling prompt: %v, want *PromptTooLongError", err)
	}
}
