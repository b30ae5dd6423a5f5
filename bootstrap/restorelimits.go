package bootstrap

import (
	"fmt"
	"slices"
)

// enforceLimits drops what a loaded snapshot holds beyond the registry's
// limits, and returns why, one line per engine dropped. A snapshot may come
// from a build or a configuration with larger limits, or be edited by hand;
// holding it as it is would bring back what the limits exist to prevent (one
// engine of tp_size x pp_size 1e9 made /v2/engines build a billion "missing"
// entries). Engines are checked in dp order; the ones past --max-engines or
// --max-workers go first from the highest dp rank.
func (r *Registry) enforceLimits() []string {
	var dropped []string
	drop := func(dp int, why string) {
		s := r.slots[dp]
		dropped = append(dropped, fmt.Sprintf("dp_rank %d engine %.64q: %s", dp, s.cur.id, why))
		s.cur = nil
		r.markDirty(dp)
	}
	dps := make([]int, 0, len(r.slots))
	for dp := range r.slots {
		dps = append(dps, dp)
	}
	slices.Sort(dps)
	var kept []int
	for _, dp := range dps {
		e := r.slots[dp].cur
		if e == nil {
			continue
		}
		if why := r.engineOverLimits(e); why != "" {
			drop(dp, why)
			continue
		}
		if len(kept) >= r.pol.MaxEngines {
			drop(dp, fmt.Sprintf("more than %d engines (--max-engines)", r.pol.MaxEngines))
			continue
		}
		kept = append(kept, dp)
	}
	for r.totalWorkers() > r.pol.MaxWorkers {
		if r.forgetOldestRetired() {
			continue
		}
		dp := kept[len(kept)-1]
		kept = kept[:len(kept)-1]
		drop(dp, fmt.Sprintf("more than %d workers in all (--max-workers)", r.pol.MaxWorkers))
	}
	// Keep the map bounded too: ranks without an engine hold only history.
	for _, dp := range dps {
		if s := r.slots[dp]; s.cur == nil && len(r.slots) > r.pol.MaxEngines {
			delete(r.slots, dp)
			r.markDirty(dp)
		}
	}
	if len(dropped) > 0 {
		r.rev++
	}
	return dropped
}

// engineOverLimits says which limit a restored engine breaks, or "".
func (r *Registry) engineOverLimits(e *engine) string {
	w := r.pol.MaxWorkersPerEngine
	switch {
	case len(e.id) > maxEngineIDLen:
		return fmt.Sprintf("engine_id of %d bytes, more than %d", len(e.id), maxEngineIDLen)
	case e.tpSize > w || e.ppSize > w || max(e.tpSize, 1)*max(e.ppSize, 1) > w:
		return fmt.Sprintf("tp_size %d x pp_size %d, more than %d workers per engine (--max-workers-per-engine)", e.tpSize, e.ppSize, w)
	case len(e.workers) > w:
		return fmt.Sprintf("%d workers, more than %d per engine (--max-workers-per-engine)", len(e.workers), w)
	}
	for k, wk := range e.workers {
		switch {
		case k.tp >= w || k.pp >= w || k.tp < 0 || k.pp < 0:
			return fmt.Sprintf("a worker at tp_rank %d / pp_rank %d, beyond %d workers per engine (--max-workers-per-engine)", k.tp, k.pp, w)
		case len(wk.addr) > maxAddrLen:
			return fmt.Sprintf("a worker addr of %d bytes, more than %d", len(wk.addr), maxAddrLen)
		}
	}
	return ""
}
