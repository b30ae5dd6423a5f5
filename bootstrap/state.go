package bootstrap

import (
	"cmp"
	"slices"
	"time"
)

// WorkerState is the liveness of one worker address.
type WorkerState string

const (
	// workerUnverified: loaded from a snapshot, not yet probed.
	workerUnverified WorkerState = "unverified"
	workerLive       WorkerState = "live"
	// workerSuspect is derived: live but the last probes failed.
	workerSuspect WorkerState = "suspect"
	workerDead    WorkerState = "dead"
)

// EngineState is the derived state of an engine.
type EngineState string

// Engine states. Only Ready, Suspect and Draining engines are published in
// /query.
const (
	StateRegistering EngineState = "registering" // not all TP x PP workers yet
	StateReady       EngineState = "ready"       // complete and live
	StateSuspect     EngineState = "suspect"     // some probes failing, below the threshold
	StateDraining    EngineState = "draining"    // admin: still served to decodes, not routable
	StateUnverified  EngineState = "unverified"  // loaded from a snapshot, probe pending
	StateDead        EngineState = "dead"        // a worker is unreachable: hidden
	StateRetired     EngineState = "retired"     // replaced or deleted
)

// Published reports whether engines in state s appear in /query.
func (s EngineState) Published() bool {
	return s == StateReady || s == StateSuspect || s == StateDraining
}

// ProbeTarget is one worker address to probe.
type ProbeTarget struct {
	EngineID   string
	DP, TP, PP int
	Addr       string // as registered: tcp://host:port
	Dial       string // host:port
}

// ProbeResult is the outcome of probing one target.
type ProbeResult struct {
	ProbeTarget
	Err error // nil: the port accepted a connection
	// Sync marks a conflict probe. It already retried within its budget,
	// so a failure is final: the worker is dead at once, not after
	// FailureThreshold sweeps.
	Sync bool
}

// Transition is an engine state change caused by probes, for logging.
type Transition struct {
	EngineID   string
	DP         int
	Generation uint64
	From, To   EngineState
}

func (r *Registry) workerState(w *worker) WorkerState {
	if w.state == workerLive && w.failures > 0 {
		return workerSuspect
	}
	return w.state
}

func (r *Registry) engineState(now time.Time, e *engine) EngineState {
	if !e.retiredAt.IsZero() {
		return StateRetired
	}
	unverified, suspect := false, false
	for _, w := range e.workers {
		switch r.workerState(w) {
		case workerDead:
			return StateDead
		case workerUnverified:
			unverified = true
		case workerSuspect:
			suspect = true
		}
	}
	switch {
	case unverified:
		return StateUnverified
	case !r.complete(now, e):
		return StateRegistering
	case e.draining:
		return StateDraining
	case suspect:
		return StateSuspect
	}
	return StateReady
}

// shape returns the TP and PP sizes implied by the ranks present if they
// form a full grid 0..T-1 x 0..P-1, else zeros.
func shape(e *engine) (tp, pp int, src string) {
	pps := make(map[int]int) // tp rank -> number of pp ranks
	for k := range e.workers {
		pps[k.tp]++
	}
	tp = len(pps)
	for t := range tp {
		n, ok := pps[t]
		if !ok || (pp != 0 && n != pp) {
			return 0, 0, ""
		}
		pp = n
	}
	for k := range e.workers {
		if k.pp >= pp {
			return 0, 0, ""
		}
	}
	if tp == 0 {
		return 0, 0, ""
	}
	return tp, pp, "learned"
}

// complete reports whether all TP x PP workers of e are present. With the
// topology known (config, client, or learned when first published) that is
// exact; otherwise the ranks must form a full grid and no worker may have
// arrived for Settle, because decodes cache len(worker_addr) forever and a
// half-registered engine must not be seen.
func (r *Registry) complete(now time.Time, e *engine) bool {
	tp, pp, _ := shape(e)
	if tp == 0 {
		return false
	}
	if (e.tpSize > 0 && tp != e.tpSize) || (e.ppSize > 0 && pp != e.ppSize) {
		return false
	}
	if e.tpSize > 0 && e.ppSize > 0 {
		return true
	}
	return now.Sub(e.lastRegister) >= r.pol.Settle
}

// updateDead keeps deadSince in step with the engine's liveness; Expire
// forgets engines that stayed dead for Retention.
func (r *Registry) updateDead(now time.Time, e *engine) {
	dead := false
	for _, w := range e.workers {
		dead = dead || w.state == workerDead
	}
	switch {
	case dead && e.deadSince.IsZero():
		e.deadSince = now
	case !dead:
		e.deadSince = time.Time{}
	}
}

