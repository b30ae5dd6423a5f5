package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type delivery struct {
	frames [][]byte
	err    error
	leave  *peer // ROUTER departure: its identity is released at the next Recv
}

// socket is the Socket implementation over ZMTP connections. Goroutines: one accept
// loop per listening socket, one short-lived handshake goroutine per incoming
// connection, one reader per connection, and for PUB/XPUB one writer per subscriber
// (fed by its own bounded queue). Other kinds send on the caller's goroutine,
// group-committed per connection.
type socket struct {
	kind    Kind
	opt     Options
	addr    string
	ipcPath string // removed on Close when we bound it
	ln      net.Listener

	done  chan struct{}
	recvq chan delivery
	// leaving: a ROUTER peer whose departure Recv returned last; its identity
	// is released when Recv is called again, so the caller has handled the
	// departure before a new connection with that identity is admitted.
	leaving atomic.Pointer[peer]
	wg      sync.WaitGroup
	closer  sync.Once

	mu      sync.Mutex
	closed  bool
	peers   []*peer
	byID    map[string]*peer // ROUTER: live identities
	pending map[net.Conn]struct{}
	rr      int
	subs    []subscription // XSUB/SUB: live subscriptions, replayed to new peers
	nextID  uint32         // ROUTER: generated identities for anonymous peers

	refused      map[string]*refusals // ROUTER: duplicate identities refused, for rate-limited logs
	joinsWaiting int                  // ROUTER: new connections waiting for their identity to be released
	dropped      uint64               // PUB/XPUB: messages dropped at a full subscriber queue
	dropWarn     time.Time            // PUB/XPUB: when drops were last logged
}

type peer struct {
	c  *conn
	id []byte // routing identity
	// gone (under socket.mu): the connection closed and nothing is routed to it, but
	// its identity stays reserved until its departure has been queued, when
	// released is closed.
	gone     bool
	released chan struct{}
	// joining (under socket.mu): admitted, its identity reserved, but our READY
	// is still being written; nothing is routed to it yet.
	joining bool

	tmu    sync.Mutex
	topics [][]byte // PUB/XPUB: the peer's subscriptions (prefixes)

	// PUB/XPUB: the subscriber's queue, drained by its own writer, which stops when
	// quit (closed by the reader on its way out) is closed.
	outq chan [][]byte
	quit chan struct{}
}

const (
	dupWarnEvery  = 10 * time.Second
	dropWarnEvery = 10 * time.Second
	maxRefusals   = 1024 // identities tracked for rate limiting
)

func newSocket(kind Kind, opt Options, addr string) *socket {
	return &socket{
		kind:    kind,
		opt:     opt,
		addr:    addr,
		done:    make(chan struct{}),
		recvq:   make(chan delivery, opt.RecvQueue),
		byID:    make(map[string]*peer),
		pending: make(map[net.Conn]struct{}),
		refused: make(map[string]*refusals),
	}
}

// Listen binds endpoint (tcp://HOST:PORT, port 0 picks a free port; ipc:///path) and
// accepts peers until Close. ctx bounds only the setup. A stale ipc socket file (one
// nobody accepts on, left by a crashed process) is removed first; a live one is an
// error.
func Listen(ctx context.Context, kind Kind, endpoint string, opt Options) (Socket, error) {
	if _, ok := kindNames[kind]; !ok {
		return nil, fmt.Errorf("transport: unknown socket kind %d", int(kind))
	}
	opt = opt.withDefaults()
	network, address, err := splitEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if err := removeStale(address); err != nil {
			return nil, err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, network, address)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", endpoint, err)
	}
	resolved := "ipc://" + address
	if network == "tcp" {
		resolved = "tcp://" + ln.Addr().String()
	}
	s := newSocket(kind, opt, resolved)
	s.ln = ln
	if network == "unix" {
		s.ipcPath = address
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// Dial connects to endpoint, retrying a refused connection every 50 ms until
// Options.DialTimeout or ctx ends (the peer may still be starting). The socket has
// exactly this one peer and does not reconnect if the connection drops.
func Dial(ctx context.Context, kind Kind, endpoint string, opt Options) (Socket, error) {
	if _, ok := kindNames[kind]; !ok {
		return nil, fmt.Errorf("transport: unknown socket kind %d", int(kind))
	}
	opt = opt.withDefaults()
	network, address, err := splitEndpoint(endpoint)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opt.DialTimeout)
	defer cancel()
	var d net.Dialer
	var nc net.Conn
	for {
		nc, err = d.DialContext(ctx, network, address)
		if err == nil {
			break
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("transport: dial %s: %w (last error: %w)", endpoint, ctx.Err(), err)
		case <-t.C:
		}
	}
	c, err := handshake(nc, kind, opt.Identity, false, opt)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("transport: dial %s: %w", endpoint, err)
	}
	s := newSocket(kind, opt, endpoint)
	if !s.addPeer(c) {
		return nil, fmt.Errorf("transport: dial %s: %w", endpoint, ErrClosed)
	}
	return s, nil
}

