package bootstrap

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// snapshotVersion is bumped when the file format changes incompatibly.
const snapshotVersion = 1

// Snapshot is the persisted form of a Registry: generations and current
// engines with their worker addresses. Liveness is not persisted; every
// restored worker is unverified until probed.
type Snapshot struct {
	Version int            `json:"version"`
	SavedAt time.Time      `json:"saved_at"`
	Slots   []snapshotSlot `json:"slots"`
}

type snapshotSlot struct {
	DP int `json:"dp_rank"`
	// Removed (change log only): the dp rank was forgotten.
	Removed    bool            `json:"removed,omitempty"`
	Generation uint64          `json:"generation"`
	Engine     *snapshotEngine `json:"engine,omitempty"`
}

type snapshotEngine struct {
	EngineID       string           `json:"engine_id"`
	Generation     uint64           `json:"generation"`
	TPSize         int              `json:"tp_size,omitempty"`
	PPSize         int              `json:"pp_size,omitempty"`
	TopologySource string           `json:"topology_source,omitempty"`
	Draining       bool             `json:"draining,omitempty"`
	Created        time.Time        `json:"created"`
	Workers        []snapshotWorker `json:"workers"`
}

type snapshotWorker struct {
	TP           int       `json:"tp_rank"`
	PP           int       `json:"pp_rank"`
	Addr         string    `json:"addr"`
	Source       string    `json:"source_ip,omitempty"`
	RegisteredAt time.Time `json:"registered_at"`
}

// Snapshot captures the registry for persistence. It also clears the set
// of changed dp ranks: everything is in it.
func (r *Registry) Snapshot(now time.Time) Snapshot {
	snap := Snapshot{Version: snapshotVersion, SavedAt: now}
	for _, s := range r.slots {
		snap.Slots = append(snap.Slots, r.slotRecord(s))
	}
	slices.SortFunc(snap.Slots, func(a, b snapshotSlot) int { return a.DP - b.DP })
	clear(r.dirty)
	return snap
}

// takeChanges returns the persisted form of every dp rank changed since the
// last call (or Snapshot), in dp order, and forgets them. Each record is the
// whole state of its dp rank, so replaying records over a snapshot is
// idempotent: a crash between a compaction and the log's truncation loses
// nothing.
func (r *Registry) takeChanges() []snapshotSlot {
	out := make([]snapshotSlot, 0, len(r.dirty))
	for dp := range r.dirty {
		if s := r.slots[dp]; s != nil {
			out = append(out, r.slotRecord(s))
		} else {
			out = append(out, snapshotSlot{DP: dp, Removed: true})
		}
	}
	clear(r.dirty)
	slices.SortFunc(out, func(a, b snapshotSlot) int { return a.DP - b.DP })
	return out
}

func (r *Registry) slotRecord(s *slot) snapshotSlot {
	ss := snapshotSlot{DP: s.dp, Generation: s.gen}
	if e := s.cur; e != nil {
		se := &snapshotEngine{
			EngineID: e.id, Generation: e.gen,
			TPSize: e.tpSize, PPSize: e.ppSize, TopologySource: e.sizeSrc,
			Draining: e.draining, Created: e.created,
		}
		for k, w := range e.workers {
			se.Workers = append(se.Workers, snapshotWorker{
				TP: k.tp, PP: k.pp, Addr: w.addr, Source: w.source, RegisteredAt: w.registeredAt,
			})
		}
		slices.SortFunc(se.Workers, func(a, b snapshotWorker) int {
			if a.TP != b.TP {
				return a.TP - b.TP
			}
			return a.PP - b.PP
		})
		ss.Engine = se
	}
	return ss
}

// MarshalSnapshot encodes a snapshot as indented JSON.
func MarshalSnapshot(s Snapshot) ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("bootstrap: encode snapshot: %w", err)
	}
	return append(b, '\n'), nil
}

// Restore replaces the registry's content with a decoded snapshot file.
// Every worker comes back unverified (hidden from /query) until a probe
// reaches it: the engines may have died while the registry was down.
func (r *Registry) Restore(now time.Time, data []byte) error {
	var snap Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return fmt.Errorf("bootstrap: decode snapshot: %w", err)
	}
	if snap.Version != snapshotVersion {
		return fmt.Errorf("bootstrap: snapshot version %d, want %d", snap.Version, snapshotVersion)
	}
	slots := make(map[int]*slot, len(snap.Slots))
	for _, ss := range snap.Slots {
		s, err := restoreSlot(now, ss)
		if err != nil {
			return err
		}
		slots[ss.DP] = s
	}
	r.slots = slots
	r.rev++
	clear(r.dirty)
	return nil
}

// applyChange replays one change-log record over the restored registry.
func (r *Registry) applyChange(now time.Time, ss snapshotSlot) error {
	if ss.Removed {
		delete(r.slots, ss.DP)
		return nil
	}
	s, err := restoreSlot(now, ss)
	if err != nil {
		return err
	}
	r.slots[ss.DP] = s
	r.rev++
	return nil
}

// restoreSlot rebuilds one dp rank; every worker is unverified.
func restoreSlot(now time.Time, ss snapshotSlot) (*slot, error) {
	s := &slot{dp: ss.DP, gen: ss.Generation}
	se := ss.Engine
	if se == nil {
		return s, nil
	}
	e := &engine{
		id: se.EngineID, dp: ss.DP, gen: se.Generation,
		tpSize: se.TPSize, ppSize: se.PPSize, sizeSrc: se.TopologySource,
		draining: se.Draining, created: se.Created, lastRegister: now,
		workers: make(map[workerKey]*worker, len(se.Workers)),
	}
	for _, sw := range se.Workers {
		dial, err := dialAddr(sw.Addr)
		if err != nil {
			return nil, fmt.Errorf("bootstrap: snapshot engine %q: %w", se.EngineID, err)
		}
		e.workers[workerKey{sw.TP, sw.PP}] = &worker{
			addr: sw.Addr, dial: dial, source: sw.Source,
			registeredAt: sw.RegisteredAt, state: workerUnverified,
		}
	}
	s.cur = e
	return s, nil
}
