package bootstrap

import "fmt"

// Bounds on what one request can make the registry hold. A vLLM engine id is
// a uuid4 with a "_dp<N>" suffix (about 45 bytes) and an addr is
// "tcp://<ip>:<port>"; the caps leave room for host names.
const (
	maxEngineIDLen = 256
	maxAddrLen     = 300
	// maxRetiredPerSlot bounds the history of one dp rank: a prefill that
	// restarts in a loop must not grow it for Retention.
	maxRetiredPerSlot = 8
	// maxMissingListed bounds the "missing" list of one engine in /v2; the
	// count is reported beside it.
	maxMissingListed = 16
)

// withDefaultLimits fills zero limits of pol with the DefaultConfig values, so
// a Policy built by hand is bounded too.
func withDefaultLimits(pol Policy) Policy {
	def := DefaultConfig()
	if pol.MaxEngines <= 0 {
		pol.MaxEngines = def.MaxEngines
	}
	if pol.MaxWorkersPerEngine <= 0 {
		pol.MaxWorkersPerEngine = def.MaxWorkersPerEngine
	}
	if pol.MaxWorkers <= 0 {
		pol.MaxWorkers = def.MaxWorkers
	}
	return pol
}

// checkBounds refuses ranks and sizes beyond MaxWorkersPerEngine before any
// other rule looks at them.
func (r *Registry) checkBounds(reg Registration) error {
	if len(reg.EngineID) > maxEngineIDLen {
		return &InvalidError{Type: "string_too_long", Field: "engine_id", Msg: fmt.Sprintf("String should have at most %d characters", maxEngineIDLen)}
	}
	if len(reg.Addr) > maxAddrLen {
		return &InvalidError{Type: "string_too_long", Field: "addr", Msg: fmt.Sprintf("String should have at most %d characters", maxAddrLen)}
	}
	w := r.pol.MaxWorkersPerEngine
	switch {
	case reg.TPSize > w || reg.PPSize > w || max(reg.TPSize, 1)*max(reg.PPSize, 1) > w:
		return &LimitError{fmt.Sprintf("tp_size %d x pp_size %d exceeds this registry's limit of %d workers per engine (--max-workers-per-engine)",
			max(reg.TPSize, 1), max(reg.PPSize, 1), w)}
	case reg.TP >= w || reg.PP >= w:
		return &LimitError{fmt.Sprintf("tp_rank %d / pp_rank %d exceeds this registry's limit of %d workers per engine (--max-workers-per-engine)", reg.TP, reg.PP, w)}
	}
	return nil
}

// makeRoom checks that one more worker fits, for a registration that adds
// a worker (newEngine: and a current engine on dp rank dp). It is called after every other rule
// has accepted the registration and before anything is changed, except that
// it may forget empty dp ranks and the oldest retired engines, which are
// history only.
func (r *Registry) makeRoom(dp int, newEngine bool, e *engine) error {
	if newEngine {
		current := 0
		for _, s := range r.slots {
			if s.cur != nil {
				current++
			}
		}
		if current >= r.pol.MaxEngines {
			return &LimitError{fmt.Sprintf("registry full: %d engines held (--max-engines); DELETE /v2/engines/{id} of engines that are gone, or raise the limit", current)}
		}
		if _, ok := r.slots[dp]; !ok && len(r.slots) >= r.pol.MaxEngines {
			// Keep the map itself bounded: dp ranks without a current
			// engine hold only history and a generation counter.
			for d, s := range r.slots {
				if s.cur == nil {
					delete(r.slots, d)
					r.markDirty(d)
				}
			}
		}
	}
	if e != nil && len(e.workers) >= r.pol.MaxWorkersPerEngine {
		return &LimitError{fmt.Sprintf("engine %s on dp_rank=%d already has %d workers (--max-workers-per-engine)", e.id, dp, len(e.workers))}
	}
	for r.totalWorkers() >= r.pol.MaxWorkers {
		if !r.forgetOldestRetired() {
			return &LimitError{fmt.Sprintf("registry full: %d workers held (--max-workers); DELETE /v2/engines/{id} of engines that are gone, or raise the limit", r.pol.MaxWorkers)}
		}
	}
	return nil
}

func (r *Registry) totalWorkers() int {
	n := 0
	for _, s := range r.slots {
		if s.cur != nil {
			n += len(s.cur.workers)
		}
		for _, e := range s.past {
			n += len(e.workers)
		}
	}
	return n
}

// forgetOldestRetired drops the retired engine retired first, if any.
func (r *Registry) forgetOldestRetired() bool {
	var (
		oldest *slot
		at     int
	)
	for _, s := range r.slots {
		for i, e := range s.past {
			if oldest == nil || e.retiredAt.Before(oldest.past[at].retiredAt) {
				oldest, at = s, i
			}
		}
	}
	if oldest == nil {
		return false
	}
	oldest.past = append(oldest.past[:at], oldest.past[at+1:]...)
	r.markDirty(oldest.dp)
	return true
}
