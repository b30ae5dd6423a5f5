package floor

import (
	"context"
	"errors"
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/bench/engine"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// Relay is the baseline: the least a ZeroMQ frontend can do, on the same transport as
// switchyard. It owns the engine handshake like a frontend (that is startup, not the
// hot path), then forwards bytes: client ADD/ABORT frames go to the engines round-robin,
// engine output messages go back to the client, with no decoding, no request table
// and no rank choice. Its latency is the floor switchyard's overhead is stated against.
type Relay struct {
	clients, hs, in, out transport.Socket
	engines              [][]byte // identities in rank order
	client               atomic.Pointer[[]byte]
	// Work is CPU spent on every forwarded message, each way (Config.RelayWork);
	// set before AwaitEngines.
	Work    time.Duration
	wg      sync.WaitGroup
	errOnce sync.Once
	err     error
}

// RelayAddrs are the endpoints a relay binds.
type RelayAddrs struct {
	Client, Handshake, Input, Output string
}

// StartRelay binds the relay's sockets; engines then connect to Handshake() and
// AwaitEngines completes the handshake with n of them.
func StartRelay(ctx context.Context, net transport.Network, a RelayAddrs) (*Relay, error) {
	r := &Relay{}
	var err error
	open := func(kind transport.Kind, ep string) transport.Socket {
		if err != nil {
			return nil
		}
		var s transport.Socket
		s, err = net.Listen(ctx, kind, ep, transport.Options{})
		return s
	}
	r.in = open(transport.Router, a.Input)
	r.out = open(transport.Pull, a.Output)
	r.hs = open(transport.Router, a.Handshake)
	r.clients = open(transport.Router, a.Client)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("bench relay: %w", err)
	}
	return r, nil
}

// ClientAddr is where clients connect a DEALER.
func (r *Relay) ClientAddr() string { return r.clients.Addr() }

// HandshakeAddr is where engines connect.
func (r *Relay) HandshakeAddr() string { return r.hs.Addr() }

// AwaitEngines runs the handshake with n engines (ranks 0..n-1) and starts forwarding.
func (r *Relay) AwaitEngines(ctx context.Context, n int) error {
	if err := acceptEngines(ctx, r.hs, r.in, n, r.in.Addr(), r.out.Addr()); err != nil {
		return fmt.Errorf("bench relay: %w", err)
	}
	for i := range n {
		r.engines = append(r.engines, wire.IdentityOf(i).Bytes())
	}
	r.wg.Add(2)
	go r.forwardRequests()
	go r.forwardOutputs()
	return nil
}

// forwardRequests: client [id, type, body, aux...] -> engine [engine id, type, body, aux...].
func (r *Relay) forwardRequests() {
	defer r.wg.Done()
	var next int
	for {
		msg, err := r.clients.Recv()
		if err != nil {
			r.fail(err)
			return
		}
		if len(msg) < 2 {
			continue
		}
		if c := r.client.Load(); c == nil || string(*c) != string(msg[0]) {
			id := append([]byte(nil), msg[0]...)
			r.client.Store(&id)
		}
		busy(r.Work)
		msg[0] = r.engines[next]
		next = (next + 1) % len(r.engines)
		if err := r.in.Send(msg...); err != nil {
			r.fail(err)
			return
		}
	}
}

// forwardOutputs: engine [body, aux...] -> client [client id, body, aux...]. The bench
// speaks through one client connection, so "the client" is whoever spoke last.
func (r *Relay) forwardOutputs() {
	defer r.wg.Done()
	frames := make([][]byte, 0, 4)
	for {
		msg, err := r.out.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			continue
		}
		if err != nil {
			r.fail(err)
			return
		}
		c := r.client.Load()
		if c == nil {
			continue
		}
		busy(r.Work)
		frames = append(append(frames[:0], *c), msg...)
		if err := r.clients.Send(frames...); err != nil && !errors.Is(err, transport.ErrNoPeer) {
			r.fail(err)
			return
		}
	}
}

// busy spins for d: CPU work that holds the goroutine's thread, as decoding would
// (a sleep would give the thread back, which is not what is being measured).
func busy(d time.Duration) {
	if d <= 0 {
		return
	}
	for start := time.Now(); time.Since(start) < d; {
	}
}

func (r *Relay) fail(err error) {
	if errors.Is(err, transport.ErrClosed) {
		return
	}
	r.errOnce.Do(func() { r.err = err })
}

// Close closes every socket and waits for the forwarders; it returns the first
// forwarding error.
func (r *Relay) Close() error {
	for _, s := range []transport.Socket{r.clients, r.hs, r.in, r.out} {
		if s != nil {
			s.Close()
		}
	}
	r.wg.Wait()
	return r.err
}

// acceptEngines is the frontend half of the startup handshake (HELLO -> INIT, READY,
// then one registration per engine on the input ROUTER), for n engines.
func acceptEngines(ctx context.Context, hs, in transport.Socket, n int, inAddr, outAddr string) error {
	initBody := wire.AppendInit(nil, &wire.HandshakeInit{Addresses: wire.EngineZmqAddresses{
		Inputs: []string{inAddr}, Outputs: []string{outAddr},
	}})
	ready := map[string]bool{}
	for len(ready) < n {
		msg, err := engine.RecvCtx(ctx, hs)
		if err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		if len(msg) < 2 {
			continue
		}
		st, err := wire.DecodeHandshakeStatus(msg[1])
		if err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
		switch st.Status {
		case "HELLO":
			if err := hs.Send(msg[0], initBody); err != nil {
				return fmt.Errorf("handshake: INIT: %w", err)
			}
		case "READY":
			ready[string(msg[0])] = true
		}
	}
	for seen := map[string]bool{}; len(seen) < n; {
		msg, err := engine.RecvCtx(ctx, in)
		if err != nil {
			return fmt.Errorf("registration: %w", err)
		}
		seen[string(msg[0])] = true
	}
	return nil
}
