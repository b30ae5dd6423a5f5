package dispatcher

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
	"github.com/switchyard-llm/switchyard/wire"
)

// EngineState is an engine's state as Engines reports it.
type EngineState string

// Engine states.
const (
	EngineStateUp   EngineState = "up"
	EngineStateDown EngineState = "down"
	// EngineStateStalled: connected, but silent with requests in flight for
	// StallTimeout; no new work until it speaks again.
	EngineStateStalled EngineState = "stalled"
	// EngineStateDraining: up, but DrainEngine was called; no new requests,
	// its in-flight ones finish there.
	EngineStateDraining EngineState = "draining"
	// EngineStateGroupBroken: up, but another rank of its lockstep group died;
	// nothing sent to it could finish until the group is whole again.
	EngineStateGroupBroken EngineState = "group_broken"
)

// EngineStatus is one engine as Engines reports it.
type EngineStatus struct {
	Rank         int
	State        EngineState
	InFlight     int64 // our live requests on it
	Waiting      int64 // from its last scheduler_stats (or the coordinator)
	Running      int64
	KVCacheUsage float64
	LastOutput   time.Time // zero before the first message
	Cause        string    // why it went down; empty while up
	Draining     bool      // DrainEngine was called and UndrainEngine not since
}

// engine is the dispatcher's per-rank state. Everything the hot path reads or writes
// is an atomic, so Submit and the output loops never lock to pick or account.
type engine struct {
	rank int

	up         atomic.Bool
	inFlight   atomic.Int64
	waiting    atomic.Int64
	running    atomic.Int64
	admitted   atomic.Int64 // ADDs since the last stats
	ended      atomic.Int64 // our requests that ended since the last stats
	statsAt    atomic.Int64 // unix nanoseconds of the last stats, 0 = none
	kvBits     atomic.Uint64
	lastOutput atomic.Int64 // unix nanoseconds, 0 = never
	// Stall watch (stall.go): the last output or stats, the last check that
	// found nothing in flight, and whether the engine is stalled.
	lastHeard atomic.Int64
	idleAt    atomic.Int64
	stalled   atomic.Bool
	probedAt  atomic.Int64 // last utility probe of a stalled engine
	cause     atomic.Pointer[string]
	draining  atomic.Bool // DrainEngine: no new requests (survive.go)
	// maxModelLen is the engine's registered context length, 0 = unknown.
	maxModelLen atomic.Int64
	// layout is the engine's vLLM wire layout (set before up, like maxModelLen).
	layout atomic.Pointer[wire.Layout]

	m  engineMetrics
	vm *vllmmetrics.Engine // vllm:* children; nil when not recorded
}

// load snapshots the engine for the rank policy at now (unix nanoseconds); stats
// older than maxAge are marked stale.
func (e *engine) load(now, maxAge int64) Load {
	at := e.statsAt.Load()
	return Load{
		Rank:         e.rank,
		Ready:        e.up.Load() && !e.stalled.Load() && !e.draining.Load(),
		InFlight:     e.inFlight.Load(),
		Waiting:      e.waiting.Load(),
		Running:      e.running.Load(),
		Admitted:     e.admitted.Load(),
		Ended:        e.ended.Load(),
		Stale:        at != 0 && now-at > maxAge,
		KVCacheUsage: math.Float64frombits(e.kvBits.Load()),
	}
}

// observeLoad records fresh stats taken at now (unix nanoseconds). Admissions and
// endings before them are now part of them.
func (e *engine) observeLoad(waiting, running int64, kv float64, now int64) {
	e.waiting.Store(waiting)
	e.running.Store(running)
	e.kvBits.Store(math.Float64bits(kv))
	e.admitted.Store(0)
	e.ended.Store(0)
	e.statsAt.Store(now)
}

// maxStatsCount caps a request count in scheduler stats: far above any engine's
// real queue, yet small enough that a score built from it stays meaningful.
const maxStatsCount = 1 << 20

// statsField names a scheduler-stats field that sanitizeStats may clamp: the
// bounded `field` label of switchyard_engine_stats_clamped_total.
type statsField uint8

const (
	statsWaiting statsField = iota
	statsRunning
	statsKVCacheUsage
	numStatsFields
)

var statsFieldNames = [numStatsFields]string{"num_waiting_reqs", "num_running_reqs", "kv_cache_usage"}

// sanitizeStats bounds what an engine reports before routing reads it: a count
// below 0 becomes 0 and one above maxStatsCount becomes maxStatsCount; KV-cache
// usage is kept in [0, 1] (NaN becomes 0). Each clamp is counted, per field.
func (e *engine) sanitizeStats(waiting, running int64, kv float64) (int64, int64, float64) {
	waiting = e.clampCount(statsWaiting, waiting)
	running = e.clampCount(statsRunning, running)
	if !(kv >= 0 && kv <= 1) {
		switch {
		case kv > 1: // +Inf too
			kv = 1
		default: // negative, -Inf or NaN
			kv = 0
		}
		e.m.statsClamped[statsKVCacheUsage].Inc()
	}
	return waiting, running, kv
}

func (e *engine) clampCount(f statsField, n int64) int64 {
	switch {
	case n < 0:
		n = 0
	case n > maxStatsCount:
		n = maxStatsCount
	default:
		return n
	}
	e.m.statsClamped[f].Inc()
	return n
}

func (e *engine) status() EngineStatus {
	st := EngineStatus{
		Rank:         e.rank,
		State:        EngineStateDown,
		InFlight:     e.inFlight.Load(),
		Waiting:      e.waiting.Load(),
		Running:      e.running.Load(),
		KVCacheUsage: math.Float64frombits(e.kvBits.Load()),
	}
	if e.up.Load() && e.stalled.Load() {
		st.State = EngineStateStalled
		st.Cause = "stalled: no output or scheduler stats with requests in flight"
	} else if e.up.Load() {
		st.State = EngineStateUp
	} else if c := e.cause.Load(); c != nil {
		st.Cause = *c
	}
	if ns := e.lastOutput.Load(); ns != 0 {
		st.LastOutput = time.Unix(0, ns)
	}
	return st
}

// engineSet is an immutable, rank-ordered list of every engine ever seen, swapped
// whole (copy-on-write) when a new rank joins so readers never lock.
type engineSet struct {
	list []*engine
}

// find returns the engine of rank, or nil.
func (s *engineSet) find(rank int) *engine {
	// Ranks are few and dense; a linear scan beats a map at this size.
	for _, e := range s.list {
		if e.rank == rank {
			return e
		}
	}
	return nil
}

// with returns a copy of s that includes e, kept in rank order.
func (s *engineSet) with(e *engine) *engineSet {
	list := make([]*engine, 0, len(s.list)+1)
	i := 0
	for ; i < len(s.list) && s.list[i].rank < e.rank; i++ {
		list = append(list, s.list[i])
	}
	list = append(list, e)
	list = append(list, s.list[i:]...)
	return &engineSet{list: list}
}
