package coordinator

import (
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/transport"
)

// Config configures the in-process coordinator ([Node]) and its state machine.
// Start from [DefaultConfig]; [Config.Validate] names the field at fault.
type Config struct {
	// InputAddress is the engine-facing back XPUB ("coordinator_input" in
	// INIT) that engines' XSUB connect to: READY and START_DP_WAVE go out
	// here. tcp://127.0.0.1:0 picks a free port; read the bound address back
	// with Node.InputAddress.
	InputAddress string
	// OutputAddress is the engine-facing PULL ("coordinator_output" in INIT)
	// that receives the engines' stats, wave_complete and start_wave.
	OutputAddress string
	// PublishAddress is the front XPUB other API servers' XSUB connect to
	// (vLLM's stats publish address); "" disables it, which is right when
	// switchyard is the only frontend: our own dispatcher gets load directly.
	PublishAddress string
	// Engines is the number of data-parallel ranks (0..Engines-1).
	Engines int
	// EnableWaves turns on the wave protocol (--enable-wave-coordination):
	// needed when the engines are MoE data-parallel ranks that must step in
	// lockstep. Load stats are collected either way.
	EnableWaves bool
	// PublishInterval is the minimum gap between two load publishes on the
	// front XPUB while stats keep changing (vLLM: 100 ms).
	PublishInterval time.Duration
	// HeartbeatInterval is the gap between publishes when nothing changed, so
	// a frontend that joins late learns the state (vLLM: 5 s).
	HeartbeatInterval time.Duration
	// ReadyResend is the period at which READY is re-sent on the back XPUB
	// until every engine has been reported ready: go-zeromq's XPUB hides
	// subscriptions from us, so we cannot send READY exactly once after the
	// last subscription as vLLM does. Engines ignore extra READY frames.
	ReadyResend time.Duration
	// Logger receives protocol anomalies and wave transitions (debug); nil
	// discards.
	Logger *slog.Logger
	// Registerer receives the switchyard_coordinator_* metrics; nil registers
	// nothing.
	Registerer prometheus.Registerer
	// Network opens the sockets; nil means transport.ZMQ.
	Network transport.Network
}

// DefaultConfig returns a Config for one engine on loopback TCP with free
// ports, waves off, and vLLM's publish cadence.
func DefaultConfig() Config {
	return Config{
		InputAddress:      "tcp://127.0.0.1:0",
		OutputAddress:     "tcp://127.0.0.1:0",
		Engines:           1,
		PublishInterval:   100 * time.Millisecond,
		HeartbeatInterval: 5 * time.Second,
		ReadyResend:       100 * time.Millisecond,
	}
}

// Validate reports the first field that cannot work.
func (c Config) Validate() error {
	if err := checkEndpoint("InputAddress", c.InputAddress); err != nil {
		return err
	}
	if err := checkEndpoint("OutputAddress", c.OutputAddress); err != nil {
		return err
	}
	if c.PublishAddress != "" {
		if err := checkEndpoint("PublishAddress", c.PublishAddress); err != nil {
			return err
		}
	}
	if c.Engines < 1 || c.Engines > 1<<16 {
		return &ConfigError{"Engines", "must be in [1, 65536]"}
	}
	if c.PublishInterval <= 0 {
		return &ConfigError{"PublishInterval", "must be positive"}
	}
	if c.HeartbeatInterval < c.PublishInterval {
		return &ConfigError{"HeartbeatInterval", "must be at least PublishInterval"}
	}
	if c.ReadyResend <= 0 {
		return &ConfigError{"ReadyResend", "must be positive"}
	}
	return nil
}

// ExternalConfig configures [External], the client of vLLM's own Python
// coordinator.
type ExternalConfig struct {
	// StatsAddress is the coordinator's front publish address
	// (frontend_stats_publish_address in INIT, or dp_stats_address in the
	// engines' registration).
	StatsAddress string
	// EnableWaves makes OnAdd send FIRST_REQ while the coordinator reports the
	// engines paused; off for non-MoE deployments, whose coordinator never
	// reports them running.
	EnableWaves bool
	// IgnoreCounts stops the publishes' per-engine counts from reaching the
	// LoadSink (route on main-path stats only, as vLLM's Rust client does).
	IgnoreCounts bool
	// DialTimeout bounds Start's connection to StatsAddress.
	DialTimeout time.Duration
	// Logger: nil discards.
	Logger *slog.Logger
	// Registerer receives the wave gauges; nil registers nothing.
	Registerer prometheus.Registerer
	// Network opens the socket; nil means transport.ZMQ.
	Network transport.Network
}

// DefaultExternalConfig returns an ExternalConfig with waves on (vLLM's
// frontends always send FIRST_REQ when they believe the engines paused).
func DefaultExternalConfig() ExternalConfig {
	return ExternalConfig{EnableWaves: true, DialTimeout: 10 * time.Second}
}

// Validate reports the first field that cannot work.
func (c ExternalConfig) Validate() error {
	if err := checkEndpoint("StatsAddress", c.StatsAddress); err != nil {
		return err
	}
	if c.DialTimeout <= 0 {
		return &ConfigError{"DialTimeout", "must be positive"}
	}
	return nil
}

func checkEndpoint(field, ep string) error {
	switch {
	case ep == "":
		return &ConfigError{field, "empty endpoint"}
	case strings.HasPrefix(ep, "tcp://") && len(ep) > len("tcp://"),
		strings.HasPrefix(ep, "ipc://") && len(ep) > len("ipc://"),
		strings.HasPrefix(ep, "inproc://") && len(ep) > len("inproc://"):
		return nil
	}
	return &ConfigError{field, "endpoint " + ep + " is not tcp://, ipc:// or inproc://"}
}
