package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// ZMTP 3.x frame flags.
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
	// flagRaw is not a ZMTP flag: it marks a queued item whose one frame is bytes
	// already framed, the unwritten end of a writeNow.
	flagRaw = 0x80
)

// conn is one ZMTP connection after the greeting. The reader is owned by the peer's
// reader goroutine; writes are serialised by wmu, which is per connection, so a
// stalled peer blocks only senders to that peer.
type conn struct {
	nc       net.Conn
	br       *bufio.Reader
	identity []byte // the peer's announced identity
	peerType string
	// held is a ROUTER's own READY command, not yet written (see guardConn.hold):
	// addPeer writes it once the identity is admitted, or closes without it.
	held     []byte
	maxFrame uint64
	maxMsg   uint64
	// sendTimeout is the write deadline for writes the connection makes on its own
	// (PONG); sockets pass theirs with every send.
	sendTimeout time.Duration

	// Writes are group-committed (nats' flushOutbound): a sender queues its message
	// under wmu; if no flush is running it becomes the flusher, which takes
	// everything queued, unlocks, writes it with one writev, relocks and repeats
	// while more arrived. Other senders wait on wdone for their message to be
	// written. wmu is never held across the syscall, and messages that queue up
	// while a write is in progress go out together.
	wmu      sync.Mutex
	wdone    sync.Cond
	pending  []outItem // queued, not yet taken by the flusher
	spare    []outItem // the flusher's previous list, reused
	queued   uint64    // messages ever queued
	written  uint64    // messages ever written: queued ones up to here are on the wire
	flushing bool
	broken   error // set after a failed write: the stream is no longer framed
	// pongQueued: a PONG waits in pending. One is enough (any traffic answers a
	// heartbeat), so a peer that floods PINGs and stops reading cannot grow the
	// queue while a flush to it is blocked.
	pongQueued bool

	// rc writes without waiting (writeNow); nil when the connection has no file
	// descriptor, and then writeNow always reports ErrWouldBlock.
	rc syscall.RawConn
	nb nbWrite // writeNonblocking's state, owned by the flusher

	// Owned by the flusher (one at a time).
	wbuf []byte      // headers and small frames, contiguous
	vec  net.Buffers // reused iovec: runs of wbuf and large frames
}

// outItem is one queued message. Its frames belong to the sender, which does not
// return (nor reuse them) before the message is written, so they are not copied.
type outItem struct {
	frames [][]byte
	flag   byte // flagCommand for a command; flagRaw: bytes already framed (writeNow's tail)
}

// handshake runs the ZMTP greeting and NULL READY exchange through zmq4.Open. zmq4
// allocates whatever size a frame header claims and panics on an unknown peer socket
// type, so the raw connection is wrapped in a guard that refuses oversized frame
// headers, the exchange runs under a deadline, and a panic becomes an error.
func handshake(nc net.Conn, kind Kind, id []byte, server bool, opt Options) (c *conn, err error) {
	if err := nc.SetDeadline(time.Now().Add(opt.HandshakeTimeout)); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("transport: zmtp handshake: %v", r)
		}
	}()
	g := &guardConn{Conn: nc, max: 64 << 10, greeting: 64, wgreeting: 64, hold: server && kind == Router}
	zc, err := zmq4.Open(g, null.Security(), zmq4.SocketType(kind.String()), zmq4.SocketIdentity(id), server, nil)
	if err != nil {
		return nil, fmt.Errorf("transport: zmtp handshake: %w", err)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	c = &conn{
		nc:       nc,
		br:       bufio.NewReaderSize(nc, readBufSize),
		identity: []byte(zc.Peer.Meta["Identity"]),
		peerType: zc.Peer.Meta["Socket-Type"],
		held:     g.held,
		maxFrame: uint64(opt.MaxFrameSize),
		maxMsg:   uint64(opt.MaxMessageSize),

		sendTimeout: opt.SendTimeout,
	}
	c.wdone.L = &c.wmu
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc = rc
		}
	}
	return c, nil
}

