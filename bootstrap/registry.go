package bootstrap

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Registration is one POST /register, already decoded.
type Registration struct {
	EngineID   string
	DP, TP, PP int
	// Addr is the worker's ZeroMQ listener, "tcp://host:port".
	Addr string
	// TPSize and PPSize are sent by some newer clients; 0 = not sent, and a
	// negative value (sent but not positive) is refused.
	TPSize, PPSize int
	// Source is the remote IP of the request, kept for inspection.
	Source string
}

// Result is how a registration was accepted.
type Result int

const (
	// Registered: a new worker was stored.
	Registered Result = iota + 1
	// Idempotent: the same worker at the same address was already stored
	// (the vLLM client retries after a read timeout).
	Idempotent
	// EngineTakeover: a new engine id replaced a dead engine on its dp rank.
	EngineTakeover
	// WorkerTakeover: a new address replaced a dead worker in its slot.
	WorkerTakeover
)

func (r Result) String() string {
	switch r {
	case Registered:
		return "ok"
	case Idempotent:
		return "idempotent"
	case EngineTakeover:
		return "engine_takeover"
	case WorkerTakeover:
		return "worker_takeover"
	}
	return "unknown"
}

// Outcome describes an accepted registration.
type Outcome struct {
	Result Result
	// Generation of the dp rank after the registration.
	Generation uint64
	// Replaced is the old engine id (EngineTakeover) or address
	// (WorkerTakeover), and ReplacedGeneration its generation.
	Replaced           string
	ReplacedGeneration uint64
}

type workerKey struct{ tp, pp int }

type worker struct {
	addr, dial   string
	source       string
	registeredAt time.Time
	state        WorkerState // unverified, live or dead; suspect is derived
	failures     int         // consecutive failed probes
	lastProbe    time.Time
	lastOK       time.Time
}

// engine is one incarnation of a vLLM DP engine (one engine id).
type engine struct {
	id      string
	dp      int
	gen     uint64
	tpSize  int
	ppSize  int
	sizeSrc string // "config", "client" or "learned"; "" = unknown
	workers map[workerKey]*worker

	created      time.Time
	lastRegister time.Time
	draining     bool
	deadSince    time.Time // zero unless the engine is dead
	retiredAt    time.Time // zero while the engine is current
	retiredWhy   string
}

// slot is one dp rank: its generation counter, current engine and the
// retired engines kept for inspection.
type slot struct {
	dp   int
	gen  uint64
	cur  *engine
	past []*engine
}

// Registry is the registry state: engines per dp rank, workers per (tp, pp),
// generations and liveness. It is pure: no goroutines, no IO, and time comes
// in as an argument. It is not safe for concurrent use; the [Server] owns it
// behind one mutex.
type Registry struct {
	pol   Policy
	slots map[int]*slot
	rev   uint64
	dirty map[int]struct{} // dp ranks changed since takeChanges
}

// NewRegistry returns an empty registry applying pol. A zero
// FailureThreshold is treated as 1.
func NewRegistry(pol Policy) *Registry {
	if pol.FailureThreshold < 1 {
		pol.FailureThreshold = 1
	}
	return &Registry{pol: withDefaultLimits(pol), slots: make(map[int]*slot), dirty: make(map[int]struct{})}
}

// markDirty records a change worth persisting to dp rank dp.
func (r *Registry) markDirty(dp int) {
	r.rev++
	r.dirty[dp] = struct{}{}
}

// Revision increases on every change worth persisting (workers added,
// replaced, deleted, drained, forgotten); the snapshot writer skips a write
// when it has not moved.
func (r *Registry) Revision() uint64 { return r.rev }

