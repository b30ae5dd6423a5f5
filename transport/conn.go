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
	"time"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// ZMTP 3.x frame flags.
const (
	flagMore    = 0x01
	flagLong    = 0x02
	flagCommand = 0x04
)

// conn is one ZMTP connection after the greeting. The reader is owned by the peer's
// reader goroutine; writes are serialised by wmu, which is per connection, so a
// stalled peer blocks only senders to that peer.
type conn struct {
	nc       net.Conn
	br       *bufio.Reader
	identity []byte // the peer's announced identity
	peerType string
	maxFrame uint64

	wmu    sync.Mutex
	wbuf   []byte      // coalescing buffer for small messages
	vec    net.Buffers // reused iovec for large messages
	hdrs   []byte      // frame headers for vec
	broken error       // set after a failed write: the stream is no longer framed
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
	g := &guardConn{Conn: nc, max: 64 << 10, greeting: 64}
	zc, err := zmq4.Open(g, null.Security(), zmq4.SocketType(kind.String()), zmq4.SocketIdentity(id), server, nil)
	if err != nil {
		return nil, fmt.Errorf("transport: zmtp handshake: %w", err)
	}
	if err := nc.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return &conn{
		nc:       nc,
		br:       bufio.NewReaderSize(nc, 64<<10),
		identity: []byte(zc.Peer.Meta["Identity"]),
		peerType: zc.Peer.Meta["Socket-Type"],
		maxFrame: uint64(opt.MaxFrameSize),
	}, nil
}

// readMsg reads one message (all frames up to the last without MORE) or one command.
// A frame larger than maxFrame is refused before its body is allocated.
func (c *conn) readMsg() (frames [][]byte, isCmd bool, err error) {
	var hdr [8]byte
	for {
		flag, err := c.br.ReadByte()
		if err != nil {
			return nil, false, err
		}
		if flag&^(flagMore|flagLong|flagCommand) != 0 {
			return nil, false, fmt.Errorf("transport: bad frame flags %#x", flag)
		}
		var size uint64
		if flag&flagLong != 0 {
			if _, err := io.ReadFull(c.br, hdr[:]); err != nil {
				return nil, false, err
			}
			size = binary.BigEndian.Uint64(hdr[:])
		} else {
			b, err := c.br.ReadByte()
			if err != nil {
				return nil, false, err
			}
			size = uint64(b)
		}
		if size > c.maxFrame {
			return nil, false, &FrameTooLargeError{Size: size, Max: c.maxFrame}
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(c.br, body); err != nil {
			return nil, false, err
		}
		if flag&flagCommand != 0 {
			// Commands are single frames; a command in the middle of a message is a
			// protocol error.
			if len(frames) > 0 {
				return nil, false, errors.New("transport: command inside a multipart message")
			}
			return [][]byte{body}, true, nil
		}
		frames = append(frames, body)
		if flag&flagMore == 0 {
			return frames, false, nil
		}
		if len(frames) >= maxFramesPerMessage {
			return nil, false, fmt.Errorf("transport: message has more than %d frames", maxFramesPerMessage)
		}
	}
}

// handleCommand answers PING with PONG (ZMTP 3.1 heartbeats: libzmq drops a
// connection whose PINGs go unanswered) and ignores everything else.
func (c *conn) handleCommand(body []byte, timeout time.Duration) error {
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
	return c.write([][]byte{pong}, flagCommand, timeout)
}

// smallMessage is the size under which frames are copied into one buffer and written
// with one write; larger messages go out with writev.
const smallMessage = 8 << 10

// write sends frames as one message. extraFlag is flagCommand for a command.
func (c *conn) write(frames [][]byte, extraFlag byte, timeout time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken != nil {
		return c.broken
	}
	if timeout > 0 {
		if err := c.nc.SetWriteDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
	}
	total := 0
	for _, f := range frames {
		total += len(f) + 9
	}
	var err error
	if total <= smallMessage {
		b := c.wbuf[:0]
		for i, f := range frames {
			b = appendHeader(b, f, i < len(frames)-1, extraFlag)
			b = append(b, f...)
		}
		c.wbuf = b
		_, err = c.nc.Write(b)
	} else {
		hdrs := c.hdrs[:0]
		for i, f := range frames {
			hdrs = appendHeader(hdrs, f, i < len(frames)-1, extraFlag)
		}
		c.hdrs = hdrs
		vec := c.vec[:0]
		off := 0
		for _, f := range frames {
			n := 2
			if len(f) > 255 {
				n = 9
			}
			vec = append(vec, hdrs[off:off+n], f)
			off += n
		}
		c.vec = vec
		w := vec // WriteTo consumes its receiver; keep c.vec's backing array
		_, err = w.WriteTo(c.nc)
		clear(c.vec[:cap(c.vec)]) // drop references to the caller's frames
	}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			err = fmt.Errorf("%w after %v: %w", ErrSendTimeout, timeout, err)
		}
		c.broken = err
		c.nc.Close() // a partial message cannot be resumed: the peer must reconnect
		return err
	}
	return nil
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

// guardConn watches the byte stream zmq4.Open reads during the handshake: after the
// 64-byte greeting it follows the ZMTP frame headers and fails the read that would
// complete a header announcing more than max bytes, so zmq4 never allocates it.
type guardConn struct {
	net.Conn
	max      uint64
	greeting int // greeting bytes still to pass

	state   int // 0 flag, 1 short size, 2..9 long size bytes, 10 body
	long    bool
	size    uint64
	sizeIdx int
	body    uint64
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
