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
	// AdminNetworks are the CIDRs from which the /v2 admin API (reads and
	// mutations) is served; others get 403. Empty means loopback only, so an
	// operator has to opt in before anyone else can drain or delete. A
	// non-loopback network requires Token.
	AdminNetworks []string
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
	// MaxEngines bounds the dp ranks the registry holds (current engines);
	// a registration for a new dp rank beyond it is refused with 400.
	MaxEngines int
	// MaxWorkersPerEngine bounds tp_size, pp_size, tp_size x pp_size, the
	// ranks and the workers of one engine: the /v2 view lists every missing
	// slot, so an unbounded topology claimed by one request could exhaust
	// memory.
	MaxWorkersPerEngine int
	// MaxWorkers bounds the workers held in total, current and retired
	// (retired engines are kept for Retention); the oldest retired engines
	// are forgotten first to make room, then registrations are refused.
	MaxWorkers int
	// MaxResponseBytes bounds one /v2/engines page; the answer says where
	// the next page starts (?offset=) when more engines remain.
	MaxResponseBytes int
	// SnapshotCompactBytes: the change log next to SnapshotPath is folded
	// into the snapshot file once it is larger than this and than the
	// snapshot itself, so every change costs one small append instead of a
	// rewrite of the whole registry.
	SnapshotCompactBytes int64
	// Store, when set, holds the registry's state instead of this process
	// (an etcd cluster shared by several frontends, see [EtcdStore]): every
	// change is committed there before it is answered, and changes other
	// frontends commit are applied as they happen. Exclusive with
	// SnapshotPath.
	Store Store
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
		Address:              "127.0.0.1:8998",
		ProbeInterval:        5 * time.Second,
		ProbeTimeout:         500 * time.Millisecond,
		ConflictProbeBudget:  2 * time.Second,
		FailureThreshold:     3,
		Retention:            10 * time.Minute,
		Settle:               3 * time.Second,
		MaxEngines:           1024,
		MaxWorkersPerEngine:  1024,
		MaxWorkers:           16384,
		MaxResponseBytes:     8 << 20,
		SnapshotCompactBytes: 1 << 20,
	}
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Address); err != nil {
		return fmt.Errorf("bootstrap: Config.Address %q: %w", c.Address, err)
	}
	switch {
	case c.Store != nil && c.SnapshotPath != "":
		return fmt.Errorf("bootstrap: Config.Store and Config.SnapshotPath are exclusive: the store already keeps the state across restarts")
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
	case c.MaxEngines < 1:
		return fmt.Errorf("bootstrap: Config.MaxEngines must be at least 1, got %d", c.MaxEngines)
	case c.MaxWorkersPerEngine < 1:
		return fmt.Errorf("bootstrap: Config.MaxWorkersPerEngine must be at least 1, got %d", c.MaxWorkersPerEngine)
	case c.MaxWorkers < c.MaxWorkersPerEngine:
		return fmt.Errorf("bootstrap: Config.MaxWorkers (%d) must be at least MaxWorkersPerEngine (%d)", c.MaxWorkers, c.MaxWorkersPerEngine)
	case max(c.TPSize, 1)*max(c.PPSize, 1) > c.MaxWorkersPerEngine:
		return fmt.Errorf("bootstrap: Config.TPSize x PPSize (%d) exceeds MaxWorkersPerEngine (%d)", max(c.TPSize, 1)*max(c.PPSize, 1), c.MaxWorkersPerEngine)
	case c.MaxResponseBytes < 64<<10:
		return fmt.Errorf("bootstrap: Config.MaxResponseBytes must be at least 64 KiB (one engine of MaxWorkersPerEngine must fit), got %d", c.MaxResponseBytes)
	case c.SnapshotCompactBytes < 1:
		return fmt.Errorf("bootstrap: Config.SnapshotCompactBytes must be positive, got %d", c.SnapshotCompactBytes)
	}
	if _, err := c.adminNets(); err != nil {
		return err
	}
	return nil
}

// adminNets parses AdminNetworks (loopback when empty) and refuses a
// non-loopback network without a Token: the mutations would be open to it.
func (c Config) adminNets() ([]*net.IPNet, error) {
	return ParseAdminNetworks("bootstrap: Config.AdminNetworks", c.AdminNetworks, c.Token)
}

// Policy returns the part of the Config the pure [Registry] needs.
func (c Config) Policy() Policy {
	return Policy{
		FailureThreshold:    c.FailureThreshold,
		Retention:           c.Retention,
		Settle:              c.Settle,
		TPSize:              c.TPSize,
		PPSize:              c.PPSize,
		MaxEngines:          c.MaxEngines,
		MaxWorkersPerEngine: c.MaxWorkersPerEngine,
		MaxWorkers:          c.MaxWorkers,
	}
}

// Policy holds the rules of a [Registry]; see the Config fields of the same
// names.
type Policy struct {
	FailureThreshold int
	Retention        time.Duration
	Settle           time.Duration
	TPSize, PPSize   int
	// Zero limits mean the DefaultConfig values (see NewRegistry).
	MaxEngines, MaxWorkersPerEngine, MaxWorkers int
}