// Register applies one /register. It returns an *InvalidError or
// *TopologyError for a bad request (nothing is changed), and a
// *ConflictError when the slot is held by an engine or worker not known to be
// dead: the caller probes ConflictError.Probe, feeds the results to
// RecordProbes with Sync set, and calls Register once more.
func (r *Registry) Register(now time.Time, reg Registration) (Outcome, error) {
	dial, err := r.validate(reg)
	if err != nil {
		return Outcome{}, err
	}
	// Decide everything before changing anything, so a refused
	// registration leaves no trace.
	elsewhere, err := r.engineElsewhere(reg)
	if err != nil {
		return Outcome{}, err
	}
	s := r.slots[reg.DP]
	key := workerKey{reg.TP, reg.PP}
	out := Outcome{Result: Registered}
	adds := true // false when the worker replaces one in its slot
	if s != nil && s.cur != nil {
		e := s.cur
		switch w := e.workers[key]; {
		case e.id != reg.EngineID:
			if !r.holderDead(e, reg.Addr) {
				return Outcome{}, &ConflictError{
					Kind: EngineMismatch, DP: reg.DP, TP: reg.TP, PP: reg.PP,
					Old: e.id, New: reg.EngineID, Holder: e.id, HolderDP: e.dp,
					Probe: targets(e),
				}
			}
			out = Outcome{Result: EngineTakeover, Replaced: e.id, ReplacedGeneration: e.gen}
		case w != nil && w.addr == reg.Addr:
			// The client retried after a read timeout, or the worker came
			// back at the same address: vLLM binds before it registers, so
			// the address is live right now.
			w.state, w.failures, w.lastOK = workerLive, 0, now
			r.updateDead(now, e)
			return Outcome{Result: Idempotent, Generation: e.gen}, nil
		case w != nil && w.state != workerDead:
			return Outcome{}, &ConflictError{
				Kind: WorkerConflict, DP: reg.DP, TP: reg.TP, PP: reg.PP,
				Old: w.addr, New: reg.Addr, Holder: e.id, HolderDP: e.dp,
				Probe: targets(e),
			}
		default:
			if err := r.checkEngineTopology(e, reg); err != nil {
				return Outcome{}, err
			}
			if w != nil {
				out = Outcome{Result: WorkerTakeover, Replaced: w.addr, ReplacedGeneration: e.gen}
				adds = false
			}
		}
	}
	if adds {
		var holder *engine
		if s != nil && out.Result == Registered {
			holder = s.cur
		}
		// A takeover replaces the current engine: the count does not grow.
		if err := r.makeRoom(reg.DP, s == nil || s.cur == nil, holder); err != nil {
			return Outcome{}, err
		}
	}

	if elsewhere != nil {
		r.retire(now, elsewhere, fmt.Sprintf("re-registered on dp_rank=%d", reg.DP))
	}
	if s == nil {
		s = &slot{dp: reg.DP}
		r.slots[reg.DP] = s
	}
	if out.Result == EngineTakeover {
		r.retire(now, s, "replaced by "+reg.EngineID)
	}
	if s.cur == nil || out.Result == WorkerTakeover {
		// A new engine or a replaced address is a new generation: anything
		// cached against the old one (a router's dp -> engine id map) is
		// stale.
		s.gen++
	}
	if s.cur == nil {
		s.cur = r.newEngine(now, reg, s.gen)
	}
	e := s.cur
	e.gen = s.gen
	if reg.TPSize > 0 && e.tpSize == 0 {
		e.tpSize, e.sizeSrc = reg.TPSize, "client"
	}
	if reg.PPSize > 0 && e.ppSize == 0 {
		e.ppSize, e.sizeSrc = reg.PPSize, "client"
	}
	e.workers[key] = &worker{
		addr: reg.Addr, dial: dial, source: reg.Source,
		registeredAt: now, state: workerLive, lastOK: now,
	}
	e.lastRegister = now
	r.updateDead(now, e)
	r.markDirty(reg.DP)
	out.Generation = s.gen
	return out, nil
}

func (r *Registry) newEngine(now time.Time, reg Registration, gen uint64) *engine {
	e := &engine{
		id: reg.EngineID, dp: reg.DP, gen: gen,
		workers: make(map[workerKey]*worker),
		created: now,
	}
	if r.pol.TPSize > 0 || r.pol.PPSize > 0 {
		e.tpSize, e.ppSize, e.sizeSrc = r.pol.TPSize, r.pol.PPSize, "config"
	}
	return e
}

// validate checks a registration before anything is changed, and returns
// the host:port to probe.
func (r *Registry) validate(reg Registration) (string, error) {
	if err := r.checkBounds(reg); err != nil {
		return "", err
	}
	if reg.EngineID == "" {
		return "", &InvalidError{Type: "value_error", Field: "engine_id", Msg: "engine_id must not be empty"}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"dp_rank", reg.DP}, {"tp_rank", reg.TP}, {"pp_rank", reg.PP}} {
		if f.v < 0 {
			return "", &InvalidError{Type: "greater_than_equal", Field: f.name, Msg: "Input should be greater than or equal to 0"}
		}
	}
	if reg.TPSize < 0 || reg.PPSize < 0 {
		return "", &TopologyError{"TP, PP, PCP, and DCP sizes must be positive."}
	}
	dial, err := dialAddr(reg.Addr)
	if err != nil {
		return "", &InvalidError{Type: "value_error", Field: "addr", Msg: err.Error()}
	}
	if err := sizeCheck(reg.DP, "TP", r.pol.TPSize, reg.TPSize, reg.TP); err != nil {
		return "", err
	}
	if err := sizeCheck(reg.DP, "PP", r.pol.PPSize, reg.PPSize, reg.PP); err != nil {
		return "", err
	}
	return dial, nil
}

// sizeCheck compares a rank with the known size of its dimension (want, from
// the engine or the config) and the size the client sent (got).
func sizeCheck(dp int, dim string, want, got, rank int) error {
	if want > 0 && got > 0 && want != got {
		return &TopologyError{fmt.Sprintf("%s size mismatch for dp_rank=%d: expected %d, got %d", dim, dp, want, got)}
	}
	if want == 0 {
		want = got
	}
	if want > 0 && rank >= want {
		return &TopologyError{fmt.Sprintf("%s rank %d must be less than %s size %d.", dim, rank, dim, want)}
	}
	return nil
}

