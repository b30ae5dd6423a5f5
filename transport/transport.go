// Package transport is switchyard's small socket layer over go-zeromq/zmq4. It is the
// only package that imports zmq4.
//
// zmq4's sockets have defects that matter for a dispatcher (see
// docs/dependencies.md): a ROUTER holds one write lock for all peers
// and has no write deadline, so one stalled peer blocks sends to every other peer;
// received frames of any size are allocated; ZMTP PINGs reach the application and are
// never answered; PULL reports every departed peer as io.EOF; duplicate identities are
// accepted and both peers get every message; XPUB hides subscriptions; an unknown peer
// socket type panics inside the handshake. So we use zmq4 only for the ZMTP greeting
// and NULL-security READY exchange (zmq4.Open, guarded by a deadline, a size limit and
// a recover) and own everything after it: framing with frame and message size limits
// (bodies are allocated as their bytes arrive), group-committed writes (one writev
// for whatever queued, no lock across the syscall) and a write deadline per peer,
// PING answered with PONG (also between the frames of a message, where libzmq puts
// it when its heartbeat timer fires mid-message), duplicate identities refused before
// the peer's handshake completes (a ROUTER holds its own READY until the identity is
// admitted, so a libzmq peer keeps what it queued for its next connection; logged at a
// limited rate), departed peers reported as ErrPeerLeft and received before their
// identity may reconnect, one bounded queue and writer per PUB/XPUB subscriber
// (dropping at SendHWM like libzmq), stale ipc files removed before binding.
//
// SendBatchNow (sendnow.go) is a send for goroutines that must never wait on a
// peer (a submitter holding a request's lock, an engine's output goroutine): one
// non-blocking write when no write to the peer is in progress, the unwritten rest
// finished by the connection, and ErrWouldBlock, nothing sent, when a write is in
// progress, so the caller's own bounded queue and writer take the message.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Kind is a ZeroMQ socket type.
type Kind int

// Socket kinds. The semantics follow libzmq where it matters to us: ROUTER routes by
// the first frame, DEALER and PUSH round-robin over their peers, PUB/XPUB send to
// matching subscribers, XPUB and XSUB surface subscription messages.
const (
	Router Kind = iota + 1
	Dealer
	Pull
	Push
	XPub
	XSub
	Pub
	Sub
)

var kindNames = map[Kind]string{
	Router: "ROUTER", Dealer: "DEALER", Pull: "PULL", Push: "PUSH",
	XPub: "XPUB", XSub: "XSUB", Pub: "PUB", Sub: "SUB",
}

// String returns the ZMTP socket-type name ("ROUTER", ...).
func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

func (k Kind) canSend() bool { return k != Pull }
func (k Kind) canRecv() bool { return k != Push && k != Pub }

// Socket is one ZeroMQ socket. Send and Recv may be called from different goroutines;
// Send is safe for concurrent use (ROUTER sends to different peers do not wait on each
// other), Recv should have one caller.
type Socket interface {
	// Send sends one multipart message. ROUTER: frames[0] is the peer identity and is
	// not transmitted. Frames are not retained after Send returns.
	Send(frames ...[]byte) error
	// Recv returns the next message. ZMTP commands never surface. ROUTER: frames[0] is
	// the sender's identity. A departed peer surfaces (PULL always, other kinds with
	// Options.PeerEvents) as an error matching ErrPeerLeft (see *PeerLeftError); a
	// closed socket returns ErrClosed.
	Recv() ([][]byte, error)
	// Close closes the socket and every connection; it waits for the socket's
	// goroutines to exit and removes an ipc socket file it created.
	Close() error
	// Addr is the resolved endpoint: tcp://127.0.0.1:41234 after binding port 0.
	Addr() string
}

// PeerAddrer is implemented by ROUTER sockets that can tell a connected peer's remote
// network address ("host:port" for tcp, the socket path or "@" for ipc), "" when no
// peer of that identity is connected.
type PeerAddrer interface {
	PeerAddr(identity []byte) string
}

// PeerCounter is implemented by sockets that can tell how many peers are connected:
// a bound SUB has no other way to know that a publisher has reached it.
type PeerCounter interface {
	PeerCount() int
}

// BatchSender is implemented by sockets that can write several queued messages with
// one system call. Callers use the package function SendBatch, which falls back to
// one Send per message for sockets that cannot.
type BatchSender interface {
	// SendBatch sends msgs in order, each as Send would (ROUTER: msgs[i][0] is the
	// identity). Consecutive messages to one peer are written together, with one
	// writev. fail, when not nil, is called with the index and the error of every
	// message that was not sent; a malformed message (empty, or a ROUTER message
	// without a body) fails the whole batch. Frames are not retained after SendBatch
	// returns.
	SendBatch(msgs [][][]byte, fail func(i int, err error))
}

