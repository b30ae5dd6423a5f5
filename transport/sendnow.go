package transport

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// ErrWouldBlock: SendBatchNow could not send without waiting (a write to the peer
// is already in progress). Nothing was sent; the caller sends it the waiting way,
// from a goroutine that may block.
var ErrWouldBlock = errors.New("transport: send would wait for the peer")

// NowSender is implemented by sockets that can send from a goroutine that must not
// wait on a peer: an engine's output goroutine writing to a client, a client's
// reader writing an ADD to an engine. It saves the hand-off to a writer goroutine,
// which on a busy machine costs a run-queue wait per message.
type NowSender interface {
	// SendBatchNow sends msgs as SendBatch does, with at most one non-blocking
	// write per peer on the caller's goroutine. What the kernel does not take at
	// once is copied and finished by the connection on a goroutine of its own
	// (under Options.SendTimeout, as any write), so the call never waits on a
	// peer. A peer whose connection has a write in progress fails its messages
	// with ErrWouldBlock, unsent: the caller's own queue, with its bounds and
	// watchdog, takes them. fail is called as for SendBatch; pass one, since a
	// refused message is otherwise indistinguishable from a sent one.
	SendBatchNow(msgs [][][]byte, fail func(i int, err error))
}

// SendBatchNow sends msgs on s without waiting on a peer when s is a NowSender and
// reports true; otherwise it sends nothing and reports false.
func SendBatchNow(s Socket, msgs [][][]byte, fail func(i int, err error)) bool {
	n, ok := s.(NowSender)
	if !ok {
		return false
	}
	n.SendBatchNow(msgs, fail)
	return true
}

// SendBatchNow implements NowSender for ROUTER, and for DEALER and PUSH with one
// peer; other sockets fail every message with ErrWouldBlock (a DEALER or PUSH
// without a peer: ErrNoPeer).
func (s *socket) SendBatchNow(msgs [][][]byte, fail func(i int, err error)) {
	if s.sendRuns(msgs, fail, (*conn).writeNow) || fail == nil {
		return
	}
	s.mu.Lock()
	n := len(s.peers)
	s.mu.Unlock()
	err := ErrWouldBlock // round robin over several peers: the waiting way
	if n == 0 && (s.kind == Dealer || s.kind == Push) {
		err = ErrNoPeer
	}
	for i := range msgs {
		fail(i, err)
	}
}

// writeNow sends msgs (leaving out the first skip frames of each) with one
// non-blocking write when no write to the peer is in progress, else fails with
// ErrWouldBlock and sends nothing. The caller becomes the flusher for the one
// write; bytes the kernel did not take, and messages other senders queued
// meanwhile, are left to a flusher goroutine (flushLoopLocked under timeout). So
// a peer that stopped reading costs the caller one system call, and the
// connection at most one batch's copy.
func (c *conn) writeNow(msgs [][][]byte, skip int, timeout time.Duration) error {
	c.wmu.Lock()
	if c.broken != nil {
		err := c.broken
		c.wmu.Unlock()
		return err
	}
	if c.flushing || c.rc == nil {
		c.wmu.Unlock()
		return ErrWouldBlock
	}
	// No flush runs, so nothing is pending: these go out first.
	c.flushing = true
	c.queued += uint64(len(msgs))
	seq := c.queued
	c.wmu.Unlock()

	buf := c.wbuf[:0]
	for _, m := range msgs {
		fr := m[skip:]
		for i, f := range fr {
			buf = appendHeader(buf, f, i < len(fr)-1, 0)
			buf = append(buf, f...)
		}
	}
	n, err := c.writeNonblocking(buf)

	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err != nil {
		c.broken = err
		c.nc.Close() // part of a message may be on the wire: the peer must reconnect
		c.flushing = false
		c.wdone.Broadcast()
		return err
	}
	if n < len(buf) {
		// The rest goes before anything queued meanwhile; buf now belongs to the
		// flusher goroutine's queue.
		c.wbuf = nil
		c.pending = append(c.pending, outItem{})
		copy(c.pending[1:], c.pending)
		c.pending[0] = outItem{frames: [][]byte{buf[n:]}, flag: flagRaw}
		go c.finish(timeout)
		return nil
	}
	if cap(buf) <= maxKeptBuffer {
		c.wbuf = buf[:0]
	} else {
		c.wbuf = nil
	}
	c.written = max(c.written, seq)
	if len(c.pending) > 0 {
		go c.finish(timeout) // senders that queued while we wrote wait on wdone
		return nil
	}
	c.flushing = false
	c.wdone.Broadcast()
	return nil
}

// finish is the flusher goroutine writeNow leaves behind: it writes what is
// pending, waiting on the peer as any flusher does.
func (c *conn) finish(timeout time.Duration) {
	c.wmu.Lock()
	c.flushLoopLocked(timeout)
	c.wmu.Unlock()
}

// writeNonblocking makes one write(2) on the connection's non-blocking descriptor
// and reports how much of b it took; a full socket buffer is 0 bytes, not an
// error.
func (c *conn) writeNonblocking(b []byte) (int, error) {
	nb := &c.nb
	if nb.fn == nil {
		nb.fn = nb.write // made once: a closure per call would be an allocation per send
	}
	nb.buf = b
	err := c.rc.Write(nb.fn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// A flush's write deadline outlived its write; this write does not wait,
		// so it has none.
		if err = c.nc.SetWriteDeadline(time.Time{}); err == nil {
			err = c.rc.Write(nb.fn)
		}
	}
	n, werr := nb.n, nb.err
	nb.buf, nb.err = nil, nil
	if err != nil {
		return 0, err
	}
	if werr == syscall.EAGAIN {
		return 0, nil
	}
	if werr != nil {
		return 0, werr
	}
	return max(n, 0), nil
}

// nbWrite is writeNonblocking's callback for syscall.RawConn.Write, with its
// arguments and results; only the flusher uses it.
type nbWrite struct {
	buf []byte
	n   int
	err error
	fn  func(fd uintptr) bool
}

// write makes one write(2), retried only on EINTR, and reports done either way:
// the poller is never waited for.
func (w *nbWrite) write(fd uintptr) bool {
	for {
		w.n, w.err = syscall.Write(int(fd), w.buf)
		if w.err != syscall.EINTR {
			return true
		}
	}
}
