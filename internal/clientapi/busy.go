package clientapi

import (
	"errors"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
)

// Client-protocol error types for an engine that cannot take work now; the
// client may retry (on HTTP both are a 503 with Retry-After).
const (
	// ErrTypeEngineBusy: the engine's send queue stayed full for the send wait
	// (frontend.ErrSendWait). Nothing was sent.
	ErrTypeEngineBusy = "EngineBusy"
	// ErrTypeEngineStalled: the engine had requests in flight and sent nothing
	// for --engine-stall-timeout; the request was aborted at it.
	ErrTypeEngineStalled = "EngineStalled"
	// ErrTypeGroupBroken: a rank of the lockstep group died; the group's
	// requests failed and new ones are refused until every rank is back.
	ErrTypeGroupBroken = "GroupBroken"
	// ErrTypeEngineDraining: the request was pinned to a draining rank.
	ErrTypeEngineDraining = "EngineDraining"
)

// busyType is busyError's client-protocol error type, or "" when err is not
// a busy or stalled engine.
func busyType(err error) string {
	var stalled *dispatcher.EngineStalledError
	var group *dispatcher.GroupBrokenError
	var draining *dispatcher.EngineDrainingError
	switch {
	case errors.As(err, &group):
		return ErrTypeGroupBroken
	case errors.As(err, &draining):
		return ErrTypeEngineDraining
	case errors.Is(err, frontend.ErrSendWait):
		return ErrTypeEngineBusy
	case errors.As(err, &stalled):
		return ErrTypeEngineStalled
	}
	return ""
}
