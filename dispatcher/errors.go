package dispatcher

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors. Callers test them with errors.Is; they also appear as the Cause of a
// *RequestFailedError when they end a live request.
var (
	// ErrClosed: the dispatcher was closed; live requests end with it and new calls fail.
	ErrClosed = errors.New("dispatcher: closed")
	// ErrDraining: Drain was called; new requests are refused while in-flight ones finish.
	ErrDraining = errors.New("dispatcher: draining, not accepting new requests")
	// ErrNoEngines: no engine is connected and ready to take the request or call.
	ErrNoEngines = errors.New("dispatcher: no engine is connected and ready")
	// ErrAborted: the request was aborted by its client (Abort, Stream.Close, a cancelled
	// context or a dropped Stream). A Stream reports it as a final Output with
	// Finish == wire.FinishAbort; SubmitFunc callbacks receive it as the error.
	ErrAborted = errors.New("dispatcher: request aborted by the client")
	// ErrNoFinalOutput: the engine listed the request in finished_requests without ever
	// sending an output with finish_reason set.
	ErrNoFinalOutput = errors.New("dispatcher: engine finished the request without a final output")
	// ErrStreamDropped: a Stream was garbage-collected while its request was still live.
	ErrStreamDropped = errors.New("dispatcher: stream dropped by its owner while live")
)

// InvalidDataParallelRank refuses a request pinned (data_parallel_rank) to a rank that
// is not connected and ready. Nothing is sent. ConnectedRanks lists the ranks that were
// ready at that moment, ascending. Reason, when set, is why the rank's engine was
// refused before it came up (Dispatcher.EngineRefused); the message then ends with it.
type InvalidDataParallelRank struct {
	Rank           int
	ConnectedRanks []int
	Reason         string
}

func (e *InvalidDataParallelRank) Error() string {
	msg := fmt.Sprintf("data parallel rank %d is not connected to this frontend; connected ranks: %s",
		e.Rank, formatRanks(e.ConnectedRanks))
	if e.Reason != "" {
		msg += "; its engine was refused: " + e.Reason
	}
	return msg
}

// DuplicateRequestId refuses a request whose id is already live. vLLM's engine dies on
// a duplicate live id (engine-protocol.md 6.5), so nothing is sent. An aborted request
// stays live until its ABORT frame has been handed to the engine's writer.
type DuplicateRequestId struct {
	ID string
}

func (e *DuplicateRequestId) Error() string {
	return fmt.Sprintf("request id %q is already in flight", e.ID)
}

// RequestFailedError ends a request that did not finish normally: its engine died or
// could not take it, the dispatcher closed, or the engine finished it without a final
// output. Cause says which (errors.Is/As see through it).
type RequestFailedError struct {
	ID    string
	Rank  int
	Cause error
}

func (e *RequestFailedError) Error() string {
	return fmt.Sprintf("request %q on engine rank %d failed: %v", e.ID, e.Rank, e.Cause)
}

func (e *RequestFailedError) Unwrap() error { return e.Cause }

// EngineDownError is the Cause of requests failed by EngineDown: it names the rank and
// what the transport reported.
type EngineDownError struct {
	Rank  int
	Cause error
}

func (e *EngineDownError) Error() string {
	return fmt.Sprintf("engine rank %d is down: %v", e.Rank, e.Cause)
}

func (e *EngineDownError) Unwrap() error { return e.Cause }

// SlowConsumerError ends a Stream whose reader fell more than Buffered outputs behind.
// The request is aborted at its engine so one slow reader cannot stall the output path
// of every other request.
type SlowConsumerError struct {
	ID       string
	Rank     int
	Buffered int
}

func (e *SlowConsumerError) Error() string {
	return fmt.Sprintf("request %q aborted: its reader fell %d outputs behind (slow consumer)", e.ID, e.Buffered)
}

// UtilityTimeoutError says which engines did not answer a utility call in time.
type UtilityTimeoutError struct {
	Method       string
	Timeout      time.Duration
	MissingRanks []int
}

func (e *UtilityTimeoutError) Error() string {
	return fmt.Sprintf("utility call %q timed out after %v; no reply from ranks %s",
		e.Method, e.Timeout, formatRanks(e.MissingRanks))
}

// UtilityCallError is one engine's failure of a utility call: the engine's
// failure_message, or the transport's reason the call could not reach it.
type UtilityCallError struct {
	Method string
	Rank   int
	Msg    string
	Cause  error // nil when the engine answered with a failure message
}

func (e *UtilityCallError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("utility call %q on engine rank %d failed: %v", e.Method, e.Rank, e.Cause)
	}
	return fmt.Sprintf("utility call %q on engine rank %d failed: %s", e.Method, e.Rank, e.Msg)
}

func (e *UtilityCallError) Unwrap() error { return e.Cause }

// InconsistentUtilityResults is returned by UtilityResults.Consensus when engines
// answered the same call with different values.
type InconsistentUtilityResults struct {
	Method string
	Ranks  []int
	Values []any // Values[i] came from Ranks[i]
}

func (e *InconsistentUtilityResults) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "utility call %q: engines disagree:", e.Method)
	for i, r := range e.Ranks {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " rank %d = %v", r, e.Values[i])
	}
	return b.String()
}

// formatRanks prints ranks as Python and Rust print a list: [0, 1].
func formatRanks(ranks []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range ranks {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d", r)
	}
	b.WriteByte(']')
	return b.String()
}