func splitEndpoint(ep string) (network, address string, err error) {
	switch {
	case strings.HasPrefix(ep, "tcp://"):
		address = ep[len("tcp://"):]
		if strings.HasPrefix(address, "*:") {
			address = "0.0.0.0" + address[1:]
		}
		return "tcp", address, nil
	case strings.HasPrefix(ep, "ipc://"):
		address = ep[len("ipc://"):]
		if address == "" {
			return "", "", fmt.Errorf("transport: empty ipc path in %q", ep)
		}
		return "unix", address, nil
	}
	return "", "", fmt.Errorf("transport: unsupported endpoint %q (want tcp:// or ipc://)", ep)
}

// removeStale removes an ipc socket file that nobody accepts on. libzmq unlinks and
// rebinds; zmq4 and net.Listen fail with "address already in use" instead.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("transport: ipc path %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("transport: ipc path %s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("transport: ipc path %s is in use by a live socket", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("transport: removing stale ipc file %s: %w", path, err)
	}
	return nil
}

func (s *socket) Recv() ([][]byte, error) {
	if !s.kind.canRecv() {
		return nil, fmt.Errorf("%w: %s cannot receive", ErrUnsupported, s.kind)
	}
	if s.opt.Handler != nil {
		return nil, fmt.Errorf("%w: the socket delivers to its Handler", ErrUnsupported)
	}
	select {
	case <-s.done:
		return nil, ErrClosed
	default:
	}
	if p := s.leaving.Swap(nil); p != nil {
		s.release(p)
	}
	select {
	case d := <-s.recvq:
		if d.leave != nil {
			s.leaving.Store(d.leave)
		}
		return d.frames, d.err
	case <-s.done:
		return nil, ErrClosed
	}
}

