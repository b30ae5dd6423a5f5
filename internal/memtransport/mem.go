// Package memtransport is an in-memory transport.Network for tests. It has no
// goroutines and no sockets: sends hand copies of the frames straight to the
// receiver's bounded queue, so whole frontend/engine scenarios run inside
// testing/synctest with fake time (registration timeouts, stuck-engine watchdogs).
//
// Semantics kept from the real transport: ROUTER prepends/strips identities and
// refuses a second live identity, DEALER/PUSH round-robin, PULL reports a departed
// peer as transport.ErrPeerLeft, a send into a full queue blocks until
// Options.SendTimeout and then fails with transport.ErrSendTimeout and disconnects,
// Close makes Recv return transport.ErrClosed.
package memtransport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
)

// Network is a set of in-memory endpoints.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*sock
	nextPort  int
}

// New returns an empty network.
func New() *Network { return &Network{listeners: map[string]*sock{}, nextPort: 40000} }

type delivery struct {
	frames [][]byte
	err    error
}

type sock struct {
	net  *Network
	kind transport.Kind
	opt  transport.Options
	addr string

	recvq chan delivery
	done  chan struct{}
	once  sync.Once
	// handled is done when the Options.Handler goroutine has returned.
	handled sync.WaitGroup

	mu    sync.Mutex
	links []*link
	rr    int
}

// link joins two sockets; from the point of view of each side, the other side's
// identity is what a ROUTER prepends.
type link struct {
	a, b *sock
	dead bool
}

func (l *link) other(s *sock) *sock {
	if l.a == s {
		return l.b
	}
	return l.a
}

func defaults(o transport.Options) transport.Options {
	if o.RecvQueue <= 0 {
		o.RecvQueue = 256
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = 30 * time.Second
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	return o
}

func newSock(n *Network, kind transport.Kind, addr string, opt transport.Options) *sock {
	opt = defaults(opt)
	s := &sock{net: n, kind: kind, opt: opt, addr: addr,
		recvq: make(chan delivery, opt.RecvQueue), done: make(chan struct{})}
	if opt.Handler != nil {
		s.handled.Add(1)
		go s.handleLoop()
	}
	return s
}

// handleLoop delivers to Options.Handler. The fake keeps one queue per socket, so
// its calls never overlap even across peers, which the real transport allows;
// like it, Close waits for the handler.
func (s *sock) handleLoop() {
	defer s.handled.Done()
	for {
		select {
		case d := <-s.recvq:
			s.opt.Handler(d.frames, d.err)
		case <-s.done:
			return
		}
	}
}

// Listen binds endpoint. "tcp://host:0" gets a fresh port.
func (n *Network) Listen(_ context.Context, kind transport.Kind, endpoint string, opt transport.Options) (transport.Socket, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if strings.HasPrefix(endpoint, "tcp://") && strings.HasSuffix(endpoint, ":0") {
		n.nextPort++
		endpoint = fmt.Sprintf("%s%d", strings.TrimSuffix(endpoint, "0"), n.nextPort)
	}
	if _, busy := n.listeners[endpoint]; busy {
		return nil, fmt.Errorf("memtransport: %s: address in use", endpoint)
	}
	s := newSock(n, kind, endpoint, opt)
	n.listeners[endpoint] = s
	return s, nil
}

// Dial connects to a listening endpoint, retrying every 10 ms until
// Options.DialTimeout (the listener may not be bound yet).
func (n *Network) Dial(ctx context.Context, kind transport.Kind, endpoint string, opt transport.Options) (transport.Socket, error) {
	opt = defaults(opt)
	deadline := time.NewTimer(opt.DialTimeout)
	defer deadline.Stop()
	for {
		n.mu.Lock()
		l := n.listeners[endpoint]
		n.mu.Unlock()
		if l != nil {
			s := newSock(n, kind, endpoint, opt)
			if err := l.attach(s); err != nil {
				return nil, err
			}
			return s, nil
		}
		retry := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			retry.Stop()
			return nil, fmt.Errorf("memtransport: dial %s: %w", endpoint, ctx.Err())
		case <-deadline.C:
			retry.Stop()
			return nil, fmt.Errorf("memtransport: dial %s: connection refused", endpoint)
		case <-retry.C:
		}
	}
}

