package frontend

import (
	"sync"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// nowWriter lets a submitter write its own message when the engine's writer is
// idle and nothing is queued, saving the hand-off to the writer goroutine: on a
// busy machine that hand-off is a run-queue wait, tens of microseconds of every
// request's time to first token (in a runtime trace of the bench, the largest
// scheduling delay on the dispatch path).
//
// It never waits on the engine. The write is transport.SendBatchNow's single
// non-blocking write: bytes the kernel does not take at once are finished by the
// connection, and a connection with a write in progress refuses, so the message
// takes the queue and the watchdog sees any write that hangs. A submitter may hold
// its request's lock here, which the engine sweeps need, so waiting is never an
// option (with a blocking write, a frozen engine would hold up the other
// engines' failure handling). A failed write is not handled here either:
// the message is queued and the writer, which marks engines down, meets the
// error.
type nowWriter struct {
	// mu is held by the writer from a pop to the end of its write, and by a
	// submitter for its write. TryLock only: a submitter never waits for it.
	mu     sync.Mutex
	frames [][]byte
	msgs   [][][]byte
	failed bool
	fail   func(int, error) // sets failed; made once, so a send allocates nothing
}

// sendNow writes it now when the writer is idle and nothing is queued, and
// reports whether it did; ownership of it.body passes only then.
func (e *engine) sendNow(it sendItem) bool {
	w := &e.now
	if !w.mu.TryLock() {
		return false // the writer is writing: queue behind it
	}
	defer w.mu.Unlock()
	if e.sendq.queued() > 0 {
		return false // keep the order: the writer sends those first
	}
	if w.fail == nil {
		w.fail = func(int, error) { w.failed = true }
	}
	w.frames = append(append(w.frames[:0], e.id[:], typeFrames[it.typ&3], it.body), it.aux...)
	w.msgs = append(w.msgs[:0], w.frames)
	w.failed = false
	ok := transport.SendBatchNow(e.in, w.msgs, w.fail) && !w.failed
	clear(w.frames)
	clear(w.msgs)
	if ok {
		wire.PutBuffer(it.body)
	}
	return ok
}