// SendBatch sends msgs on s, with one writev per run of messages to one peer when s
// is a BatchSender. See BatchSender.SendBatch.
func SendBatch(s Socket, msgs [][][]byte, fail func(i int, err error)) {
	if b, ok := s.(BatchSender); ok {
		b.SendBatch(msgs, fail)
		return
	}
	for i, m := range msgs {
		if err := s.Send(m...); err != nil && fail != nil {
			fail(i, err)
		}
	}
}

// Options configure a socket. The zero value is usable: every zero field takes the
// default documented on it.
type Options struct {
	// Identity is the ZMTP identity announced to peers (DEALER: the engine rank).
	Identity []byte
	// MaxFrameSize refuses received frames larger than this many bytes: the
	// connection is dropped before the body is read. 0 = 256 MiB.
	MaxFrameSize int
	// MaxMessageSize refuses received messages whose frames add up to more than
	// this many bytes (*MessageTooLargeError): the connection is dropped before the
	// frame that would cross it is read. 0 = 1 GiB. Bodies are allocated as their
	// bytes arrive, so a peer holds memory in proportion to what it sent, never to
	// what a header claims.
	MaxMessageSize int
	// DialTimeout bounds Dial, which retries a refused connection (libzmq connects
	// asynchronously and retries forever; a refused first attempt is normal when a
	// peer is still starting). 0 = 10 s.
	DialTimeout time.Duration
	// SendTimeout is the write deadline of one Send to one peer. A peer that does not
	// drain within it is disconnected (a partly written message cannot be resumed).
	// 0 = 30 s; negative = no deadline.
	SendTimeout time.Duration
	// HandshakeTimeout bounds the ZMTP greeting of a new connection. 0 = 10 s.
	HandshakeTimeout time.Duration
	// RecvQueue is the number of received messages buffered before the per-peer
	// readers stop reading (TCP then pushes back on the peers). 0 = 256.
	RecvQueue int
	// SendHWM is the number of messages a PUB/XPUB queues for each subscriber.
	// Every subscriber has its own queue and writer, so one that stops reading
	// delays nobody else; a message for a subscriber whose queue is full is dropped
	// for that subscriber, as libzmq's PUB does at SNDHWM. A subscriber whose write
	// takes longer than SendTimeout is disconnected. 0 = 1000 (libzmq's default).
	SendHWM int
	// MaxConns caps the connections a listening socket holds, handshaking or
	// established; more are closed as they are accepted. 0 = no cap.
	MaxConns int
	// PeerEvents makes ROUTER/DEALER/XPUB/XSUB report departed peers through Recv as
	// PULL always does. A ROUTER then holds a new connection presenting a departed
	// peer's identity until Recv has returned that departure and been called
	// again, so a rejoining peer's messages always come after the old
	// connection's ErrPeerLeft, and a reply the caller sends before it asks for
	// the next message never reaches the new connection (a handshake owner's
	// INIT for a HELLO whose sender hung up).
	PeerEvents bool
	// JoinEvents makes a ROUTER report each admitted peer through Recv, as a
	// *PeerJoinedError, before any message of that peer. A frontend that
	// restarted under running engines learns this way that an engine
	// reconnected, since a vLLM engine registers on an input socket only once
	// (see frontend.RegistrationStore).
	JoinEvents bool
	// Logger receives refused connections and protocol errors. nil = discard.
	Logger *slog.Logger
	// Handler, when set, receives every message (ROUTER: frames[0] is the
	// sender's identity), and every departure and join Recv would report, on the
	// connection's own reader goroutine instead of through Recv, which then fails
	// with ErrUnsupported. It saves the hand-off from the reader to the Recv
	// caller, a run-queue wait per message on a busy machine. Calls for one peer
	// come in order and never overlap; calls for different peers run at once. A
	// handler that blocks holds up only its own peer (whose reads then stop, so
	// TCP pushes back on it), and bounds how long Close takes: Close waits for
	// the readers, so a handler must never Close its own socket. A ROUTER
	// identity whose departure was handled is free again once the call returns.
	Handler func(frames [][]byte, err error)
}

const (
	defaultMaxFrame         = 256 << 20
	defaultMaxMessage       = 1 << 30
	defaultSendHWM          = 1000
	defaultDialTimeout      = 10 * time.Second
	defaultSendTimeout      = 30 * time.Second
	defaultHandshakeTimeout = 10 * time.Second
	defaultRecvQueue        = 256
	// maxFramesPerMessage bounds a message's frame count so an endless run of empty
	// "more" frames cannot grow memory without bound.
	maxFramesPerMessage = 4096
)

