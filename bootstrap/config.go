package bootstrap

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a [Server]. Start from [DefaultConfig]; [Config.Validate]
// names the field at fault.
type Config struct {
	// Address is the HOST:PORT the Server listens on. Port 0 picks a free port
	// (see Server.Listen). A non-loopback host is allowed but logged, since
	// /register is unauthenticated (vLLM cannot send credentials).
	Address string
	// Token, when non-empty, is the bearer token required by mutating admin
	// endpoints (DELETE, drain, undrain). /register stays open because the
	// vLLM client cannot send a token.
	Token string
	// SnapshotPath, when non-empty, is a JSON file rewritten atomically on
	// every change and loaded on start, so a registry restart does not lose
	// entries that vLLM will never re-register.
	SnapshotPath string
	// ProbeInterval is the period of the background liveness sweep.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one TCP connect to a worker's ZeroMQ port.
	ProbeTimeout time.Duration
	// ConflictProbeBudget bounds the synchronous probe of an old holder made
	// while a conflicting /register waits; it must stay well inside the vLLM
	// client's 30 s timeout.
	ConflictProbeBudget time.Duration
	// FailureThreshold is the number of consecutive failed periodic probes
	// after which a worker is dead.
	FailureThreshold int
	// Retention keeps dead and retired engines visible in /v2 before they are
	// forgotten.
	Retention time.Duration
	// Settle is how long an engine whose topology is not known must go
	// without a new worker before it is published: decodes cache
	// len(worker_addr) as the remote TP size forever, so a half-registered
	// engine must not leak into /query. 0 publishes as soon as the ranks look
	// contiguous.
	Settle time.Duration
	// TPSize and PPSize, when positive, are the expected topology of every
	// engine. Then an engine is published only when all TPSize x PPSize
	// workers are present, and ranks outside are rejected. 0 = learn it (from
	// tp_size/pp_size in the payload if the client sends them, else from the
	// ranks seen plus Settle).
	TPSize, PPSize int
	// Logger receives takeovers, conflicts and probe transitions; nil
	// discards.
	Logger *slog.Logger
	// Registerer receives the switchyard_registry_* metrics; nil registers
	// nothing. If it is also a prometheus.Gatherer (a *prometheus.Registry),
	// Server.Handler serves it on /metrics too.
	Registerer prometheus.Registerer
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	return Config{
		Address:             "127.0.0.1:8998",
		ProbeInterval:       5 * time.Second,
		ProbeTimeout:        500 * time.Millisecond,
		ConflictProbeBudget: 2 * time.Second,
		FailureThreshold:    3,
		Retention:           10 * time.Minute,
		Settle:              3 * time.Second,
	}
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Address); err != nil {
		return fmt.Errorf("bootstrap: Config.Address %q: %w", c.Address, err)
	}
	switch {
	case c.ProbeInterval <= 0:
		return fmt.Errorf("bootstrap: Config.ProbeInterval must be positive, got %v", c.ProbeInterval)
	case c.ProbeTimeout <= 0:
		return fmt.Errorf("bootstrap: Config.ProbeTimeout must be positive, got %v", c.ProbeTimeout)
	case c.ConflictProbeBudget < c.ProbeTimeout:
		return fmt.Errorf("bootstrap: Config.ConflictProbeBudget (%v) must be at least ProbeTimeout (%v)", c.ConflictProbeBudget, c.ProbeTimeout)
	case c.ConflictProbeBudget > 20*time.Second:
		// The vLLM client times out after 30 s and treats a timeout as a
		// retry, and the retry would face the same conflict.
		return fmt.Errorf("bootstrap: Config.ConflictProbeBudget must be at most 20s, got %v", c.ConflictProbeBudget)
	case c.FailureThreshold < 1:
		return fmt.Errorf("bootstrap: Config.FailureThreshold must be at least 1, got %d", c.FailureThreshold)
	case c.Retention < 0:
		return fmt.Errorf("bootstrap: Config.Retention must not be negative, got %v", c.Retention)
	case c.Settle < 0:
		return fmt.Errorf("bootstrap: Config.Settle must not be negative, got %v", c.Settle)
	case c.TPSize < 0:
		return fmt.Errorf("bootstrap: Config.TPSize must not be negative, got %d", c.TPSize)
	case c.PPSize < 0:
		return fmt.Errorf("bootstrap: Config.PPSize must not be negative, got %d", c.PPSize)
	}
	return nil
}

// Policy returns the part of the Config the pure [Registry] needs.
func (c Config) Policy() Policy {
	return Policy{
		FailureThreshold: c.FailureThreshold,
		Retention:        c.Retention,
		Settle:           c.Settle,
		TPSize:           c.TPSize,
		PPSize:           c.PPSize,
	}
}

// Policy holds the rules of a [Registry]; see the Config fields of the same
// names.
type Policy struct {
	FailureThreshold int
	Retention        time.Duration
	Settle           time.Duration
	TPSize, PPSize   int
}