// readMsg reads one message: every frame up to the last one without MORE. Command
// frames are handled where they arrive, also between the frames of a message (libzmq
// sends a heartbeat PING whenever its timer fires, in the middle of a multipart
// message it is writing): a PING is answered, other commands are ignored, and the
// message goes on being assembled. A frame larger than maxFrame, or one that takes the
// message past maxMsg, is refused before its body is read; a body is allocated as its
// bytes arrive (readBody), so a header claiming a large size costs nothing until the
// peer sends the data.
func (c *conn) readMsg() (frames [][]byte, err error) {
	var hdr [8]byte
	var total uint64
	for {
		flag, err := c.br.ReadByte()
		if err != nil {
			return nil, err
		}
		if flag&^(flagMore|flagLong|flagCommand) != 0 {
			return nil, fmt.Errorf("transport: bad frame flags %#x", flag)
		}
		var size uint64
		if flag&flagLong != 0 {
			if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
				return nil, err
			}
			size = binary.BigEndian.Uint64(hdr[:])
		} else {
			b, err := c.br.ReadByte()
			if err != nil {
				return nil, err
			}
			size = uint64(b)
		}
		if size > c.maxFrame {
			return nil, &FrameTooLargeError{Size: size, Max: c.maxFrame}
		}
		if flag&flagCommand != 0 {
			if size > maxCommand {
				return nil, &FrameTooLargeError{Size: size, Max: maxCommand}
			}
			body, err := c.readBody(size)
			if err != nil {
				return nil, err
			}
			if err := c.handleCommand(body); err != nil {
				return nil, err
			}
			continue
		}
		if total+size > c.maxMsg {
			return nil, &MessageTooLargeError{Size: total + size, Max: c.maxMsg}
		}
		total += size
		body, err := c.readBody(size)
		if err != nil {
			return nil, err
		}
		frames = append(frames, body)
		if flag&flagMore == 0 {
			return frames, nil
		}
		if len(frames) >= maxFramesPerMessage {
			return nil, fmt.Errorf("transport: message has more than %d frames", maxFramesPerMessage)
		}
	}
}

// maxCommand bounds a ZMTP command frame (PING carries at most a 16-byte context).
const maxCommand = 64 << 10

// readBufSize is the connection's read buffer.
const readBufSize = 64 << 10

// growFactor bounds the memory a frame body holds to this many times the bytes of it
// that have arrived. A body up to readBufSize is allocated at once; a larger one only
// once its first readBufSize bytes are in the read buffer (peeked, not copied), and
// then at most growFactor times what arrived, growing by growFactor as the bytes
// fill it. A 1 MiB aux frame is thus allocated once, at its size, and a 256 MiB one
// copies about 7 % of itself on the way; a header claiming 256 MiB followed by
// silence costs nothing.
const growFactor = 16

