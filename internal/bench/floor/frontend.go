package floor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// httpFrontend is what the HTTP floors share, so that they differ only in the
// endpoint they answer and how they hand outputs to it: the engine sockets and the
// HTTP listener, the handshake and engine identities, the receiver that decodes
// outputs and hands each to the floor, and a Close that stops the server and
// joins the receive and serve goroutines.
type httpFrontend struct {
	name        string // for errors: "bench http floor"
	lay         *wire.Layout
	hs, in, out transport.Socket
	ln          net.Listener
	srv         *http.Server
	engines     [][]byte
	next        atomic.Uint64
	wg          sync.WaitGroup
	closeOnce   sync.Once
	recvErr     error // set by receive before it returns; read after close joins it
}

// HTTPFloorAddrs are what a floor binds: the HTTP listener, the handshake and the
// engine input/output sockets.
type HTTPFloorAddrs struct {
	HTTP, Handshake, Input, Output string
}

// open binds the sockets and the listener; on an error what was bound is closed.
func (f *httpFrontend) open(ctx context.Context, name string, lay *wire.Layout, a HTTPFloorAddrs) error {
	if lay == nil {
		lay = wire.Native()
	}
	f.name, f.lay = name, lay
	var err error
	listen := func(kind transport.Kind, ep string) transport.Socket {
		if err != nil {
			return nil
		}
		var s transport.Socket
		s, err = transport.ZMQ.Listen(ctx, kind, ep, transport.Options{})
		return s
	}
	f.in = listen(transport.Router, a.Input)
	f.out = listen(transport.Pull, a.Output)
	f.hs = listen(transport.Router, a.Handshake)
	if err == nil {
		f.ln, err = net.Listen("tcp", a.HTTP)
	}
	if err != nil {
		f.close()
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// HandshakeAddr is where engines connect.
func (f *httpFrontend) HandshakeAddr() string { return f.hs.Addr() }

// HTTPAddr is the bound HTTP address (host:port).
func (f *httpFrontend) HTTPAddr() string { return f.ln.Addr().String() }

// serve runs the handshake with n engines, then starts the receiver (each output
// handed to each) and the HTTP server on mux; close joins both.
func (f *httpFrontend) serve(ctx context.Context, n int, mux *http.ServeMux, each func(*wire.EngineCoreOutput)) error {
	if err := acceptEngines(ctx, f.hs, f.in, n, f.in.Addr(), f.out.Addr()); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	for i := range n {
		f.engines = append(f.engines, wire.IdentityOf(i).Bytes())
	}
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		f.receive(each)
	}()
	go func() {
		defer f.wg.Done()
		_ = f.srv.Serve(f.ln)
	}()
	return nil
}

// receive decodes engine outputs and hands each to each, until the output socket
// closes; an error before that is kept for Close.
func (f *httpFrontend) receive(each func(*wire.EngineCoreOutput)) {
	dec := wire.OutputsDecoder{Layout: f.lay}
	var outs wire.EngineCoreOutputs
	for {
		msg, err := f.out.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			continue
		}
		if err != nil {
			if !errors.Is(err, transport.ErrClosed) {
				f.recvErr = err
			}
			return
		}
		if err := dec.Decode(msg, &outs); err != nil {
			continue
		}
		for i := range outs.Outputs {
			each(&outs.Outputs[i])
		}
	}
}

// nextEngine is the engine of the next ADD, round-robin.
func (f *httpFrontend) nextEngine() []byte {
	return f.engines[f.next.Add(1)%uint64(len(f.engines))]
}

// Close stops the HTTP server, closes the sockets (which ends the receiver) and
// joins both goroutines; it returns the receiver's error, if it failed before
// the close. It is safe to call more than once.
func (f *httpFrontend) Close() error {
	f.close()
	return f.recvErr
}

func (f *httpFrontend) close() {
	f.closeOnce.Do(func() {
		if f.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = f.srv.Shutdown(ctx)
			cancel()
		} else if f.ln != nil {
			f.ln.Close()
		}
		for _, s := range []transport.Socket{f.hs, f.in, f.out} {
			if s != nil {
				s.Close()
			}
		}
		f.wg.Wait()
	})
}