// ProbeTargets lists every worker of every current engine, dead ones
// included so that an engine whose network came back is revived.
func (r *Registry) ProbeTargets() []ProbeTarget {
	var out []ProbeTarget
	for _, s := range r.slots {
		if s.cur != nil {
			out = append(out, targets(s.cur)...)
		}
	}
	sortTargets(out)
	return out
}

// RecordProbes applies probe results. A result is ignored when its worker
// has since been replaced or removed. A success revives a worker; a failure
// counts towards FailureThreshold, or kills at once when Sync.
func (r *Registry) RecordProbes(now time.Time, results []ProbeResult) []Transition {
	type touched struct {
		e    *engine
		from EngineState
	}
	var seen []touched
	for _, res := range results {
		s := r.slots[res.DP]
		if s == nil || s.cur == nil || s.cur.id != res.EngineID {
			continue
		}
		e := s.cur
		w := e.workers[workerKey{res.TP, res.PP}]
		if w == nil || w.addr != res.Addr {
			continue
		}
		if !slices.ContainsFunc(seen, func(t touched) bool { return t.e == e }) {
			seen = append(seen, touched{e, r.engineState(now, e)})
		}
		w.lastProbe = now
		if res.Err == nil {
			w.state, w.failures, w.lastOK = workerLive, 0, now
		} else {
			w.failures++
			if res.Sync || w.failures >= r.pol.FailureThreshold {
				w.state = workerDead
			}
		}
		r.updateDead(now, e)
	}
	var out []Transition
	for _, t := range seen {
		if to := r.engineState(now, t.e); to != t.from {
			out = append(out, Transition{EngineID: t.e.id, DP: t.e.dp, Generation: t.e.gen, From: t.from, To: to})
		}
	}
	return out
}

// Expire forgets retired engines, and current engines dead for longer than
// Retention (which frees their dp rank). It returns how many it forgot.
func (r *Registry) Expire(now time.Time) int {
	n := 0
	for _, s := range r.slots {
		kept := s.past[:0]
		for _, e := range s.past {
			if now.Sub(e.retiredAt) < r.pol.Retention {
				kept = append(kept, e)
			} else {
				n++
			}
		}
		clear(s.past[len(kept):])
		s.past = kept
		if e := s.cur; e != nil && !e.deadSince.IsZero() && now.Sub(e.deadSince) >= r.pol.Retention {
			s.cur = nil
			n++
			r.markDirty(s.dp)
		}
	}
	return n
}

// Entry is one engine in the /query answer.
type Entry struct {
	EngineID string `json:"engine_id"`
	// WorkerAddr maps tp rank -> pp rank -> "tcp://host:port"; encoding/json
	// writes the int keys as sorted decimal strings, as vLLM expects.
	WorkerAddr map[int]map[int]string `json:"worker_addr"`
}

// Query returns the /query view: for each dp rank, its current engine if it
// is published (complete, live, not replaced). An engine published for the
// first time without a known topology has its shape frozen, so a later
// missing worker hides it instead of shrinking its TP size.
func (r *Registry) Query(now time.Time) map[int]Entry {
	out := make(map[int]Entry)
	for dp, s := range r.slots {
		if e := s.cur; e != nil && r.publish(now, e) {
			out[dp] = entry(e)
		}
	}
	return out
}

// QueryEngine is Query restricted to one engine id (the /e/{id}/query view).
func (r *Registry) QueryEngine(now time.Time, engineID string) map[int]Entry {
	out := make(map[int]Entry)
	if s := r.findCurrent(engineID); s != nil && r.publish(now, s.cur) {
		out[s.dp] = entry(s.cur)
	}
	return out
}

func (r *Registry) publish(now time.Time, e *engine) bool {
	if !r.engineState(now, e).Published() {
		return false
	}
	if e.sizeSrc == "" {
		e.tpSize, e.ppSize, e.sizeSrc = shape(e)
	}
	return true
}

func entry(e *engine) Entry {
	m := make(map[int]map[int]string)
	for k, w := range e.workers {
		if m[k.tp] == nil {
			m[k.tp] = make(map[int]string)
		}
		m[k.tp][k.pp] = w.addr
	}
	return Entry{EngineID: e.id, WorkerAddr: m}
}

func sortTargets(ts []ProbeTarget) {
	slices.SortFunc(ts, func(a, b ProbeTarget) int {
		return cmp.Or(cmp.Compare(a.DP, b.DP), cmp.Compare(a.EngineID, b.EngineID),
			cmp.Compare(a.TP, b.TP), cmp.Compare(a.PP, b.PP))
	})
}