// checkEngineTopology checks a new worker of an existing engine against what
// the engine already knows about its shape.
func (r *Registry) checkEngineTopology(e *engine, reg Registration) error {
	if err := sizeCheck(reg.DP, "TP", e.tpSize, reg.TPSize, reg.TP); err != nil {
		return err
	}
	return sizeCheck(reg.DP, "PP", e.ppSize, reg.PPSize, reg.PP)
}

// engineElsewhere refuses an engine id that is current on another dp rank
// unless that engine is dead, in which case it returns its slot for
// retiring: a decode keys its cache by engine id, so one id must map to one
// worker map.
func (r *Registry) engineElsewhere(reg Registration) (*slot, error) {
	for dp, s := range r.slots {
		if dp == reg.DP || s.cur == nil || s.cur.id != reg.EngineID {
			continue
		}
		if !r.holderDead(s.cur, reg.Addr) {
			return nil, &ConflictError{
				Kind: EngineElsewhere, DP: reg.DP, TP: reg.TP, PP: reg.PP,
				Old: reg.EngineID, New: reg.EngineID, Holder: reg.EngineID, HolderDP: dp,
				Probe: targets(s.cur),
			}
		}
		return s, nil
	}
	return nil, nil
}

// holderDead reports whether e may be replaced: one of its workers is dead
// (a vLLM engine cannot serve KV with a TP or PP rank missing), or one of
// its addresses is the one now being registered (a new process listens
// there, so the old one is gone).
func (r *Registry) holderDead(e *engine, newAddr string) bool {
	for _, w := range e.workers {
		if w.state == workerDead || w.addr == newAddr {
			return true
		}
	}
	return false
}

// retire moves the current engine of s to its history.
func (r *Registry) retire(now time.Time, s *slot, why string) {
	e := s.cur
	e.retiredAt, e.retiredWhy = now, why
	if len(s.past) >= maxRetiredPerSlot {
		s.past = append(s.past[:0], s.past[1:]...)
	}
	s.past = append(s.past, e)
	s.cur = nil
	r.markDirty(s.dp)
}

// Delete retires the current engine with the given id (explicit
// deregistration). Its dp rank is free for any engine afterwards.
func (r *Registry) Delete(now time.Time, engineID string) error {
	s := r.findCurrent(engineID)
	if s == nil {
		return fmt.Errorf("%w: engine %q", ErrNotFound, engineID)
	}
	r.retire(now, s, "deleted")
	return nil
}

// DeleteWorker removes one worker of a current engine, so that slot can be
// registered at a new address without a probe. The engine stays incomplete
// (hidden) until the slot is registered again.
func (r *Registry) DeleteWorker(now time.Time, engineID string, tp, pp int) error {
	s := r.findCurrent(engineID)
	if s == nil {
		return fmt.Errorf("%w: engine %q", ErrNotFound, engineID)
	}
	e := s.cur
	key := workerKey{tp, pp}
	if e.workers[key] == nil {
		return fmt.Errorf("%w: engine %q worker tp=%d pp=%d", ErrNotFound, engineID, tp, pp)
	}
	if e.sizeSrc == "" {
		// Freeze the shape seen so far: without it, deleting tp 1 of a TP=2
		// engine would make it look like a complete TP=1 engine.
		e.tpSize, e.ppSize, e.sizeSrc = shape(e)
	}
	delete(e.workers, key)
	e.lastRegister = now
	r.updateDead(now, e)
	r.markDirty(s.dp)
	return nil
}

// SetDraining marks a current engine as draining (or not). A draining engine
// stays in /query, since decodes that already hold its id still need it, but
// is flagged not routable in /v2.
func (r *Registry) SetDraining(engineID string, draining bool) error {
	s := r.findCurrent(engineID)
	if s == nil {
		return fmt.Errorf("%w: engine %q", ErrNotFound, engineID)
	}
	if s.cur.draining != draining {
		s.cur.draining = draining
		r.markDirty(s.dp)
	}
	return nil
}

func (r *Registry) findCurrent(engineID string) *slot {
	for _, s := range r.slots {
		if s.cur != nil && s.cur.id == engineID {
			return s
		}
	}
	return nil
}

func targets(e *engine) []ProbeTarget {
	out := make([]ProbeTarget, 0, len(e.workers))
	for k, w := range e.workers {
		out = append(out, ProbeTarget{EngineID: e.id, DP: e.dp, TP: k.tp, PP: k.pp, Addr: w.addr, Dial: w.dial})
	}
	sortTargets(out)
	return out
}

// dialAddr turns the "tcp://host:port" of a registration into the
// "host:port" to probe.
func dialAddr(addr string) (string, error) {
	rest, ok := strings.CutPrefix(addr, "tcp://")
	if !ok {
		return "", fmt.Errorf("addr %q is not a tcp:// ZeroMQ address", addr)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return "", fmt.Errorf("addr %q: %v", addr, err)
	}
	if host == "" {
		return "", fmt.Errorf("addr %q has no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("addr %q has a bad port", addr)
	}
	return net.JoinHostPort(host, port), nil
}
