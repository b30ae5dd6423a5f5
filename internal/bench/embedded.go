package bench

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-llm/switchyard/internal/server"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// embeddedSystem is switchyard in this process, wired exactly as `switchyard serve
// --handshake-address` wires it, with the bench's engines connecting to it.
type embeddedSystem struct {
	cfg Config
	srv *server.Server
	ep  *endpoints
}

func startEmbedded(ctx context.Context, cfg Config) (system, error) {
	ep, err := newEndpoints(cfg.Transport)
	if err != nil {
		return nil, err
	}
	sc := server.DefaultConfig()
	sc.HandshakeAddress = "tcp://127.0.0.1:0"
	sc.DataParallelSize = cfg.Engines
	sc.EngineTransport = cfg.Transport
	sc.HTTPAddress = "127.0.0.1:0"
	sc.ClientAddress = ep.next("client")
	sc.ShutdownTimeout = time.Second // stragglers were drained already; the rest is abandoned
	sc.Logger = slog.New(slog.DiscardHandler)
	// The bench engines do not answer layout probes: say which layout they speak.
	sc.Layouts = &wire.LayoutSet{Force: cfg.layout()}
	if cfg.Policy != "" {
		sc.LBPolicy = cfg.Policy
	}
	srv, err := server.Start(ctx, sc)
	if err != nil {
		ep.cleanup()
		return nil, fmt.Errorf("bench: starting switchyard: %w", err)
	}
	return &embeddedSystem{cfg: cfg, srv: srv, ep: ep}, nil
}

func (s *embeddedSystem) name() string      { return "switchyard" }
func (s *embeddedSystem) handshake() string { return s.srv.HandshakeAddr() }
func (s *embeddedSystem) pid() int          { return 0 }

func (s *embeddedSystem) ready(ctx context.Context, n int) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		up := 0
		for _, e := range s.srv.Engines() {
			if e.Ready {
				up++
			}
		}
		if up >= n {
			return nil
		}
		select {
		case <-t.C:
		case <-s.srv.Done():
			return s.srv.Err()
		case <-ctx.Done():
			return fmt.Errorf("bench: %d of %d engines ready: %w", up, n, ctx.Err())
		}
	}
}

func (s *embeddedSystem) connect(ctx context.Context, sk sink) (conn, error) {
	if s.cfg.Client == "go" {
		return &goConn{s: s, sink: sk}, nil
	}
	return dialZMQ(ctx, transport.ZMQ, s.srv.ClientAddr(), sk, wire.Native())
}

func (s *embeddedSystem) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	s.ep.cleanup()
	return err
}

// goConn drives the dispatcher's Go API in process: no client socket, so this path
// has one hop fewer than the relay baseline (the report's ratio says so by being low).
type goConn struct {
	s    *embeddedSystem
	sink sink
}

func (c *goConn) submit(seq int64, req *wire.EngineCoreRequest) error {
	_, err := c.s.srv.Dispatcher().SubmitFunc(req, func(_ int, out *wire.EngineCoreOutput, err error) {
		now := nowNS()
		switch {
		case err != nil, out.FinishReason == wire.FinishAbort, out.FinishReason == wire.FinishError:
			c.sink.failed(seq, now)
		default:
			c.sink.output(seq, len(out.NewTokenIDs), out.Finished(), now)
		}
	})
	return err
}

func (c *goConn) close() error { return nil }
