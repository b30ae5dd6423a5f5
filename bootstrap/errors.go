package bootstrap

import (
	"errors"
	"fmt"
)

// Sentinel errors of the admin operations.
var (
	// ErrNotFound: no current engine or worker matches.
	ErrNotFound = errors.New("bootstrap: not found")
	// ErrUnauthorized: a mutating admin request lacked the bearer token.
	ErrUnauthorized = errors.New("bootstrap: unauthorized")
)

// ConflictKind says which vLLM rule a [ConflictError] reproduces.
type ConflictKind int

const (
	// EngineMismatch: another engine id holds the dp rank.
	EngineMismatch ConflictKind = iota + 1
	// WorkerConflict: the (dp, tp, pp) slot holds another address.
	WorkerConflict
	// EngineElsewhere: the engine id is already current on another dp rank.
	// vLLM's registry does not check this; it would silently let decodes
	// cache one of the two worker maps.
	EngineElsewhere
)

// ConflictError is a registration that collides with a holder that was not
// known to be dead. The HTTP edge probes Probe synchronously, records the
// results and retries once; if the conflict remains, it answers 400 with
// Detail() as "detail", byte for byte what vLLM's registry says.
type ConflictError struct {
	Kind       ConflictKind
	DP, TP, PP int
	// Old and New are engine ids (EngineMismatch, EngineElsewhere) or worker
	// addresses (WorkerConflict).
	Old, New string
	// Holder is the engine id that holds the slot, and HolderDP its dp rank.
	Holder   string
	HolderDP int
	// Probe lists the holder's workers to probe before giving up.
	Probe []ProbeTarget
	// Unconfirmed is set by the HTTP edge when the holder named here was not
	// seen alive by a probe made for this registration: it took the slot
	// while the registration was deciding (concurrent registrations for one
	// dp rank) and ConflictProbeBudget ran out before it could be probed.
	Unconfirmed bool
}

func (e *ConflictError) Error() string { return "bootstrap: " + e.Detail() }

// Detail is the exact vLLM error text.
func (e *ConflictError) Detail() string {
	switch e.Kind {
	case EngineMismatch:
		return fmt.Sprintf("Engine ID mismatch for dp_rank=%d: expected %s, got %s", e.DP, e.Old, e.New)
	case WorkerConflict:
		return fmt.Sprintf("Worker with dp_rank=%d, tp_rank=%d, pp_rank=%d is already registered at %s, but still want to register at %s", e.DP, e.TP, e.PP, e.Old, e.New)
	default:
		return fmt.Sprintf("Engine ID %s is already registered for dp_rank=%d, cannot register it for dp_rank=%d", e.New, e.HolderDP, e.DP)
	}
}

// Hint says what the operator should do; it travels in the log and in an
// extra "hint" field beside "detail" that vLLM ignores.
func (e *ConflictError) Hint() string {
	if e.Unconfirmed {
		return fmt.Sprintf("engine %s took dp_rank=%d while this registration was being decided (concurrent registrations for one dp rank) and could not be probed within the conflict budget; "+
			"if it is gone, DELETE /v2/engines/%s and restart this engine, and give concurrent deployments distinct dp ranks or registries", e.Holder, e.HolderDP, e.Holder)
	}
	switch e.Kind {
	case EngineMismatch:
		return fmt.Sprintf("engine %s still answers on its workers' ports, so two live deployments use dp_rank=%d of this registry: give each deployment its own registry (bootstrap_server_address) or distinct data-parallel ranks, or stop the old engine, or DELETE /v2/engines/%s", e.Old, e.DP, e.Old)
	case WorkerConflict:
		return fmt.Sprintf("the old worker at %s still accepts connections: if the engine id %s is pinned in kv_transfer_config, two processes share it; do not pin prefill engine ids, or stop the old process, or DELETE /v2/engines/%s/workers/%d/%d", e.Old, e.Holder, e.Holder, e.TP, e.PP)
	default:
		return fmt.Sprintf("engine %s is live on dp_rank=%d: engine ids must be unique per dp rank; DELETE /v2/engines/%s if the old one is gone", e.New, e.HolderDP, e.New)
	}
}

// TopologyError is a registration outside the known topology; Detail is the
// text of vLLM's topology-gated registry branch.
type TopologyError struct{ detail string }

func (e *TopologyError) Error() string { return "bootstrap: " + e.detail }

// Detail is the vLLM-style error text.
func (e *TopologyError) Detail() string { return e.detail }

// InvalidError is a malformed /register body, answered with 422 in the shape
// FastAPI uses for validation errors.
type InvalidError struct {
	Type  string // pydantic error type: "missing", "int_parsing", ...
	Field string // "" for the body as a whole
	Msg   string
}

func (e *InvalidError) Error() string {
	if e.Field == "" {
		return "bootstrap: invalid body: " + e.Msg
	}
	return fmt.Sprintf("bootstrap: invalid %s: %s", e.Field, e.Msg)
}

// LimitError is a registration refused because the registry is full or the
// claimed topology is beyond its bounds (Config.MaxEngines,
// MaxWorkersPerEngine, MaxWorkers). It is answered with 400: the condition
// does not pass by waiting, and vLLM treats any 400 as fatal anyway.
type LimitError struct{ detail string }

func (e *LimitError) Error() string { return "bootstrap: " + e.detail }

// Detail is the text of the 400's "detail".
func (e *LimitError) Detail() string { return e.detail }
