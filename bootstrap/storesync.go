package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// storeTimeout bounds one change (its commits and reloads) and the load at
// start: a registration waits for it, and the vLLM client gives up after
// 30 s. It is several etcd leader elections long.
const storeTimeout = 15 * time.Second

// change runs fn on the registry under s.mu. Without a Store that is all.
// With one, the dp ranks fn changed are committed before change returns
// (so an answered registration is in the store), and when another frontend
// committed first the registry is reloaded and fn decided again on the new
// state. fn must leave the registry unchanged when it returns an error.
func (s *Server) change(ctx context.Context, fn func(now time.Time) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Store == nil {
		return fn(s.now())
	}
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	for range maxStoreRetries {
		if err := fn(s.now()); err != nil {
			return err
		}
		changes := s.reg.takeChanges()
		if len(changes) == 0 {
			return nil
		}
		recs := make([]StoreRecord, 0, len(changes))
		for _, c := range changes {
			rec := StoreRecord{DP: c.DP}
			if !c.Removed {
				b, err := json.Marshal(c)
				if err != nil {
					return fmt.Errorf("bootstrap: encode dp rank %d: %w", c.DP, err)
				}
				rec.Data = b
			}
			recs = append(recs, rec)
		}
		rev, err := s.cfg.Store.Commit(ctx, s.storeRev, recs)
		if err == nil {
			s.storeRev = rev
			return nil
		}
		// fn's change is only in memory: replace it with the store's state
		// and decide again on that. A commit that failed without an answer
		// (an etcd leader election) may have landed: the reload shows it,
		// and fn then finds its own change already there.
		if lerr := s.reloadLocked(ctx); lerr != nil {
			return fmt.Errorf("bootstrap: store: %w (and reload: %v)", err, lerr)
		}
		if errors.Is(err, ErrStoreConflict) {
			s.metrics.storeConflicts.Inc()
		} else {
			s.log.Warn("registry commit failed; retrying on the reloaded state", "err", err)
		}
	}
	return fmt.Errorf("bootstrap: store: no commit after %d attempts", maxStoreRetries)
}

