package dispatcher

// Lockstep groups and per-rank drain: the dispatcher's edge over LockstepGroup
// (lockstep.go) and the draining flag of each engine. Kept apart from the
// request path so it reads in one place; the request path only asks
// groupRefusal and engine.draining.

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/wire"
)

// groupEdge owns the dispatcher's lockstep group (nil = ranks are independent).
type groupEdge struct {
	mu  sync.Mutex // serialises steps of g
	g   *LockstepGroup
	err atomic.Pointer[GroupBrokenError] // non-nil while the group is broken

	m survivalMetrics
}

// survivalMetrics count drains and broken groups.
type survivalMetrics struct {
	drains       *prometheus.CounterVec // action=drain|undrain
	draining     prometheus.GaugeFunc
	groupBreaks  prometheus.Counter
	groupFailed  prometheus.Counter
	groupRefused prometheus.Counter
	groupBroken  prometheus.GaugeFunc
}

func (d *Dispatcher) initSurvival() error {
	if d.cfg.LockstepRanks > 0 {
		d.grp.g = NewLockstepGroup(d.cfg.LockstepRanks)
	}
	m := &d.grp.m
	m.drains = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "switchyard_engine_drains_total",
		Help: "Drain and undrain calls that changed an engine's state, by action.",
	}, []string{"action"})
	m.draining = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_engines_draining",
		Help: "Engines draining now: no new requests, in-flight ones finish there.",
	}, func() float64 {
		n := 0
		for _, e := range d.engines.Load().list {
			if e.draining.Load() {
				n++
			}
		}
		return float64(n)
	})
	m.groupBreaks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchyard_lockstep_group_breaks_total",
		Help: "Times the lockstep group broke because one of its ranks died.",
	})
	m.groupFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchyard_lockstep_group_failed_requests_total",
		Help: "In-flight requests on surviving ranks failed because their lockstep group broke.",
	})
	m.groupRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "switchyard_lockstep_group_refused_requests_total",
		Help: "New requests refused because the lockstep group was broken.",
	})
	m.groupBroken = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchyard_lockstep_group_broken",
		Help: "1 while the lockstep group is broken (a rank died; waiting for every rank to rejoin).",
	}, func() float64 {
		if d.grp.err.Load() != nil {
			return 1
		}
		return 0
	})
	if d.cfg.Registerer == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.drains, m.draining, m.groupBreaks, m.groupFailed, m.groupRefused, m.groupBroken} {
		if err := d.cfg.Registerer.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// groupRankUp steps the group with rank's READY.
func (d *Dispatcher) groupRankUp(rank int) {
	if d.grp.g == nil {
		return
	}
	d.grp.mu.Lock()
	ch := d.grp.g.RankUp(rank)
	if ch == GroupWhole {
		d.grp.err.Store(nil)
	}
	d.grp.mu.Unlock()
	if ch == GroupWhole {
		d.log.Warn("dispatcher: lockstep group whole again; serving", "ranks", d.grp.g.Size(), "rejoined", rank)
	}
}

// groupRankDown steps the group with rank's loss. When that breaks the group,
// every in-flight request on the other ranks fails at once with a
// *GroupBrokenError (the survivors are blocked in a collective with the dead
// rank) and is aborted there, so nothing is left to run when the group
// resumes. The broken flag is set before the sweep: a Submit that inserted
// after the sweep passed it re-checks the flag in admit.
func (d *Dispatcher) groupRankDown(rank int, cause error) {
	if d.grp.g == nil {
		return
	}
	d.grp.mu.Lock()
	ch := d.grp.g.RankDown(rank)
	var ge *GroupBrokenError
	if ch == GroupBroke {
		if cause == nil {
			cause = fmt.Errorf("engine down")
		}
		ge = &GroupBrokenError{DeadRank: rank, Size: d.grp.g.Size(), Missing: d.grp.g.Missing(), Cause: cause}
		d.grp.err.Store(ge)
	} else if old := d.grp.err.Load(); old != nil {
		// Still broken: refresh the list of missing ranks for new refusals.
		cp := *old
		cp.Missing = d.grp.g.Missing()
		d.grp.err.Store(&cp)
	}
	d.grp.mu.Unlock()
	if ge == nil {
		return
	}
	d.grp.m.groupBreaks.Inc()
	n := 0
	for _, r := range d.table.All() {
		if r.eng.rank != rank && d.grp.g.Contains(r.eng.rank) {
			d.abortOne(r, ge, outcomeEngineDown, false)
			n++
		}
	}
	d.grp.m.groupFailed.Add(float64(n))
	d.kickAborter()
	d.log.Error("dispatcher: lockstep group broken: a rank died, the others are blocked in its collective; "+
		"failing the group's requests and refusing new ones until every rank is ready again",
		"dead_rank", rank, "ranks", ge.Size, "failed_requests", n, "err", cause)
}

// groupRefusal is the error for a new request to rank while its group is
// broken, or nil.
func (d *Dispatcher) groupRefusal(rank int) *GroupBrokenError {
	ge := d.grp.err.Load()
	if ge == nil || !d.grp.g.Contains(rank) {
		return nil
	}
	d.grp.m.groupRefused.Inc()
	return ge
}

// GroupStatus is the lockstep group as Engines' callers see it.
type GroupStatus struct {
	Size     int
	Broken   bool
	DeadRank int    // valid when Broken
	Cause    string // the GroupBrokenError text when Broken
}

// Group reports the lockstep group; ok is false when ranks are independent
// (Config.LockstepRanks is 0).
func (d *Dispatcher) Group() (st GroupStatus, ok bool) {
	if d.grp.g == nil {
		return GroupStatus{}, false
	}
	st.Size = d.grp.g.Size()
	if ge := d.grp.err.Load(); ge != nil {
		st.Broken, st.DeadRank, st.Cause = true, ge.DeadRank, ge.Error()
	}
	return st, true
}

// DrainEngine stops sending new requests to rank; its in-flight requests
// finish there (Engines shows it draining with the count left). A pinned
// request to it is refused with *EngineDrainingError. The mark survives the
// engine restarting, so an operator can drain, upgrade, restart, then
// UndrainEngine. It fails with *UnknownRankError for a rank never seen.
func (d *Dispatcher) DrainEngine(rank int) error {
	e := d.engines.Load().find(rank)
	if e == nil {
		return &UnknownRankError{Rank: rank}
	}
	if !e.draining.Swap(true) {
		d.grp.m.drains.WithLabelValues("drain").Inc()
		d.log.Info("dispatcher: engine draining", "rank", rank, "in_flight", e.inFlight.Load())
	}
	return nil
}

// UndrainEngine makes rank eligible for new requests again.
func (d *Dispatcher) UndrainEngine(rank int) error {
	e := d.engines.Load().find(rank)
	if e == nil {
		return &UnknownRankError{Rank: rank}
	}
	if e.draining.Swap(false) {
		d.grp.m.drains.WithLabelValues("undrain").Inc()
		d.log.Info("dispatcher: engine undrained", "rank", rank)
	}
	return nil
}

// decorateStatus adds drain and group state to one engine's status.
func (d *Dispatcher) decorateStatus(st *EngineStatus, e *engine) {
	st.Draining = e.draining.Load()
	if st.State != EngineStateUp {
		return
	}
	if ge := d.grp.err.Load(); ge != nil && d.grp.g.Contains(e.rank) {
		st.State, st.Cause = EngineStateGroupBroken, ge.Error()
		return
	}
	if st.Draining {
		st.State = EngineStateDraining
	}
}

// UnknownRankError: a drain or undrain named a rank that never connected.
type UnknownRankError struct{ Rank int }

func (e *UnknownRankError) Error() string {
	return fmt.Sprintf("engine rank %d has never connected to this frontend", e.Rank)
}

// EngineDrainingError refuses a request pinned to a draining rank. Nothing is sent.
type EngineDrainingError struct{ Rank int }

func (e *EngineDrainingError) Error() string {
	return fmt.Sprintf("engine rank %d is draining and takes no new requests", e.Rank)
}

// refuseForSurvival refuses req before a rank is chosen: its group is broken,
// or it is pinned to a draining rank.
func (d *Dispatcher) refuseForSurvival(req *wire.EngineCoreRequest) error {
	pinned := req.DataParallelRank.Valid
	if d.grp.g != nil && d.grp.err.Load() != nil {
		rank := 0 // unpinned: every rank this frontend serves is in the group
		if pinned {
			rank = int(req.DataParallelRank.Value)
		}
		if ge := d.groupRefusal(rank); ge != nil {
			return ge
		}
	}
	if pinned {
		if e := d.engines.Load().find(int(req.DataParallelRank.Value)); e != nil && e.draining.Load() && e.up.Load() {
			return &EngineDrainingError{Rank: e.rank}
		}
	}
	return nil
}
