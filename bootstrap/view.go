package bootstrap

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// EngineInfo is the /v2 view of one engine.
type EngineInfo struct {
	EngineID   string      `json:"engine_id"`
	DP         int         `json:"dp_rank"`
	Generation uint64      `json:"generation"`
	State      EngineState `json:"state"`
	Current    bool        `json:"current"`   // false once retired
	Published  bool        `json:"published"` // in /query
	Routable   bool        `json:"routable"`  // published and not draining
	TPSize     int         `json:"tp_size,omitempty"`
	PPSize     int         `json:"pp_size,omitempty"`
	// TopologySource is where TPSize/PPSize come from: config, client
	// (tp_size/pp_size in the payload) or learned (frozen when first
	// published); empty while unknown.
	TopologySource string       `json:"topology_source,omitempty"`
	Missing        []string     `json:"missing,omitempty"` // "tp=1,pp=0" slots not yet registered, the first few
	MissingCount   int          `json:"missing_count,omitempty"`
	Created        time.Time    `json:"created"`
	LastRegister   time.Time    `json:"last_register"`
	DeadSince      *time.Time   `json:"dead_since,omitempty"`
	RetiredAt      *time.Time   `json:"retired_at,omitempty"`
	RetiredReason  string       `json:"retired_reason,omitempty"`
	Workers        []WorkerInfo `json:"workers"`
}

// WorkerInfo is the /v2 view of one worker.
type WorkerInfo struct {
	TP           int         `json:"tp_rank"`
	PP           int         `json:"pp_rank"`
	Addr         string      `json:"addr"`
	State        WorkerState `json:"state"`
	Failures     int         `json:"consecutive_failures"`
	Source       string      `json:"source_ip,omitempty"`
	RegisteredAt time.Time   `json:"registered_at"`
	LastProbe    *time.Time  `json:"last_probe,omitempty"`
	LastOK       *time.Time  `json:"last_ok,omitempty"`
}

// Engines lists current engines and the retired ones still retained, by dp
// rank then generation.
func (r *Registry) Engines(now time.Time) []EngineInfo {
	var out []EngineInfo
	for _, s := range r.slots {
		for _, e := range s.past {
			out = append(out, r.info(now, e))
		}
		if s.cur != nil {
			out = append(out, r.info(now, s.cur))
		}
	}
	slices.SortFunc(out, func(a, b EngineInfo) int {
		return cmp.Or(cmp.Compare(a.DP, b.DP), cmp.Compare(a.Generation, b.Generation), cmp.Compare(a.EngineID, b.EngineID))
	})
	return out
}

// Engine returns the current engine with that id, or else the most recent
// retained retired one.
func (r *Registry) Engine(now time.Time, engineID string) (EngineInfo, error) {
	if s := r.findCurrent(engineID); s != nil {
		return r.info(now, s.cur), nil
	}
	var best *engine
	for _, s := range r.slots {
		for _, e := range s.past {
			if e.id == engineID && (best == nil || e.retiredAt.After(best.retiredAt)) {
				best = e
			}
		}
	}
	if best == nil {
		return EngineInfo{}, fmt.Errorf("%w: engine %q", ErrNotFound, engineID)
	}
	return r.info(now, best), nil
}

// Generations returns the generation counter of every dp rank seen.
func (r *Registry) Generations() map[int]uint64 {
	out := make(map[int]uint64, len(r.slots))
	for dp, s := range r.slots {
		out[dp] = s.gen
	}
	return out
}

// Counts returns the number of current engines per state, and of their
// workers per state, for the gauges.
func (r *Registry) Counts(now time.Time) (engines map[EngineState]int, workers map[WorkerState]int) {
	engines = make(map[EngineState]int)
	workers = make(map[WorkerState]int)
	for _, s := range r.slots {
		engines[StateRetired] += len(s.past)
		if e := s.cur; e != nil {
			engines[r.engineState(now, e)]++
			for _, w := range e.workers {
				workers[r.workerState(w)]++
			}
		}
	}
	return engines, workers
}

func (r *Registry) info(now time.Time, e *engine) EngineInfo {
	st := r.engineState(now, e)
	in := EngineInfo{
		EngineID: e.id, DP: e.dp, Generation: e.gen, State: st,
		Current: e.retiredAt.IsZero(), Published: st.Published(),
		Routable: st.Published() && !e.draining,
		TPSize:   e.tpSize, PPSize: e.ppSize, TopologySource: e.sizeSrc,
		Created: e.created, LastRegister: e.lastRegister,
		DeadSince: timePtr(e.deadSince), RetiredAt: timePtr(e.retiredAt),
		RetiredReason: e.retiredWhy,
		Workers:       make([]WorkerInfo, 0, len(e.workers)),
	}
	for k, w := range e.workers {
		in.Workers = append(in.Workers, WorkerInfo{
			TP: k.tp, PP: k.pp, Addr: w.addr, State: r.workerState(w),
			Failures: w.failures, Source: w.source, RegisteredAt: w.registeredAt,
			LastProbe: timePtr(w.lastProbe), LastOK: timePtr(w.lastOK),
		})
	}
	slices.SortFunc(in.Workers, func(a, b WorkerInfo) int {
		return cmp.Or(cmp.Compare(a.TP, b.TP), cmp.Compare(a.PP, b.PP))
	})
	for t := range e.tpSize {
		for p := range max(e.ppSize, 1) {
			if e.workers[workerKey{t, p}] == nil {
				// Listed up to a bound: the topology is bounded too, but a
				// thousand empty slots say no more than their count.
				if in.MissingCount < maxMissingListed {
					in.Missing = append(in.Missing, fmt.Sprintf("tp=%d,pp=%d", t, p))
				}
				in.MissingCount++
			}
		}
	}
	return in
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