func (o Options) withDefaults() Options {
	if o.MaxFrameSize <= 0 {
		o.MaxFrameSize = defaultMaxFrame
	}
	if o.MaxMessageSize <= 0 {
		o.MaxMessageSize = defaultMaxMessage
	}
	if o.SendHWM <= 0 {
		o.SendHWM = defaultSendHWM
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = defaultDialTimeout
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = defaultSendTimeout
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = defaultHandshakeTimeout
	}
	if o.RecvQueue <= 0 {
		o.RecvQueue = defaultRecvQueue
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Errors. Match with errors.Is.
var (
	ErrClosed        = errors.New("transport: socket closed")
	ErrPeerLeft      = errors.New("transport: peer left")
	ErrFrameTooLarge = errors.New("transport: frame too large")
	// ErrMessageTooLarge: a received message exceeded Options.MaxMessageSize.
	ErrMessageTooLarge = errors.New("transport: message too large")
	// ErrNoPeer: a ROUTER send to an identity that is not connected (libzmq would
	// drop it silently; we say so), or a DEALER/PUSH send with no peer.
	ErrNoPeer = errors.New("transport: no such peer")
	// ErrSendTimeout: a send did not complete within Options.SendTimeout; the peer
	// was disconnected.
	ErrSendTimeout = errors.New("transport: send timed out")
	// ErrUnsupported: the operation does not exist for the socket kind.
	ErrUnsupported = errors.New("transport: operation not supported by socket kind")
)

// ErrPeerJoined is matched by *PeerJoinedError (Options.JoinEvents).
var ErrPeerJoined = errors.New("transport: peer joined")

// PeerJoinedError reports a peer a ROUTER admitted (Options.JoinEvents).
type PeerJoinedError struct {
	Identity []byte
}

func (e *PeerJoinedError) Error() string { return fmt.Sprintf("transport: peer %x joined", e.Identity) }

// Is makes errors.Is(err, ErrPeerJoined) true.
func (e *PeerJoinedError) Is(target error) bool { return target == ErrPeerJoined }

// PeerLeftError reports a departed peer. It matches ErrPeerLeft and unwraps to the
// cause (io.EOF for a clean close, ErrFrameTooLarge, a protocol error...).
type PeerLeftError struct {
	Identity []byte // the peer's ZMTP identity (may be empty)
	Cause    error
}

func (e *PeerLeftError) Error() string {
	return fmt.Sprintf("transport: peer %x left: %v", e.Identity, e.Cause)
}

// Is makes errors.Is(err, ErrPeerLeft) true.
func (e *PeerLeftError) Is(target error) bool { return target == ErrPeerLeft }

// Unwrap returns the cause.
func (e *PeerLeftError) Unwrap() error { return e.Cause }

// FrameTooLargeError carries the refused size; it matches ErrFrameTooLarge.
type FrameTooLargeError struct {
	Size, Max uint64
}

func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("transport: frame of %d bytes exceeds the limit of %d", e.Size, e.Max)
}

// Is makes errors.Is(err, ErrFrameTooLarge) true.
func (e *FrameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

// MessageTooLargeError carries the size a message reached with the frame that was
// refused. It matches ErrMessageTooLarge and, since a caller that handles oversized
// input handles both the same way, ErrFrameTooLarge.
type MessageTooLargeError struct {
	Size, Max uint64
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("transport: message of at least %d bytes exceeds the limit of %d", e.Size, e.Max)
}

// Is makes errors.Is(err, ErrMessageTooLarge) and errors.Is(err, ErrFrameTooLarge)
// true.
func (e *MessageTooLargeError) Is(target error) bool {
	return target == ErrMessageTooLarge || target == ErrFrameTooLarge
}

// Network opens sockets. ZMQ is the real one; memtransport provides an in-memory
// fake so cores with timers can be tested inside testing/synctest.
type Network interface {
	Listen(ctx context.Context, kind Kind, endpoint string, opt Options) (Socket, error)
	Dial(ctx context.Context, kind Kind, endpoint string, opt Options) (Socket, error)
}

// ZMQ is the Network backed by real tcp:// and ipc:// connections.
var ZMQ Network = zmqNetwork{}

type zmqNetwork struct{}

func (zmqNetwork) Listen(ctx context.Context, kind Kind, endpoint string, opt Options) (Socket, error) {
	return Listen(ctx, kind, endpoint, opt)
}

func (zmqNetwork) Dial(ctx context.Context, kind Kind, endpoint string, opt Options) (Socket, error) {
	return Dial(ctx, kind, endpoint, opt)
}
