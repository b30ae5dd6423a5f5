package bench

import (
	"context"
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/bench/floor"
	"os"
	"strings"
	"sync/atomic"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// endpoints hands out fresh endpoints of the configured transport: ipc files in one
// temporary directory per run, or tcp port 0 on loopback.
type endpoints struct {
	kind string
	dir  string
	n    atomic.Int64
}

func newEndpoints(kind string) (*endpoints, error) {
	e := &endpoints{kind: kind}
	if kind == "ipc" {
		dir, err := os.MkdirTemp("", "swbench-")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		e.dir = dir
	}
	return e, nil
}

func (e *endpoints) next(name string) string {
	if e.kind == "ipc" {
		return fmt.Sprintf("ipc://%s/%s-%d", e.dir, name, e.n.Add(1))
	}
	return "tcp://127.0.0.1:0"
}

func (e *endpoints) cleanup() {
	if e.dir != "" {
		os.RemoveAll(e.dir)
	}
}

// relaySystem is the baseline phase.
type relaySystem struct {
	label string // the phase's name: "relay", or "relay-2" for an A/A run's second
	lay   *wire.Layout
	r     *floor.Relay
	ep    *endpoints
}

func startRelaySystem(ctx context.Context, cfg Config) (system, error) {
	return startNamedRelay(ctx, cfg, "relay")
}

func startNamedRelay(ctx context.Context, cfg Config, label string) (system, error) {
	ep, err := newEndpoints(cfg.Transport)
	if err != nil {
		return nil, err
	}
	// The handshake is tcp, as vLLM engines are given --data-parallel-address/port;
	// only the engine input/output (and client) sockets follow --transport.
	r, err := floor.StartRelay(ctx, transport.ZMQ, floor.RelayAddrs{
		Client: ep.next("client"), Handshake: "tcp://127.0.0.1:0",
		Input: ep.next("input"), Output: ep.next("output"),
	})
	if err != nil {
		ep.cleanup()
		return nil, err
	}
	r.Work = cfg.RelayWork
	return &relaySystem{label: label, lay: cfg.layout(), r: r, ep: ep}, nil
}

func (s *relaySystem) name() string      { return s.label }
func (s *relaySystem) handshake() string { return s.r.HandshakeAddr() }
func (s *relaySystem) pid() int          { return 0 }
func (s *relaySystem) ready(ctx context.Context, n int) error {
	return s.r.AwaitEngines(ctx, n)
}
func (s *relaySystem) connect(ctx context.Context, sk sink) (conn, error) {
	// The relay forwards bytes: its client speaks the engines' layout.
	return dialZMQ(ctx, transport.ZMQ, s.r.ClientAddr(), sk, s.lay)
}
func (s *relaySystem) close() error {
	err := s.r.Close()
	s.ep.cleanup()
	return err
}

// targetSystem is a frontend running elsewhere. With Config.EnginesTo the bench's
// engines connect to it (a `switchyard serve --handshake-address` waiting for them),
// which gives the engine-side figures across processes; without it the target brings
// its own engines and only client-side figures exist.
type targetSystem struct {
	cfg Config
}

func startTargetSystem(_ context.Context, cfg Config) (system, error) {
	return &targetSystem{cfg: cfg}, nil
}

func (s *targetSystem) name() string      { return "switchyard" }
func (s *targetSystem) handshake() string { return s.cfg.EnginesTo }
func (s *targetSystem) pid() int          { return s.cfg.TargetPID }
func (s *targetSystem) ready(context.Context, int) error {
	// A running frontend accepts requests once its engines are up; the warm-up
	// absorbs the first second of a frontend still taking our engines' handshakes.
	return nil
}
func (s *targetSystem) connect(ctx context.Context, sk sink) (conn, error) {
	t := s.cfg.Target
	switch {
	case strings.HasPrefix(t, "http://"), strings.HasPrefix(t, "https://"):
		return newHTTPConn(t, s.cfg, sk, true), nil
	case strings.HasPrefix(t, "tcp://"), strings.HasPrefix(t, "ipc://"):
		return dialZMQ(ctx, transport.ZMQ, t, sk, wire.Native())
	}
	return nil, &ConfigError{Field: "target", Msg: fmt.Sprintf("%q: want http://, tcp:// or ipc://", t)}
}
func (s *targetSystem) close() error { return nil }

// startSystem starts the switchyard side of a phase.
func startSystem(ctx context.Context, cfg Config) (system, error) {
	if cfg.Mode == ModeTarget {
		return startTargetSystem(ctx, cfg)
	}
	return startEmbedded(ctx, cfg)
}