func (l *sock) attach(d *sock) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		return fmt.Errorf("memtransport: dial %s: connection refused", l.addr)
	default:
	}
	if l.kind == transport.Router {
		for _, ln := range l.links {
			if string(ln.other(l).opt.Identity) == string(d.opt.Identity) {
				return fmt.Errorf("memtransport: identity %x already connected to %s", d.opt.Identity, l.addr)
			}
		}
	}
	ln := &link{a: l, b: d}
	l.links = append(l.links, ln)
	d.links = append(d.links, ln)
	return nil
}

func (s *sock) Addr() string { return s.addr }

func (s *sock) Recv() ([][]byte, error) {
	if s.opt.Handler != nil {
		return nil, fmt.Errorf("%w: the socket delivers to its Handler", transport.ErrUnsupported)
	}
	select {
	case <-s.done:
		return nil, transport.ErrClosed
	default:
	}
	select {
	case d := <-s.recvq:
		return d.frames, d.err
	case <-s.done:
		return nil, transport.ErrClosed
	}
}

func (s *sock) Send(frames ...[]byte) error {
	if s.kind == transport.Pull {
		return transport.ErrUnsupported
	}
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return transport.ErrClosed
	default:
	}
	var targets []*link
	switch s.kind {
	case transport.Router:
		for _, ln := range s.links {
			if string(ln.other(s).opt.Identity) == string(frames[0]) {
				targets = append(targets, ln)
			}
		}
		frames = frames[1:]
		if len(targets) == 0 {
			s.mu.Unlock()
			return transport.ErrNoPeer
		}
	case transport.Dealer, transport.Push:
		if len(s.links) == 0 {
			s.mu.Unlock()
			return transport.ErrNoPeer
		}
		s.rr = (s.rr + 1) % len(s.links)
		targets = s.links[s.rr : s.rr+1]
	default:
		targets = append(targets, s.links...)
	}
	targets = append([]*link(nil), targets...)
	s.mu.Unlock()
	var err error
	for _, ln := range targets {
		if e := s.push(ln, frames); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func (s *sock) push(ln *link, frames [][]byte) error {
	dst := ln.other(s)
	msg := make([][]byte, 0, len(frames)+1)
	if dst.kind == transport.Router {
		msg = append(msg, append([]byte(nil), s.opt.Identity...))
	}
	for _, f := range frames {
		msg = append(msg, append([]byte(nil), f...))
	}
	var timeout <-chan time.Time
	if s.opt.SendTimeout > 0 {
		t := time.NewTimer(s.opt.SendTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case dst.recvq <- delivery{frames: msg}:
		return nil
	case <-dst.done:
		return transport.ErrNoPeer
	case <-s.done:
		return transport.ErrClosed
	case <-timeout:
		s.unlink(ln, transport.ErrSendTimeout)
		return fmt.Errorf("memtransport: send to %s: %w", dst.addr, transport.ErrSendTimeout)
	}
}

// unlink breaks a link and tells both ends (PULL always, others with PeerEvents).
func (s *sock) unlink(ln *link, cause error) {
	ln.a.mu.Lock()
	if ln.dead {
		ln.a.mu.Unlock()
		return
	}
	ln.dead = true
	ln.a.mu.Unlock()
	for _, end := range []*sock{ln.a, ln.b} {
		end.mu.Lock()
		for i, x := range end.links {
			if x == ln {
				end.links = append(end.links[:i], end.links[i+1:]...)
				break
			}
		}
		end.mu.Unlock()
		if end.kind == transport.Pull || end.opt.PeerEvents {
			left := &transport.PeerLeftError{Identity: ln.other(end).opt.Identity, Cause: cause}
			select {
			case end.recvq <- delivery{err: left}:
			case <-end.done:
			default: // a full queue: the fake drops the event rather than block Close
			}
		}
	}
}

func (s *sock) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.net.mu.Lock()
		if s.net.listeners[s.addr] == s {
			delete(s.net.listeners, s.addr)
		}
		s.net.mu.Unlock()
		s.mu.Lock()
		links := append([]*link(nil), s.links...)
		s.mu.Unlock()
		for _, ln := range links {
			s.unlink(ln, errors.New("memtransport: peer closed"))
		}
		s.handled.Wait()
	})
	return nil
}

var _ transport.Network = (*Network)(nil)
