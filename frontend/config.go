package frontend

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// Config configures a Frontend. Start from DefaultConfig.
type Config struct {
	// HandshakeAddress is where engines send HELLO/READY in handshake-owner mode:
	// tcp://HOST:PORT (port 0 picks a free port; see HandshakeAddress()).
	HandshakeAddress string
	// EngineTransport is "ipc" (socket files under IPCDir) or "tcp" (BindHost, port
	// 0) for the per-engine input and output sockets handed out in INIT.
	EngineTransport string
	// IPCDir holds the ipc socket files; empty = a fresh temp dir, removed on Close.
	IPCDir string
	// BindHost is the host the per-engine tcp sockets bind and advertise in INIT,
	// so it must be an address engines can connect to: a wildcard (0.0.0.0, ::, *)
	// is refused.
	BindHost string
	// DataParallelSize is the number of ranks expected (0..N-1); a HELLO from a rank
	// outside is refused.
	DataParallelSize int
	// Bootstrapped selects bootstrapped mode (a launcher did the handshake); nil =
	// handshake-owner mode.
	Bootstrapped *BootstrappedConfig
	// CoordinatorInput/CoordinatorOutput are put into INIT when set (a coordinator
	// binds them elsewhere).
	CoordinatorInput, CoordinatorOutput string
	// SendQueue is the number of ADDs queued per engine. A Send into a full
	// queue waits for room (fair share per client) for up to SendWait; other
	// messages have a small reserve above it and never wait.
	SendQueue int
	// SendWait bounds how long an ADD waits for room in a full send queue
	// before it fails with *QueueFullError (the caller's context may end it
	// sooner).
	SendWait time.Duration
	// StuckAfter: a socket write pending longer marks the engine Stuck and fails its
	// requests.
	StuckAfter time.Duration
	// PhaseTimeout bounds each handshake phase after HELLO (registration, READY).
	// Real engines load the model between INIT and registration, so this must cover
	// model loading (vLLM's frontend waits up to 600 s for a registration).
	PhaseTimeout time.Duration
	// MaxFrameSize refuses larger frames from engines (the engine is then dead).
	MaxFrameSize int
	// MaxMessageSize refuses larger messages (all frames together) from engines;
	// 0 = transport's default, 1 GiB.
	MaxMessageSize int
	// Logger receives lifecycle events; nil = discard.
	Logger *slog.Logger
	// Registerer receives the frontend's metrics; nil = not registered.
	Registerer prometheus.Registerer
	// Network opens sockets; nil = transport.ZMQ. Tests pass memtransport.
	Network transport.Network
	// Layouts places each engine on a vLLM wire layout at its handshake (see
	// wire.LayoutSet); nil = the built-in layouts, nothing forced.
	Layouts *wire.LayoutSet
	// ClientIndex is this frontend's client index: the probes that tell older vLLM
	// releases apart are UTILITY calls, answered on this client's output socket.
	ClientIndex int64
}

// BootstrappedConfig: a launcher gave the engines these addresses; we bind them and
// wait for the registrations of ranks StartRank .. StartRank+Count-1.
type BootstrappedConfig struct {
	InputAddress, OutputAddress string
	StartRank, Count            int
	// Registrations, when set, saves every engine's registration and
	// replays it for an engine that reconnects without one (a frontend
	// restarted under running engines; see RegistrationStore).
	Registrations RegistrationStore
}

// DefaultConfig returns the defaults: ipc engine sockets in a temp dir, one rank,
// 1024 queued messages per engine, stuck after 10 s, 10 min per handshake phase,
// 256 MiB frames.
func DefaultConfig() Config {
	return Config{
		HandshakeAddress: "tcp://127.0.0.1:0",
		EngineTransport:  "ipc",
		BindHost:         "127.0.0.1",
		DataParallelSize: 1,
		SendQueue:        1024,
		SendWait:         30 * time.Second,
		StuckAfter:       10 * time.Second,
		PhaseTimeout:     10 * time.Minute,
		MaxFrameSize:     256 << 20,
	}
}

// Validate names the first field at fault.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, fmt.Errorf("frontend: config %s: %s", field, msg)) }
	if c.DataParallelSize < 1 || c.DataParallelSize > 65536 {
		bad("DataParallelSize", fmt.Sprintf("%d out of range [1, 65536]", c.DataParallelSize))
	}
	if c.SendQueue < 1 {
		bad("SendQueue", "must be positive")
	}
	if c.SendWait <= 0 {
		bad("SendWait", "must be positive")
	}
	if c.StuckAfter <= 0 {
		bad("StuckAfter", "must be positive")
	}
	if c.PhaseTimeout <= 0 {
		bad("PhaseTimeout", "must be positive")
	}
	if c.MaxFrameSize < 0 {
		bad("MaxFrameSize", "must not be negative")
	}
	if c.MaxMessageSize < 0 {
		bad("MaxMessageSize", "must not be negative")
	}
	if b := c.Bootstrapped; b != nil {
		if b.InputAddress == "" || b.OutputAddress == "" {
			bad("Bootstrapped", "InputAddress and OutputAddress are required")
		}
		if b.Count < 1 || b.StartRank < 0 || b.StartRank+b.Count > 65536 {
			bad("Bootstrapped", fmt.Sprintf("rank range [%d, %d) invalid", b.StartRank, b.StartRank+b.Count))
		} else if b.StartRank+b.Count > c.DataParallelSize {
			bad("Bootstrapped", fmt.Sprintf("connected engine range [%d, %d) exceeds data parallel size (%d)", b.StartRank, b.StartRank+b.Count, c.DataParallelSize))
		}
		return errors.Join(errs...)
	}
	if !strings.HasPrefix(c.HandshakeAddress, "tcp://") && !strings.HasPrefix(c.HandshakeAddress, "ipc://") {
		bad("HandshakeAddress", fmt.Sprintf("%q: want tcp://HOST:PORT", c.HandshakeAddress))
	}
	switch c.EngineTransport {
	case "ipc", "":
	case "tcp":
		if c.BindHost == "" {
			bad("BindHost", "required for tcp engine sockets")
		} else if isWildcard(c.BindHost) {
			bad("BindHost", fmt.Sprintf("%q is a wildcard, not an address: INIT hands it to engines as the address of their input and output sockets, and they cannot connect to it; use this host's address reachable from the engines (--engine-bind-host)", c.BindHost))
		}
	default:
		bad("EngineTransport", fmt.Sprintf("%q: want ipc or tcp", c.EngineTransport))
	}
	return errors.Join(errs...)
}

// isWildcard reports whether host binds every interface (0.0.0.0, ::, ZeroMQ's *).
func isWildcard(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "*" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
