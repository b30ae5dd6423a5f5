package mockengine

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
)

// redialInterval is how often a lost peer is dialled again, as libzmq's
// default ZMQ_RECONNECT_IVL (100 ms).
const redialInterval = 100 * time.Millisecond

// redialSocket is a dialled socket that reconnects when its peer goes away,
// as the libzmq DEALER, PUSH and XSUB sockets of a vLLM engine do: with
// several frontends (Config.Reconnect) one frontend dying or restarting
// must not kill the engine, whose other frontends keep using it. Sends
// while the peer is away are queued, up to maxPending, and sent in order on
// the new connection, as a libzmq PUSH queues them for the restarted peer
// (which aborts what it does not know); beyond that they are dropped. A send
// socket notices the loss only when a send fails, and that message is queued
// too: dropping it lost a restarted frontend's first outputs, and a request
// whose final output was among them never ended (TestReplayRegistrationAfterRestart
// in CI). onConnect runs on every new connection before it is used (the XSUB's
// subscription, and the registration when Config.Reregister is set).
type redialSocket struct {
	net       transport.Network
	kind      transport.Kind
	addr      string
	opt       transport.Options
	onConnect func(transport.Socket) error
	log       *slog.Logger

	mu      sync.Mutex
	cur     transport.Socket // nil while redialling
	pending [][][]byte       // sent while the peer is away, in order (copies)
	closed  bool
	redial  bool          // a redial goroutine is running
	changed chan struct{} // closed and replaced when cur changes
	stop    context.CancelFunc
	ctx     context.Context
}

func dialRedial(ctx context.Context, net transport.Network, kind transport.Kind, addr string, opt transport.Options, onConnect func(transport.Socket) error, log *slog.Logger) (*redialSocket, error) {
	opt.PeerEvents = true // a lost peer must surface in Recv to be redialled
	s, err := net.Dial(ctx, kind, addr, opt)
	if err != nil {
		return nil, err
	}
	if onConnect != nil {
		if err := onConnect(s); err != nil {
			s.Close()
			return nil, err
		}
	}
	r := &redialSocket{net: net, kind: kind, addr: addr, opt: opt, onConnect: onConnect, log: log, cur: s, changed: make(chan struct{})}
	r.ctx, r.stop = context.WithCancel(context.Background())
	return r, nil
}

// lost starts redialling after s failed, unless that already happened.
func (r *redialSocket) lost(s transport.Socket, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lostLocked(s, cause)
}

// lostLocked is lost with r.mu held.
func (r *redialSocket) lostLocked(s transport.Socket, cause error) {
	if r.closed || r.cur != s || r.redial {
		return
	}
	r.cur = nil
	r.redial = true
	s.Close()
	r.log.Warn("mockengine: peer lost; reconnecting", "address", r.addr, "cause", cause)
	go r.redialLoop()
}

func (r *redialSocket) redialLoop() {
	for r.ctx.Err() == nil {
		dctx, cancel := context.WithTimeout(r.ctx, time.Second)
		s, err := r.net.Dial(dctx, r.kind, r.addr, r.opt)
		cancel()
		if err == nil && r.onConnect != nil {
			if err = r.onConnect(s); err != nil {
				s.Close()
			}
		}
		if err == nil {
			r.mu.Lock()
			if r.closed {
				r.mu.Unlock()
				s.Close()
				return
			}
			r.cur, r.redial = s, false
			// Under mu, so a Send meanwhile queues behind them: order kept.
			for _, m := range r.pending {
				if err := s.Send(m...); err != nil {
					break // lost again: the next Send finds out and redials
				}
			}
			r.pending = nil
			close(r.changed)
			r.changed = make(chan struct{})
			r.mu.Unlock()
			r.log.Info("mockengine: peer reconnected", "address", r.addr)
			return
		}
		select {
		case <-r.ctx.Done():
		case <-time.After(redialInterval):
		}
	}
}

func (r *redialSocket) current() (transport.Socket, chan struct{}, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur, r.changed, r.closed
}

// maxPending bounds what a socket queues while its peer is away: libzmq's
// default send high-water mark.
const maxPending = 1000

// Send implements transport.Socket; while the peer is away it queues.
func (r *redialSocket) Send(frames ...[]byte) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return transport.ErrClosed
	}
	s := r.cur
	if s == nil || len(r.pending) > 0 {
		r.queueLocked(frames)
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	if err := s.Send(frames...); err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		if cur := r.cur; cur != nil && cur != s {
			// Reconnected meanwhile (a reader saw the loss first), with nothing
			// queued: the new connection takes it.
			if s, err = cur, cur.Send(frames...); err == nil {
				return nil
			}
		}
		r.queueLocked(frames) // before the redial can flush
		r.lostLocked(s, err)
	}
	return nil
}

// queueLocked keeps a copy of frames for the next connection, or drops it when
// maxPending are already waiting. Caller holds r.mu.
func (r *redialSocket) queueLocked(frames [][]byte) {
	if r.closed || len(r.pending) >= maxPending {
		return
	}
	m := make([][]byte, len(frames))
	for i, f := range frames {
		m[i] = bytes.Clone(f)
	}
	r.pending = append(r.pending, m)
}

// Recv implements transport.Socket; it waits through reconnections.
func (r *redialSocket) Recv() ([][]byte, error) {
	for {
		s, changed, closed := r.current()
		if closed {
			return nil, transport.ErrClosed
		}
		if s == nil {
			<-changed
			continue
		}
		frames, err := s.Recv()
		if err == nil {
			return frames, nil
		}
		if _, _, closed := r.current(); closed {
			return nil, transport.ErrClosed
		}
		// ErrPeerLeft (PeerEvents is on) or the connection's own end.
		r.lost(s, err)
	}
}

// Close implements transport.Socket.
func (r *redialSocket) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	s := r.cur
	r.cur = nil
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	r.stop()
	if s != nil {
		return s.Close()
	}
	return nil
}

// Addr implements transport.Socket.
func (r *redialSocket) Addr() string { return r.addr }

// dialPeer dials addr for the engine; with Config.Reconnect the socket
// redials a lost peer, running again (when not nil) on every reconnection.
func (e *engine) dialPeer(ctx context.Context, kind transport.Kind, addr string, again func(transport.Socket) error) (transport.Socket, error) {
	if !e.cfg.Reconnect {
		return e.net.Dial(ctx, kind, addr, e.opts())
	}
	first := true
	r, err := dialRedial(ctx, e.net, kind, addr, e.opts(), func(s transport.Socket) error {
		if first {
			first = false
			return nil
		}
		if again != nil {
			return again(s)
		}
		return nil
	}, e.log)
	if err != nil {
		return nil, err
	}
	return r, nil
}