// readBody reads a frame body of size bytes.
func (c *conn) readBody(size uint64) ([]byte, error) {
	if size > readBufSize {
		if _, err := c.br.Peek(readBufSize); err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	b := make([]byte, min(size, growFactor*readBufSize))
	if _, err := io.ReadFull(c.br, b); err != nil {
		return nil, unexpectedEOF(err)
	}
	for uint64(len(b)) < size {
		nb := make([]byte, min(size, growFactor*uint64(len(b))))
		copy(nb, b)
		if _, err := io.ReadFull(c.br, nb[len(b):]); err != nil {
			return nil, unexpectedEOF(err)
		}
		b = nb
	}
	return b, nil
}

// unexpectedEOF: the stream ended inside a frame.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// handleCommand answers PING with PONG (ZMTP 3.1 heartbeats: libzmq drops a
// connection whose PINGs go unanswered) and ignores everything else. It runs on the
// connection's reader. The PONG joins the connection's write queue like any message
// (whole messages are written, so it never lands inside one) without waiting: when a
// write is in progress, its flusher sends the PONG with its next writev; otherwise
// the reader flushes it itself, holding no lock across the write.
func (c *conn) handleCommand(body []byte) error {
	if len(body) < 1 || int(body[0]) > len(body)-1 {
		return errors.New("transport: malformed command")
	}
	name := string(body[1 : 1+int(body[0])])
	if name != "PING" {
		return nil
	}
	// PING = name, 2-byte TTL, context (up to 16 bytes); PONG echoes the context.
	rest := body[1+len(name):]
	var ctxBytes []byte
	if len(rest) >= 2 {
		ctxBytes = rest[2:]
	}
	pong := append([]byte{4, 'P', 'O', 'N', 'G'}, ctxBytes...)
	c.wmu.Lock()
	if c.broken != nil {
		err := c.broken
		c.wmu.Unlock()
		return err
	}
	if c.pongQueued {
		c.wmu.Unlock()
		return nil
	}
	c.pongQueued = true
	c.pending = append(c.pending, outItem{frames: [][]byte{pong}, flag: flagCommand})
	c.queued++
	return c.commitLocked(c.queued, c.sendTimeout, false)
}

// inlineFrame is the size up to which a frame is copied next to its header in the
// flusher's contiguous buffer; larger frames get their own iovec entry.
const inlineFrame = 2 << 10

// maxKeptBuffer: a flush buffer grown beyond this is dropped after use rather than
// kept for the connection's lifetime.
const maxKeptBuffer = 1 << 20

// write sends frames as one message and waits until it is written. extraFlag is
// flagCommand for a command.
func (c *conn) write(frames [][]byte, extraFlag byte, timeout time.Duration) error {
	c.wmu.Lock()
	if c.broken != nil {
		err := c.broken
		c.wmu.Unlock()
		return err
	}
	c.pending = append(c.pending, outItem{frames: frames, flag: extraFlag})
	c.queued++
	return c.commitLocked(c.queued, timeout, true)
}

// writeMany sends msgs as consecutive messages, written together, leaving out the
// first skip frames of each (a ROUTER's identity frame).
func (c *conn) writeMany(msgs [][][]byte, skip int, timeout time.Duration) error {
	c.wmu.Lock()
	if c.broken != nil {
		err := c.broken
		c.wmu.Unlock()
		return err
	}
	for _, m := range msgs {
		c.pending = append(c.pending, outItem{frames: m[skip:]})
	}
	c.queued += uint64(len(msgs))
	return c.commitLocked(c.queued, timeout, true)
}

// commitLocked waits until message number seq has been written (with wait false:
// until it is in the hands of a running flusher), flushing itself when no other
// sender is. Called with wmu held; returns with it released.
func (c *conn) commitLocked(seq uint64, timeout time.Duration, wait bool) error {
	if c.flushing {
		if !wait {
			c.wmu.Unlock()
			return nil
		}
		for c.written < seq && c.broken == nil {
			c.wdone.Wait()
		}
		var err error
		if c.written < seq {
			err = c.broken
		}
		c.wmu.Unlock()
		return err
	}
	c.flushing = true
	c.flushLoopLocked(timeout)
	var err error
	if c.written < seq {
		err = c.broken
	}
	c.wmu.Unlock()
	return err
}

// flushLoopLocked is the flusher's loop: it writes what is pending until nothing is,
// then gives up the flusher role. Called with wmu held and flushing set by the
// caller; returns with wmu held.
func (c *conn) flushLoopLocked(timeout time.Duration) {
	for len(c.pending) > 0 && c.broken == nil {
		items := c.pending
		c.pending = c.spare[:0]
		c.pongQueued = false
		upto := c.queued
		c.wmu.Unlock()
		err := c.flush(items, timeout)
		clear(items) // drop the senders' frames
		c.wmu.Lock()
		c.spare = items[:0]
		if err != nil {
			c.broken = err
			c.nc.Close() // a partial message cannot be resumed: the peer must reconnect
		} else {
			c.written = upto
		}
		c.wdone.Broadcast()
	}
	c.flushing = false
}

// flush writes items with one write (everything inlined) or one writev. Only the
// flusher calls it, so it owns wbuf and vec.
func (c *conn) flush(items []outItem, timeout time.Duration) error {
	if timeout > 0 {
		if err := c.nc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
	}
	// Size the contiguous part first: iovec entries point into wbuf, so it must not
	// move while it is being filled.
	need := 0
	for _, it := range items {
		for _, f := range it.frames {
			if it.flag != flagRaw {
				need += 9
			}
			if len(f) <= inlineFrame {
				need += len(f)
			}
		}
	}
	wbuf := c.wbuf[:0]
	if cap(wbuf) < need {
		wbuf = make([]byte, 0, need)
	}
	vec := c.vec[:0]
	mark := 0
	for _, it := range items {
		for i, f := range it.frames {
			if it.flag != flagRaw {
				wbuf = appendHeader(wbuf, f, i < len(it.frames)-1, it.flag)
			}
			if len(f) <= inlineFrame {
				wbuf = append(wbuf, f...)
				continue
			}
			vec = append(vec, wbuf[mark:], f)
			mark = len(wbuf)
		}
	}
	var err error
	if len(vec) == 0 {
		_, err = c.nc.Write(wbuf)
	} else {
		if mark < len(wbuf) {
			vec = append(vec, wbuf[mark:])
		}
		w := vec // WriteTo consumes its receiver; keep vec's backing array
		_, err = w.WriteTo(c.nc)
		clear(vec[:cap(vec)]) // drop references to the senders' frames
		c.vec = vec[:0]
	}
	if cap(wbuf) <= maxKeptBuffer {
		c.wbuf = wbuf[:0]
	} else {
		c.wbuf = nil
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("%w after %v: %w", ErrSendTimeout, timeout, err)
	}
	return err
}

func appendHeader(b, frame []byte, more bool, extra byte) []byte {
	flag := extra
	if more {
		flag |= flagMore
	}
	if len(frame) > 255 {
		b = append(b, flag|flagLong)
		return binary.BigEndian.AppendUint64(b, uint64(len(frame)))
	}
	return append(b, flag, byte(len(frame)))
}

func (c *conn) close() error { return c.nc.Close() }

// writeHeld writes the READY held back during the handshake (see guardConn).
func (c *conn) writeHeld(timeout time.Duration) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	_, err := c.nc.Write(c.held)
	c.held = nil
	if err != nil {
		return err
	}
	return c.nc.SetWriteDeadline(time.Time{})
}

