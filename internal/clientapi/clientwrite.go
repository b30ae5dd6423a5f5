package clientapi

// Writing to clients. A client's outputs are written by whoever holds its writer
// role (client.writing), one at a time: usually the engine output goroutine that
// sealed them (writeNow), with one non-blocking write, which saves a hand-off to
// another goroutine per engine message, a run-queue wait on a busy machine (issue
// 13). A client whose connection cannot take them at once gets a writer goroutine
// of its own (writeClient), which may block on it for up to the send timeout, so a
// client that stops reading still holds up no one else.

import (
	"errors"
	"sync"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// SealBatchDown seals rank's open batches when the engine went down, starting a
// writer goroutine for each client that needs one (the caller, the frontend's
// control loop, writes nothing itself).
func (s *ClientServer) SealBatchDown(rank int) {
	var buf [8]*client
	_, now := s.sealBatch(rank, buf[:0])
	for _, c := range now {
		go s.writeClient(c)
	}
}

// takeLocked hands c's queue to its writer: the outputs stop counting against
// c's backlog, and EndBatch callers stalled on c are woken. Caller holds s.mu and
// c's writer role.
func (s *ClientServer) takeLocked(c *client, w *clientWriter) []outMsg {
	batch := c.ready
	c.ready = w.spare[:0]
	w.spare = nil
	for _, m := range batch {
		if m.outs != nil {
			c.queued -= len(m.outs.Outputs)
		}
	}
	if c.drainWait { // wake EndBatch callers stalled on c
		close(c.drained)
		c.drained, c.drainWait = make(chan struct{}), false
	}
	return batch
}

// writeNow writes c's queue on the caller's goroutine, which took c's writer role
// in sealBatch, without waiting on c: transport.SendBatchNow writes what the
// connection takes at once and finishes the rest itself. When c's connection is
// still busy with an earlier write, nothing is sent and a writer goroutine takes
// the queue, as before.
func (s *ClientServer) writeNow(c *client) {
	w := writerPool.Get().(*clientWriter)
	s.mu.Lock()
	batch := s.takeLocked(c, w)
	s.mu.Unlock()
	msgs := w.encode(s, batch)
	if w.failFn == nil {
		w.failFn = w.fail // made once per pooled writer, not per write
	}
	w.failed, w.failedTo = nil, nil
	sent := transport.SendBatchNow(s.sock, msgs, w.failFn)
	failed, failedTo := w.failed, w.failedTo
	w.failed, w.failedTo = nil, nil
	w.reset()
	if sent && !errors.Is(failed, transport.ErrWouldBlock) {
		// Written, or the client cannot be written to: either way the batch is done.
		w.recycle(batch)
		if failed != nil {
			// Not this goroutine's to handle: clientGone aborts at the engines.
			reason := "send failed: " + failed.Error()
			s.goBG(func() { s.clientGone(failedTo, reason) })
		}
		s.mu.Lock()
		if failed == nil {
			c.blocked = false // a write completed: c reads again
		}
		s.handOnLocked(c)
		s.mu.Unlock()
		writerPool.Put(w)
		return
	}
	// Put the batch back in front of what queued meanwhile; the writer goroutine
	// inherits the role (and the writers count) and sends it all in order.
	s.mu.Lock()
	if c.gone {
		// forgetLocked dropped c's queue while we held the batch: drop it too
		// (what it queued after, telling the client why, still goes out).
		w.recycle(batch)
		batch = nil
	}
	for _, m := range batch {
		if m.outs != nil {
			c.queued += len(m.outs.Outputs)
		}
	}
	c.ready = append(batch, c.ready...)
	s.mu.Unlock()
	writerPool.Put(w)
	go s.writeClient(c)
}

// handOnLocked ends the caller's turn as c's writer: a writer goroutine takes what
// queued meanwhile, or the role is free. Caller holds s.mu.
func (s *ClientServer) handOnLocked(c *client) {
	if len(c.ready) > 0 {
		go s.writeClient(c)
		return
	}
	c.writing = false
	s.writers.Done()
}

// writeClient is c's writer goroutine, the only one writing to c while it runs: it
// takes c's whole queue, writes it with one SendBatch (one writev), and repeats
// until the queue is empty, then exits (queueLocked or writeNow starts the next
// one). A write blocks only this goroutine, for at most the send timeout; a client
// that cannot be written to is gone.
func (s *ClientServer) writeClient(c *client) {
	defer s.writers.Done()
	w := writerPool.Get().(*clientWriter)
	defer writerPool.Put(w)
	s.mu.Lock()
	for len(c.ready) > 0 {
		batch := s.takeLocked(c, w)
		s.mu.Unlock()
		w.send(s, batch)
		s.mu.Lock()
		c.blocked = false // a write completed: c reads again
	}
	c.writing = false
	s.mu.Unlock()
}

// clientWriter is a writer's reusable state, pooled between writers.
type clientWriter struct {
	buf    []byte
	spans  []msgSpan
	frames [][]byte
	msgs   [][][]byte
	spare  []outMsg // the queue array the writer hands back to its client

	// writeNow's first failure: its error and the client it was for (a copy is
	// not needed: the identity outlives the call).
	failed   error
	failedTo []byte
	failFn   func(int, error)
}

// fail records the first failed message of a SendBatchNow.
func (w *clientWriter) fail(i int, err error) {
	if w.failed == nil {
		w.failed, w.failedTo = err, w.msgs[i][0]
	}
}

var writerPool = sync.Pool{New: func() any { return &clientWriter{buf: make([]byte, 0, 4096)} }}

// send encodes every message into one buffer, then writes them with one SendBatch:
// the messages go out with one writev instead of one write each. A client that
// cannot be written to is gone.
func (w *clientWriter) send(s *ClientServer, batch []outMsg) {
	msgs := w.encode(s, batch)
	failed := false
	transport.SendBatch(s.sock, msgs, func(i int, err error) {
		if !failed { // one failure fails the rest of the batch: report it once
			failed = true
			s.clientGone(msgs[i][0], "send failed: "+err.Error())
		}
	})
	w.recycle(batch)
	w.reset()
}

// encode encodes batch into the writer's buffer and returns the messages, whose
// frames point into it, valid until reset.
func (w *clientWriter) encode(s *ClientServer, batch []outMsg) [][][]byte {
	spans := w.spans[:0]
	buf := w.buf[:0]
	for _, m := range batch {
		start := len(buf)
		var aux [][]byte
		var err error
		if m.outs != nil {
			buf, aux, err = wire.AppendOutputs(buf, m.outs)
		} else {
			buf = appendClientError(buf, m.err)
		}
		if err != nil {
			s.log.Error("client protocol: encoding outputs", "err", err)
			buf = buf[:start]
			continue
		}
		spans = append(spans, msgSpan{to: m.to, start: start, end: len(buf), aux: aux})
	}
	// buf is complete: the frames may point into it now.
	frames, msgs := w.frames[:0], w.msgs[:0]
	for _, sp := range spans {
		frames = append(append(frames, sp.to, buf[sp.start:sp.end:sp.end]), sp.aux...)
	}
	k := 0
	for _, sp := range spans {
		n := 2 + len(sp.aux)
		msgs = append(msgs, frames[k:k+n:k+n])
		k += n
	}
	w.spans, w.buf, w.frames, w.msgs = spans, buf, frames, msgs
	return msgs
}

// recycle returns the written batch's output batches to their pool and keeps the
// queue array for the client's next turn.
func (w *clientWriter) recycle(batch []outMsg) {
	for _, m := range batch {
		if m.batch != nil {
			putBatch(m.batch) // written: nothing refers to it any more
		}
	}
	clear(batch)
	w.spare = batch[:0]
}

// reset drops the encoded messages' references, keeping the buffers.
func (w *clientWriter) reset() {
	clear(w.spans)
	clear(w.frames)
	clear(w.msgs)
	w.spans, w.frames, w.msgs = w.spans[:0], w.frames[:0], w.msgs[:0]
	if cap(w.buf) > maxKeptBuffer {
		w.buf = make([]byte, 0, 4096)
	}
	w.buf = w.buf[:0]
}

// maxKeptBuffer: the writer's encode buffer is dropped after a burst that grew it
// beyond this, rather than kept for good.
const maxKeptBuffer = 4 << 20

// msgSpan is one encoded message in the writer's buffer.
type msgSpan struct {
	to         []byte
	start, end int
	aux        [][]byte
}
