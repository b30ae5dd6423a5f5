package transport

// Connection lifecycle of a socket: accepting peers, admitting or refusing their
// identities, each peer's read loop, and handing what arrives to Recv.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// refusals tracks one refused duplicate identity: libzmq reconnects every 100 ms,
// so refusals are logged at Warn once per dupWarnEvery with the count in between.
type refusals struct {
	last       time.Time
	suppressed int
}

func (s *socket) acceptLoop() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.opt.Logger.Warn("transport: accept failed", "addr", s.addr, "err", err)
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-s.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		if s.opt.MaxConns > 0 && len(s.pending)+len(s.peers) >= s.opt.MaxConns {
			// At the cap: a flood of connections must not use up the process's
			// file descriptors (which every other listener shares).
			s.mu.Unlock()
			nc.Close()
			s.opt.Logger.Debug("transport: connection refused at MaxConns", "addr", s.addr, "max", s.opt.MaxConns)
			continue
		}
		s.pending[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.accept(nc)
	}
}

func (s *socket) accept(nc net.Conn) {
	defer s.wg.Done()
	c, err := handshake(nc, s.kind, s.opt.Identity, true, s.opt)
	s.mu.Lock()
	delete(s.pending, nc)
	s.mu.Unlock()
	if err != nil {
		nc.Close()
		s.opt.Logger.Warn("transport: refused connection", "addr", s.addr, "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	s.addPeer(c)
}

// addPeer registers a connection and starts its reader (and, for PUB/XPUB, its
// writer). A ROUTER refuses a second connection presenting an identity that is
// already live (zmq4 would accept it and deliver every message to both), before
// its handshake completes (see guardConn.hold), so a libzmq peer loses nothing it
// had queued and sends it on its next connection. A
// connection whose identity belongs to a departed peer whose departure is not
// queued yet waits for it (on its accept goroutine), so its messages come after
// that ErrPeerLeft.
func (s *socket) addPeer(c *conn) bool {
	p := &peer{c: c, id: c.identity}
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			c.close()
			return false
		}
		if s.kind != Router {
			break
		}
		if len(p.id) == 0 {
			// libzmq's scheme for anonymous peers: a zero byte and a counter.
			s.nextID++
			p.id = binary.BigEndian.AppendUint32([]byte{0}, s.nextID)
		}
		old, dup := s.byID[string(p.id)]
		if !dup {
			s.byID[string(p.id)] = p
			if len(c.held) == 0 {
				break
			}
			// Admitted: complete the peer's handshake with our READY, outside
			// the lock; the identity stays reserved meanwhile.
			p.joining = true
			s.mu.Unlock()
			err := c.writeHeld(s.opt.HandshakeTimeout)
			s.mu.Lock()
			p.joining = false
			if err != nil || s.closed {
				delete(s.byID, string(p.id))
				s.mu.Unlock()
				c.close()
				return false
			}
			break
		}
		if old.gone {
			s.joinsWaiting++
			s.mu.Unlock()
			closing := false
			select {
			case <-old.released:
			case <-s.done:
				closing = true
			}
			s.mu.Lock()
			s.joinsWaiting--
			if closing {
				s.mu.Unlock()
				c.close()
				return false
			}
			continue
		}
		warn, suppressed := s.noteRefusalLocked(p.id, time.Now())
		s.mu.Unlock()
		level := slog.LevelDebug
		if warn {
			level = slog.LevelWarn
		}
		s.opt.Logger.Log(context.Background(), level, "transport: refused duplicate identity", "addr", s.addr, "identity", fmt.Sprintf("%x", p.id), "refused_since_last_warning", suppressed)
		c.close()
		return false
	}
	if s.kind == Pub || s.kind == XPub {
		p.outq = make(chan [][]byte, s.opt.SendHWM)
		p.quit = make(chan struct{})
		s.wg.Add(1)
		go s.pubWriter(p)
	}
	s.peers = append(s.peers, p)
	subs := make([][]byte, len(s.subs))
	for i, sub := range s.subs {
		subs[i] = sub.msg
	}
	s.wg.Add(1)
	s.mu.Unlock()
	for _, sub := range subs {
		if err := c.write([][]byte{sub}, 0, s.opt.SendTimeout); err != nil {
			break
		}
	}
	if s.kind == Router && s.opt.JoinEvents {
		// Before the reader starts: the join precedes the peer's messages.
		s.deliver(delivery{err: &PeerJoinedError{Identity: p.id}})
	}
	go s.readLoop(p)
	return true
}