func (s *socket) Send(frames ...[]byte) error {
	if !s.kind.canSend() {
		return fmt.Errorf("%w: %s cannot send", ErrUnsupported, s.kind)
	}
	if len(frames) == 0 {
		return errors.New("transport: empty message")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	switch s.kind {
	case Router:
		if len(frames) < 2 {
			s.mu.Unlock()
			return errors.New("transport: ROUTER message needs an identity frame and a body")
		}
		p := s.byID[string(frames[0])]
		if p != nil && (p.gone || p.joining) {
			p = nil
		}
		s.mu.Unlock()
		if p == nil {
			return fmt.Errorf("%w: identity %x", ErrNoPeer, frames[0])
		}
		return s.sendTo(p, frames[1:])
	case Dealer, Push:
		if len(s.peers) == 0 {
			s.mu.Unlock()
			return ErrNoPeer
		}
		s.rr = (s.rr + 1) % len(s.peers)
		p := s.peers[s.rr]
		s.mu.Unlock()
		return s.sendTo(p, frames)
	case XSub, Sub:
		if isSubscription(frames) {
			if !s.subscribeLocked(frames[0]) {
				s.mu.Unlock()
				return nil // an unsubscribe that leaves the topic subscribed
			}
		} else if s.kind == Sub {
			s.mu.Unlock()
			return fmt.Errorf("%w: SUB sends only subscriptions", ErrUnsupported)
		}
		peers := append([]*peer(nil), s.peers...)
		s.mu.Unlock()
		for _, p := range peers {
			s.sendTo(p, frames) // a failed peer is dropped; the others still get it
		}
		return nil
	default: // Pub, XPub: queue for every matching subscriber; never blocks
		var msg [][]byte // one copy, shared read-only by every queue
		dropped := 0
		for _, p := range s.peers {
			if !p.subscribed(frames[0]) {
				continue
			}
			if msg == nil {
				msg = cloneFrames(frames)
			}
			select {
			case p.outq <- msg:
			default:
				dropped++
			}
		}
		warn, total := false, uint64(0)
		if dropped > 0 {
			s.dropped += uint64(dropped)
			if now := time.Now(); now.Sub(s.dropWarn) >= dropWarnEvery {
				warn, total, s.dropWarn = true, s.dropped, now
			}
		}
		s.mu.Unlock()
		if warn {
			s.opt.Logger.Warn("transport: subscriber queue full, message dropped for it", "addr", s.addr, "hwm", s.opt.SendHWM, "dropped_total", total)
		}
		return nil
	}
}

// cloneFrames copies a message into one allocation.
func cloneFrames(frames [][]byte) [][]byte {
	n := 0
	for _, f := range frames {
		n += len(f)
	}
	buf := make([]byte, 0, n)
	out := make([][]byte, len(frames))
	for i, f := range frames {
		start := len(buf)
		buf = append(buf, f...)
		out[i] = buf[start:len(buf):len(buf)]
	}
	return out
}

// SendBatch implements BatchSender. ROUTER groups runs of messages with the same
// identity; DEALER and PUSH with a single peer send everything to it; the other
// kinds, and a DEALER or PUSH with several peers (round robin per message), send one
// message at a time.
func (s *socket) SendBatch(msgs [][][]byte, fail func(i int, err error)) {
	if s.sendRuns(msgs, fail, (*conn).writeMany) {
		return
	}
	for i, m := range msgs {
		if err := s.Send(m...); err != nil && fail != nil {
			fail(i, err)
		}
	}
}

// sendRuns is the routing SendBatch and SendBatchNow share: it checks the batch,
// then hands write each ROUTER run of messages to one identity (skipping the
// identity frame), or a DEALER's or PUSH's whole batch when it has exactly one
// peer. It reports false, having done nothing, for the kinds and peer counts it
// does not route: the caller sends those its own way.
func (s *socket) sendRuns(msgs [][][]byte, fail func(i int, err error),
	write func(c *conn, run [][][]byte, skip int, timeout time.Duration) error) bool {
	failAll := func(from, to int, err error) {
		if fail != nil {
			for i := from; i < to; i++ {
				fail(i, err)
			}
		}
	}
	for _, m := range msgs {
		if len(m) == 0 || (s.kind == Router && len(m) < 2) {
			failAll(0, len(msgs), errors.New("transport: batch holds an empty message or a ROUTER message without a body"))
			return true
		}
	}
	if !s.kind.canSend() {
		failAll(0, len(msgs), fmt.Errorf("%w: %s cannot send", ErrUnsupported, s.kind))
		return true
	}
	switch s.kind {
	case Router:
		for i := 0; i < len(msgs); {
			j := i + 1
			for j < len(msgs) && string(msgs[j][0]) == string(msgs[i][0]) {
				j++
			}
			s.mu.Lock()
			closed, p := s.closed, s.byID[string(msgs[i][0])]
			if p != nil && (p.gone || p.joining) {
				p = nil
			}
			s.mu.Unlock()
			switch {
			case closed:
				failAll(i, j, ErrClosed)
			case p == nil:
				failAll(i, j, fmt.Errorf("%w: identity %x", ErrNoPeer, msgs[i][0]))
			default:
				if err := write(p.c, msgs[i:j], 1, s.opt.SendTimeout); err != nil {
					failAll(i, j, fmt.Errorf("transport: send to peer %x: %w", p.id, err))
				}
			}
			i = j
		}
		return true
	case Dealer, Push:
		s.mu.Lock()
		closed, n := s.closed, len(s.peers)
		var p *peer
		if n == 1 {
			p = s.peers[0]
		}
		s.mu.Unlock()
		if closed {
			failAll(0, len(msgs), ErrClosed)
			return true
		}
		if p != nil {
			if err := write(p.c, msgs, 0, s.opt.SendTimeout); err != nil {
				failAll(0, len(msgs), fmt.Errorf("transport: send to peer %x: %w", p.id, err))
			}
			return true
		}
	}
	return false
}

func (s *socket) sendTo(p *peer, frames [][]byte) error {
	if err := p.c.write(frames, 0, s.opt.SendTimeout); err != nil {
		return fmt.Errorf("transport: send to peer %x: %w", p.id, err)
	}
	return nil
}

func (s *socket) Close() error {
	s.closer.Do(func() {
		close(s.done)
		s.mu.Lock()
		s.closed = true
		if s.ln != nil {
			s.ln.Close()
		}
		for _, p := range s.peers {
			p.c.close()
		}
		for nc := range s.pending {
			nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
		if s.ipcPath != "" {
			os.Remove(s.ipcPath)
		}
	})
	return nil
}

func (s *socket) Addr() string { return s.addr }

// PeerCount is how many peers are connected now.
func (s *socket) PeerCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, p := range s.peers {
		if !p.gone && !p.joining {
			n++
		}
	}
	return n
}

// PeerAddr returns the remote address of the ROUTER peer with identity id ("" when
// none is connected). The frontend keeps the host an engine's handshake came from:
// an engine that publishes KV events on a wildcard address is reached there.
func (s *socket) PeerAddr(id []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.byID[string(id)]; p != nil && p.c != nil {
		return p.c.nc.RemoteAddr().String()
	}
	return ""
}
