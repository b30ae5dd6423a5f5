package server

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"
)

// Config is everything `switchyard serve` wires. Start from DefaultConfig.
type Config struct {
	// HandshakeAddress is the tcp://HOST:PORT engines send HELLO/READY to. Empty
	// starts MockEngines built-in mock engine cores instead (the embedded default).
	HandshakeAddress string
	// DataParallelSize is the number of engine ranks expected on HandshakeAddress.
	DataParallelSize int
	// MockEngines is the number of built-in mock engines when HandshakeAddress is
	// empty.
	MockEngines int
	// EngineTransport is "ipc" or "tcp" for the engine input/output sockets.
	EngineTransport string
	// EngineBindHost is the host the tcp engine sockets bind and advertise in INIT;
	// engines on other hosts must be able to reach it.
	EngineBindHost string
	// MockStep and MockTokensPerStep shape the built-in mock engines.
	MockStep          time.Duration
	MockTokensPerStep int

	// HTTPAddress is the HOST:PORT of the HTTP API (port 0 picks one).
	HTTPAddress string
	// ClientAddress is the ZeroMQ ROUTER endpoint of the msgpack client protocol;
	// empty disables it.
	ClientAddress string
	// ClientTimeout: see ClientConfig.Timeout.
	ClientTimeout time.Duration

	// EOSTokenID is sent as _eos_token_id; unset sends ignore_eos instead.
	EOSTokenID wire.OptInt
	// LBPolicy is dispatcher.PolicyLeastLoaded, PolicyPowerOfTwo or PolicyRoundRobin.
	LBPolicy string
	// EnableWaves runs the DP wave protocol (MoE data parallel).
	EnableWaves bool
	// CoordinatorPublishAddress is where the coordinator publishes to other
	// frontends; empty = off.
	CoordinatorPublishAddress string
	// BootstrapAddress is the HOST:PORT of the embedded bootstrap registry; empty =
	// off.
	BootstrapAddress string

	// ShutdownTimeout bounds how long in-flight requests may run after shutdown
	// begins before they are aborted.
	ShutdownTimeout time.Duration
	// ReadyTimeout bounds Start's wait for the built-in mock engines' handshakes.
	// Real engines are not waited for: they may take minutes to load a model.
	ReadyTimeout time.Duration

	// Logger: nil discards.
	Logger *slog.Logger
	// Registry receives every component's metrics and is served on /metrics; nil
	// makes a fresh one.
	Registry *prometheus.Registry
}

// DefaultConfig returns the defaults of `switchyard serve`.
func DefaultConfig() Config {
	return Config{
		DataParallelSize:  1,
		MockEngines:       2,
		EngineTransport:   "ipc",
		EngineBindHost:    "127.0.0.1",
		MockStep:          5 * time.Millisecond,
		MockTokensPerStep: 1,
		HTTPAddress:       "127.0.0.1:8000",
		ClientAddress:     "tcp://127.0.0.1:5570",
		LBPolicy:          dispatcher.PolicyLeastLoaded,
		ShutdownTimeout:   30 * time.Second,
		ReadyTimeout:      30 * time.Second,
	}
}

// SomeEOS is a set EOS token id.
func SomeEOS(id int64) wire.OptInt { return wire.SomeInt(id) }

// Embedded reports whether Start runs built-in mock engines.
func (c Config) Embedded() bool { return c.HandshakeAddress == "" }

// Ranks is the number of engine ranks expected.
func (c Config) Ranks() int {
	if c.Embedded() {
		return c.MockEngines
	}
	return c.DataParallelSize
}

// Validate names the first flag at fault, in the flag's own words.
func (c Config) Validate() error {
	bad := func(flag, format string, args ...any) error {
		return fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...))
	}
	if !c.Embedded() {
		if !strings.HasPrefix(c.HandshakeAddress, "tcp://") && !strings.HasPrefix(c.HandshakeAddress, "ipc://") {
			return bad("handshake-address", "%q: want tcp://HOST:PORT", c.HandshakeAddress)
		}
		if c.DataParallelSize < 1 || c.DataParallelSize > 65536 {
			return bad("data-parallel-size", "must be in [1, 65536], got %d", c.DataParallelSize)
		}
	} else if c.MockEngines < 1 || c.MockEngines > 256 {
		return bad("mock-engines", "must be in [1, 256] when --handshake-address is empty, got %d", c.MockEngines)
	}
	if c.EngineTransport != "ipc" && c.EngineTransport != "tcp" {
		return bad("engine-transport", "want ipc or tcp, got %q", c.EngineTransport)
	}
	if c.EngineTransport == "tcp" && c.EngineBindHost == "" {
		return bad("engine-bind-host", "required with --engine-transport tcp")
	}
	if c.MockStep <= 0 {
		return bad("step-ms", "must be positive")
	}
	if c.MockTokensPerStep < 1 {
		return bad("tokens-per-step", "must be at least 1, got %d", c.MockTokensPerStep)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddress); err != nil {
		return bad("http-address", "%q: want HOST:PORT", c.HTTPAddress)
	}
	if c.ClientAddress != "" && !strings.HasPrefix(c.ClientAddress, "tcp://") && !strings.HasPrefix(c.ClientAddress, "ipc://") {
		return bad("client-address", "%q: want tcp://HOST:PORT or ipc://PATH", c.ClientAddress)
	}
	if c.ClientTimeout < 0 {
		return bad("client-timeout", "must not be negative")
	}
	if c.EOSTokenID.Valid && c.EOSTokenID.Value < 0 {
		return bad("eos-token-id", "must not be negative")
	}
	switch c.LBPolicy {
	case dispatcher.PolicyLeastLoaded, dispatcher.PolicyPowerOfTwo, dispatcher.PolicyRoundRobin:
	default:
		return bad("lb-policy", "want least-loaded, power-of-two or round-robin, got %q", c.LBPolicy)
	}
	if c.CoordinatorPublishAddress != "" && !strings.HasPrefix(c.CoordinatorPublishAddress, "tcp://") {
		return bad("coordinator-publish-address", "%q: want tcp://HOST:PORT", c.CoordinatorPublishAddress)
	}
	if c.BootstrapAddress != "" {
		if _, _, err := net.SplitHostPort(c.BootstrapAddress); err != nil {
			return bad("bootstrap-address", "%q: want HOST:PORT", c.BootstrapAddress)
		}
	}
	if c.ShutdownTimeout < 0 {
		return bad("shutdown-timeout", "must not be negative")
	}
	return nil
}
