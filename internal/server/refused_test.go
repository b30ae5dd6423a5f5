package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/wire"
)

// The frontend's refusal of an engine reaches the dispatcher through the
// composition root, so a request pinned to that rank is told why.
func TestEngineRefusedReachesTheDispatcher(t *testing.T) {
	f := newFakeCore(t, 1)
	var h frontend.Handler = &engineEvents{d: f.D, log: slog.New(slog.DiscardHandler)}
	rh, ok := h.(frontend.RefusalHandler)
	if !ok {
		t.Fatal("the engine-event adapter does not hear of refused engines")
	}
	rh.EngineRefused(2, errors.New("max_model_len 0"))
	sp := wire.DefaultSamplingParams()
	sp.IgnoreEOS = true
	_, err := f.D.Submit(context.Background(), &wire.EngineCoreRequest{RequestID: "r", PromptTokenIDs: []int64{1},
		Sampling: &sp, DataParallelRank: wire.SomeInt(2)})
	var bad *dispatcher.InvalidDataParallelRank
	if !errors.As(err, &bad) || bad.Reason != "max_model_len 0" {
		t.Fatalf("pinned to the refused rank: %v", err)
	}
}
