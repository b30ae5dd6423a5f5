package bench

import (
	"context"

	"github.com/switchyard-llm/switchyard/internal/bench/engine"
)

// The bench engine lives in its own package (internal/bench/engine); these names
// keep the bench's callers as they were.
type EngineConfig = engine.Config

// RunEngine runs one bench engine until ctx ends; see engine.Run.
func RunEngine(ctx context.Context, cfg EngineConfig) ([]EngineRecord, error) {
	return engine.Run(ctx, cfg)
}

const promptMarker = engine.PromptMarker

func nowNS() int64 { return engine.NowNS() }
