package frontend

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// outputSink is an engine's own output PULL's transport.Options.Handler: each
// message is decoded and delivered on the connection's reader goroutine. A
// goroutine of ours reading the socket instead (Recv) cost every output message a
// hand-off, one more run-queue wait on the return path; when eight engines step
// at once those waits queue behind each other. Everything on the socket belongs to
// this rank, so a sentinel, a disconnect, garbage or an oversized frame is
// attributed to exactly this engine.
//
// The handler cannot take the engine down itself: markDown closes the socket,
// and Close waits for the socket's readers, this one included. It hands the cause
// to outputWatch instead and drops whatever the connection sends after it.
type outputSink struct {
	e atomic.Pointer[engine] // set once the engine exists; nothing connects before its INIT

	// mu serialises the decoder: the transport runs one handler call per
	// connection at a time, but a stray second connection to the same PULL has its
	// own reader.
	mu     sync.Mutex
	dec    wire.OutputsDecoder
	outs   wire.EngineCoreOutputs
	failed bool // a fatal cause went to outputWatch: the rest is dropped
}

func (s *outputSink) handle(frames [][]byte, err error) {
	e := s.e.Load()
	if e == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	if err != nil {
		if !errors.Is(err, transport.ErrPeerLeft) {
			return
		}
		cause := errors.Unwrap(err)
		if outputDropped(cause) {
			e.f.metrics.outputDrops.Inc()
			e.f.log.Error("frontend: engine output connection dropped by an error; outputs on it are lost", "rank", e.rank, "generation", e.gen, "cause", cause)
			s.fail(e, fmt.Errorf("%w: output connection dropped: %w", ErrOutputLost, cause))
		} else {
			s.fail(e, fmt.Errorf("%w: output connection closed: %w", ErrEngineLeft, cause))
		}
		return
	}
	if wire.IsEngineCoreDead(frames) {
		s.fail(e, ErrEngineCoreDead)
		return
	}
	s.dec.Layout = e.layout.Load() // nil (native) until placed: probe replies only
	if err := s.dec.Decode(frames, &s.outs); err != nil {
		s.fail(e, e.decodeError(err))
		return
	}
	if err := e.onOutputs(&s.dec, &s.outs); err != nil {
		s.fail(e, err)
	}
}

// fail hands the engine's first fatal output cause to outputWatch. Later ones are
// dropped with everything else, as markDown keeps only the first cause anyway.
func (s *outputSink) fail(e *engine, cause error) {
	s.failed = true
	select {
	case e.outFail <- cause:
	default:
	}
}

// outputWatch takes the engine down for its output reader (see outputSink) and
// ends when the engine is down for any reason.
func (e *engine) outputWatch() {
	defer e.f.wg.Done()
	select {
	case cause := <-e.outFail:
		e.f.markDown(e, Dead, cause)
	case <-e.down:
	}
}

// outputDropped reports whether an output connection ended by an error (anything but
// a clean close, io.EOF): outputs in flight on it are lost.
func outputDropped(cause error) bool {
	return cause != nil && !errors.Is(cause, io.EOF)
}