// reloadLocked replaces the registry's records with the store's; s.mu held.
// It retries until ctx ends.
func (s *Server) reloadLocked(ctx context.Context) error {
	var (
		st  StoreState
		err error
	)
	for {
		// Short attempts: a read stuck on a lost etcd member would hold
		// s.mu, and every /query, for the server's whole timeout.
		lctx, cancel := context.WithTimeout(ctx, commitAttempt)
		st, err = s.cfg.Store.Load(lctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	st.Full = true
	return s.applyStoreLocked(st, false)
}

// loadStore fills the registry from the store at start. Like a snapshot's,
// its workers are unverified until the first probe sweep (run at start).
func (s *Server) loadStore(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	st, err := s.cfg.Store.Load(lctx)
	if err != nil {
		return fmt.Errorf("bootstrap: load registry from the store: %w", err)
	}
	st.Full = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.applyStoreLocked(st, true); err != nil {
		return err
	}
	s.log.Info("loaded registry from the store; engines stay hidden until probed", "dp_ranks", len(st.Records), "revision", st.Rev)
	return nil
}

// headTimeout bounds the freshness check before a read: an unreachable
// store makes the frontend answer from what it holds rather than stall.
const headTimeout = time.Second

// freshen makes a read see every change committed before it started, through
// any frontend: the watch applies them within milliseconds, but "a
// registration through one frontend is visible through the others" must
// hold at once (a decode may query B right after a prefill registered at A).
// It costs one linearizable etcd read per query; decodes query once per
// remote engine they meet.
func (s *Server) freshen(ctx context.Context) {
	if s.cfg.Store == nil {
		return
	}
	hctx, cancel := context.WithTimeout(ctx, headTimeout)
	head, err := s.cfg.Store.Head(hctx)
	cancel()
	if err != nil {
		s.log.Debug("store unreachable; answering from the registry held", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if head <= s.storeRev {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, headTimeout)
	defer cancel()
	if err := s.reloadLocked(rctx); err != nil {
		s.log.Debug("store reload failed; answering from the registry held", "err", err)
	}
}

// watchStore applies what other frontends commit until ctx ends.
func (s *Server) watchStore(ctx context.Context) {
	s.mu.Lock()
	rev := s.storeRev
	s.mu.Unlock()
	s.cfg.Store.Watch(ctx, rev, func(st StoreState) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !st.Full && st.Rev <= s.storeRev {
			return // our own commit, or one a reload already brought in
		}
		if err := s.applyStoreLocked(st, false); err != nil {
			s.log.Error("cannot apply a registry change from the store", "revision", st.Rev, "err", err)
		}
	})
}

// applyStoreLocked brings records into the registry. A worker whose address
// did not change keeps the liveness this frontend knows; a new one is live
// when it arrives through the watch (another frontend has just accepted its
// registration, and vLLM binds before it registers) and unverified at start.
func (s *Server) applyStoreLocked(st StoreState, atStart bool) error {
	now := s.now()
	seen := make(map[int]bool, len(st.Records))
	for _, rec := range st.Records {
		seen[rec.DP] = true
		if rec.Data == nil {
			delete(s.reg.slots, rec.DP)
			continue
		}
		var ss snapshotSlot
		if err := json.Unmarshal(rec.Data, &ss); err != nil {
			return fmt.Errorf("bootstrap: store record of dp rank %d: %w", rec.DP, err)
		}
		if ss.Removed {
			delete(s.reg.slots, rec.DP)
			continue
		}
		ns, err := restoreSlot(now, ss)
		if err != nil {
			return err
		}
		s.reg.merge(now, ns, !atStart)
	}
	if st.Full {
		for dp := range s.reg.slots {
			if !seen[dp] {
				delete(s.reg.slots, dp)
			}
		}
	}
	s.reg.rev++
	if st.Rev > s.storeRev || st.Full {
		s.storeRev = st.Rev
	}
	return nil
}

// merge installs a dp rank read from the store over the one held, keeping
// what the store does not hold: worker liveness and retired engines.
func (r *Registry) merge(now time.Time, ns *slot, freshLive bool) {
	old := r.slots[ns.dp]
	r.slots[ns.dp] = ns
	if old == nil {
		if ns.cur != nil && freshLive {
			for _, w := range ns.cur.workers {
				w.state, w.lastOK = workerLive, now
			}
		}
		return
	}
	ns.past = old.past
	if old.cur != nil && (ns.cur == nil || ns.cur.id != old.cur.id) {
		why := "deleted through another frontend"
		if ns.cur != nil {
			why = "replaced by " + ns.cur.id
		}
		old.cur.retiredAt, old.cur.retiredWhy = now, why
		ns.past = append(ns.past, old.cur)
		if len(ns.past) > maxRetiredPerSlot {
			ns.past = ns.past[len(ns.past)-maxRetiredPerSlot:]
		}
	}
	if ns.cur == nil {
		return
	}
	for k, w := range ns.cur.workers {
		var ow *worker
		if old.cur != nil && old.cur.id == ns.cur.id {
			ow = old.cur.workers[k]
		}
		switch {
		case ow != nil && ow.addr == w.addr:
			w.state, w.failures, w.lastProbe, w.lastOK = ow.state, ow.failures, ow.lastProbe, ow.lastOK
		case freshLive:
			w.state, w.lastOK = workerLive, now
		}
	}
	if old.cur != nil && old.cur.id == ns.cur.id {
		ns.cur.lastRegister = old.cur.lastRegister
		if !old.cur.deadSince.IsZero() {
			ns.cur.deadSince = old.cur.deadSince
		}
	}
	r.updateDead(now, ns.cur)
}