// noteRefusalLocked records a refused duplicate identity and reports whether to log
// it at Warn and how many refusals went unlogged at Warn since the last time. The
// table is bounded: stale entries go first, then everything. s.mu must be held.
func (s *socket) noteRefusalLocked(id []byte, now time.Time) (warn bool, suppressed int) {
	r := s.refused[string(id)]
	if r == nil {
		if len(s.refused) >= maxRefusals {
			for k, v := range s.refused {
				if now.Sub(v.last) >= dupWarnEvery {
					delete(s.refused, k)
				}
			}
			if len(s.refused) >= maxRefusals {
				clear(s.refused)
			}
		}
		r = &refusals{}
		s.refused[string(id)] = r
	}
	if !r.last.IsZero() && now.Sub(r.last) < dupWarnEvery {
		r.suppressed++
		return false, 0
	}
	suppressed, r.last, r.suppressed = r.suppressed, now, 0
	return true, suppressed
}

// unroute takes a departed peer out of routing: no send picks it any more. With
// reserve, a ROUTER keeps its identity (marked gone) until release, so a new
// connection with that identity is refused until the departure has been reported.
func (s *socket) unroute(p *peer, reserve bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.peers {
		if q == p {
			s.peers = append(s.peers[:i], s.peers[i+1:]...)
			break
		}
	}
	if s.kind == Router && s.byID[string(p.id)] == p {
		if reserve {
			p.gone = true
			p.released = make(chan struct{})
		} else {
			delete(s.byID, string(p.id))
		}
	}
}

// release frees a departed peer's identity once its departure is queued, and wakes
// a connection waiting for it.
func (s *socket) release(p *peer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kind == Router && s.byID[string(p.id)] == p {
		delete(s.byID, string(p.id))
		close(p.released)
	}
}

func (s *socket) readLoop(p *peer) {
	defer s.wg.Done()
	var cause error
	for {
		frames, err := p.c.readMsg()
		if err != nil {
			cause = err
			break
		}
		if s.kind == XPub || s.kind == Pub {
			if isSubscription(frames) {
				p.setTopic(frames[0])
			}
			if s.kind == Pub {
				continue
			}
		}
		if !s.kind.canRecv() {
			continue // libzmq discards what a PUSH peer's partner sends
		}
		if s.kind == Router {
			frames = append([][]byte{p.id}, frames...)
		}
		if !s.deliver(delivery{frames: frames}) {
			cause = ErrClosed
			break
		}
	}
	p.c.close()
	// The departure is reported before the identity is free again: otherwise a
	// reconnecting peer's first message (a rejoining engine's registration) could
	// be queued ahead of the old connection's ErrPeerLeft.
	report := s.kind == Pull || s.opt.PeerEvents
	s.unroute(p, report)
	if p.quit != nil {
		close(p.quit)
	}
	if errors.Is(cause, ErrFrameTooLarge) {
		s.opt.Logger.Warn("transport: dropped peer sending an oversized frame or message", "addr", s.addr, "identity", fmt.Sprintf("%x", p.id), "err", cause)
	}
	if report {
		d := delivery{err: &PeerLeftError{Identity: p.id, Cause: cause}}
		if s.kind == Router {
			d.leave = p // released by the Recv after the one that returns d
		}
		s.deliver(d)
		if s.kind != Router {
			s.release(p)
		}
	}
}

func (s *socket) deliver(d delivery) bool {
	select {
	case <-s.done:
		return false
	default:
	}
	if h := s.opt.Handler; h != nil {
		h(d.frames, d.err)
		if d.leave != nil {
			s.release(d.leave) // as the Recv after the one that returned d would
		}
		return true
	}
	select {
	case s.recvq <- d:
		return true
	case <-s.done:
		return false
	}
}
