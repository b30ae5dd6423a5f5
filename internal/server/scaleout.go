package server

import (
	"context"

	"github.com/switchyard-llm/switchyard/internal/coordinator"
)

// FollowedCoordinator is a DP coordinator run by another process that this
// frontend follows: in a scale-out deployment (package cluster) the elected
// leader runs it and every frontend follows its publish, reconnecting when
// the leader changes. Start hands it the dispatcher's load sink; OnAdd
// stamps each ADD's wave (dispatcher.WaveHook).
type FollowedCoordinator interface {
	Start(ctx context.Context, load coordinator.LoadSink) error
	OnAdd(rank int) int64
	Close() error
}