// guardConn watches the byte stream zmq4.Open reads during the handshake: after the
// 64-byte greeting it follows the ZMTP frame headers and fails the read that would
// complete a header announcing more than max bytes, so zmq4 never allocates it.
//
// With hold (a ROUTER accepting), what zmq4 writes after the greeting (its READY
// command) is kept in held instead of written: the peer's handshake completes
// only once its identity is admitted. A libzmq peer refused before our READY
// never attached its queue to the connection, so the messages it queued (an
// engine's HELLO) wait for its next connection instead of being lost in this
// one. NULL READYs are sent without waiting for the other side's, so holding
// ours cannot deadlock.
type guardConn struct {
	net.Conn
	max      uint64
	greeting int // greeting bytes still to pass

	hold      bool
	wgreeting int // greeting bytes still to write before holding
	held      []byte

	state   int // 0 flag, 1 short size, 2..9 long size bytes, 10 body
	long    bool
	size    uint64
	sizeIdx int
	body    uint64
}

func (g *guardConn) Write(p []byte) (int, error) {
	if !g.hold {
		return g.Conn.Write(p)
	}
	n := 0
	if g.wgreeting > 0 {
		k := min(g.wgreeting, len(p))
		m, err := g.Conn.Write(p[:k])
		g.wgreeting -= m
		if err != nil {
			return m, err
		}
		n = k
	}
	g.held = append(g.held, p[n:]...)
	return len(p), nil
}

func (g *guardConn) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	for i := 0; i < n; i++ {
		if g.greeting > 0 {
			g.greeting--
			continue
		}
		b := p[i]
		switch g.state {
		case 0:
			g.long = b&flagLong != 0
			g.size, g.sizeIdx = 0, 0
			g.state = 1
		case 1:
			g.size = g.size<<8 | uint64(b)
			g.sizeIdx++
			if g.long && g.sizeIdx < 8 {
				continue
			}
			if g.size > g.max {
				return i, &FrameTooLargeError{Size: g.size, Max: g.max}
			}
			g.body = g.size
			g.state = 2
			if g.body == 0 {
				g.state = 0
			}
		case 2:
			g.body--
			if g.body == 0 {
				g.state = 0
			}
		}
	}
	return n, err
}
