package frontend

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Match with errors.Is.
var (
	ErrClosed = errors.New("frontend: closed")
	// ErrSendWait: an ADD waited Config.SendWait for room in a full send queue
	// (the Cause of a *QueueFullError when the caller's context did not end
	// first). The engine is busy: answer 503 and let the client retry.
	ErrSendWait = errors.New("frontend: send queue stayed full for the send wait")
	// ErrUnknownRank: Send to a rank this frontend does not manage. The typed form
	// is *UnknownRankError.
	ErrUnknownRank = errors.New("frontend: unknown rank")
	// ErrNotReady: the rank is still in its handshake (it is the Cause of an
	// *EngineDeadError returned by Send).
	ErrNotReady = errors.New("frontend: engine not ready")
	// ErrEngineCoreDead: the engine sent ENGINE_CORE_DEAD.
	ErrEngineCoreDead = errors.New("frontend: engine sent ENGINE_CORE_DEAD")
	// ErrEngineLeft: the engine's connection closed without the sentinel (a killed
	// process, or a clean SIGTERM exit, which vLLM does without a sentinel).
	ErrEngineLeft = errors.New("frontend: engine disconnected")
	// ErrOutputLost: an engine's output connection was dropped by an error (an
	// oversized frame or message, a protocol error, a reset) rather than closed;
	// outputs on it were lost.
	ErrOutputLost = errors.New("frontend: engine output connection lost")
)

// EngineDeadError says an engine can no longer serve. Cause is what killed it: the
// sentinel (ErrEngineCoreDead), a disconnect (ErrEngineLeft), an undecodable message
// (*wire.DecodeError), a stuck send (*EngineStuckError), a handshake failure
// (*PhaseTimeoutError, *HandshakeError) or ErrClosed.
type EngineDeadError struct {
	Rank  int
	Cause error
}

func (e *EngineDeadError) Error() string {
	return fmt.Sprintf("frontend: engine rank %d dead: %v", e.Rank, e.Cause)
}

// Unwrap returns the cause.
func (e *EngineDeadError) Unwrap() error { return e.Cause }

// EngineStuckError says sends to an engine do not drain: either one socket write has
// been pending for Pending (longer than Config.StuckAfter; the engine is then marked
// stuck and its requests fail), or its send queue is full (Queued messages; only that
// Send is refused).
type EngineStuckError struct {
	Rank    int
	Queued  int
	Pending time.Duration
}

func (e *EngineStuckError) Error() string {
	if e.Pending > 0 {
		return fmt.Sprintf("frontend: engine rank %d stuck: a send has been pending for %v", e.Rank, e.Pending.Round(time.Millisecond))
	}
	return fmt.Sprintf("frontend: engine rank %d stuck: send queue full (%d queued)", e.Rank, e.Queued)
}

// UnknownRankError is returned by Send for a rank outside the managed range; it
// matches ErrUnknownRank.
type UnknownRankError struct {
	Rank      int
	Connected []int // ranks up at the time, in rank order
}

func (e *UnknownRankError) Error() string {
	return fmt.Sprintf("frontend: unknown rank %d (connected ranks %v)", e.Rank, e.Connected)
}

// Is makes errors.Is(err, ErrUnknownRank) true.
func (e *UnknownRankError) Is(target error) bool { return target == ErrUnknownRank }

// Handshake phases, as named in errors.
const (
	PhaseHello        = "HELLO"
	PhaseRegistration = "registration"
	PhaseReady        = "READY"
	PhaseLayout       = "layout" // placing the engine on a vLLM wire layout (UTILITY probes)
)

// PhaseTimeoutError: an engine did not complete a handshake phase in time.
type PhaseTimeoutError struct {
	Rank    int
	Phase   string // PhaseRegistration or PhaseReady
	Timeout time.Duration
}

func (e *PhaseTimeoutError) Error() string {
	return fmt.Sprintf("frontend: engine rank %d: timed out after %v waiting for %s", e.Rank, e.Timeout, e.Phase)
}

// HandshakeError: an engine broke the handshake protocol (wrong message for its
// state, undecodable registration...).
type HandshakeError struct {
	Rank  int
	Phase string
	Msg   string
	Err   error
}

func (e *HandshakeError) Error() string {
	s := fmt.Sprintf("frontend: engine rank %d: %s: %s", e.Rank, e.Phase, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error, if any.
func (e *HandshakeError) Unwrap() error { return e.Err }

// LayoutRefusedError: the engine's vLLM wire layout could not be placed (an unknown
// or too new vllm_version, a registration shape never seen, probe answers matching
// no layout). It was sent nothing but probes; Msg says what it reported, which
// layouts are known and the ways forward.
type LayoutRefusedError struct {
	Rank    int
	Version string // the vllm_version it reported; empty when none
	Msg     string
}

func (e *LayoutRefusedError) Error() string {
	return fmt.Sprintf("frontend: engine rank %d refused: %s", e.Rank, e.Msg)
}

// QueueFullError: an ADD waited for room in its engine's full send queue (or
// for its client's fair share of it) until its context ended or
// Config.SendWait passed. The engine is busy, not stuck: nothing was sent, so
// the request may go to another rank or be retried later.
type QueueFullError struct {
	Rank   int
	Queued int
	Cause  error // ErrSendWait, or the caller's context's error
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("engine rank %d busy: send queue full (%d queued): %v", e.Rank, e.Queued, e.Cause)
}

func (e *QueueFullError) Unwrap() error { return e.Cause }
