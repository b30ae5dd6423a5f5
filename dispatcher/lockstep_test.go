package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/switchyard-llm/switchyard/wire"
)

// TestLockstepGroupSteps feeds injected up/down events to a 3-rank group and
// checks each change and the state after it.
func TestLockstepGroupSteps(t *testing.T) {
	type ev struct {
		up   bool
		rank int
	}
	up := func(r int) ev { return ev{true, r} }
	down := func(r int) ev { return ev{false, r} }
	tests := []struct {
		name     string
		evs      []ev
		wChanges []GroupChange
		wBroken  bool
		wDead    int
		wMissing []int
	}{
		{"forming", []ev{up(0), up(1)}, []GroupChange{0, 0}, false, 0, []int{2}},
		{"whole", []ev{up(0), up(1), up(2)}, []GroupChange{0, 0, 0}, false, 0, nil},
		{"a rank dies", []ev{up(0), up(1), up(2), down(1)}, []GroupChange{0, 0, 0, GroupBroke}, true, 1, []int{1}},
		{"a second death keeps the first cause", []ev{up(0), up(1), up(2), down(1), down(2)},
			[]GroupChange{0, 0, 0, GroupBroke, 0}, true, 1, []int{1, 2}},
		{"restart makes it whole", []ev{up(0), up(1), up(2), down(1), up(1)},
			[]GroupChange{0, 0, 0, GroupBroke, GroupWhole}, false, 1, nil},
		{"whole only when every rank is back", []ev{up(0), up(1), up(2), down(1), down(2), up(1), up(2)},
			[]GroupChange{0, 0, 0, GroupBroke, 0, 0, GroupWhole}, false, 1, nil},
		{"loss while forming breaks too", []ev{up(0), down(0)}, []GroupChange{0, GroupBroke}, true, 0, []int{0, 1, 2}},
		{"duplicate and foreign events are ignored", []ev{up(0), up(0), down(5), up(7), down(2)},
			[]GroupChange{0, 0, 0, 0, 0}, false, 0, []int{1, 2}},
		{"breaks again after healing", []ev{up(0), up(1), up(2), down(0), up(0), down(2)},
			[]GroupChange{0, 0, 0, GroupBroke, GroupWhole, GroupBroke}, true, 2, []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewLockstepGroup(3)
			var got []GroupChange
			for _, e := range tt.evs {
				if e.up {
					got = append(got, g.RankUp(e.rank))
				} else {
					got = append(got, g.RankDown(e.rank))
				}
			}
			if d := cmp.Diff(tt.wChanges, got); d != "" {
				t.Errorf("changes (-want +got):\n%s", d)
			}
			dead, broken := g.Broken()
			if broken != tt.wBroken || (broken && dead != tt.wDead) {
				t.Errorf("Broken() = %d, %v; want %d, %v", dead, broken, tt.wDead, tt.wBroken)
			}
			if d := cmp.Diff(tt.wMissing, g.Missing()); d != "" {
				t.Errorf("Missing (-want +got):\n%s", d)
			}
		})
	}
}

// TestGroupBreakFailsEveryRankAndHeals: a dead rank fails the requests of the
// survivors at once with *GroupBrokenError (aborted there), refuses new ones,
// shows group_broken, and the group serves again once the rank rejoins.
func TestGroupBreakFailsEveryRankAndHeals(t *testing.T) {
	h := newHarness(t, Config{LockstepRanks: 3}, 0, 1, 2)
	var streams []*Stream
	for i := range 6 {
		s, err := h.d.Submit(context.Background(), pinned(fmt.Sprint("r", i), int64(i%3)))
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	var cbErr error
	if _, err := h.d.SubmitFunc(pinned("cb", 2), func(_ int, _ *wire.EngineCoreOutput, err error) { cbErr = err }); err != nil {
		t.Fatal(err)
	}
	h.d.EngineDown(1, errors.New("output EOF"))

	for i, s := range streams {
		_, err := recvAll(t, s)
		var ge *GroupBrokenError
		var down *EngineDownError
		switch {
		case i%3 == 1 && !errors.As(err, &down):
			t.Errorf("r%d on the dead rank: %v, want *EngineDownError", i, err)
		case i%3 != 1 && (!errors.As(err, &ge) || ge.DeadRank != 1):
			t.Errorf("r%d on a survivor: %v, want *GroupBrokenError naming rank 1", i, err)
		}
	}
	var ge *GroupBrokenError
	if !errors.As(cbErr, &ge) {
		t.Errorf("callback: %v", cbErr)
	}
	if want := "lockstep group of 3 ranks is broken: rank 1 died (output EOF); waiting for ranks [1] to rejoin"; ge == nil || ge.Error() != want {
		t.Errorf("message %v, want %q", ge, want)
	}
	// The survivors' requests are aborted there; nothing is sent to the dead rank.
	aborted := map[string]int{}
	deadline := time.After(5 * time.Second)
	for len(aborted) < 5 {
		select {
		case fr := <-h.s.ch:
			if fr.typ == wire.RequestAbort {
				for _, id := range fr.ids {
					aborted[id] = fr.rank
				}
			}
		case <-deadline:
			t.Fatalf("aborts: %v", aborted)
		}
	}
	if d := cmp.Diff(map[string]int{"r0": 0, "r2": 2, "r3": 0, "r5": 2, "cb": 2}, aborted); d != "" {
		t.Errorf("aborts (-want +got):\n%s", d)
	}

	for _, req := range []*wire.EngineCoreRequest{mkReq("new"), pinned("new0", 0)} {
		if _, err := h.d.Submit(context.Background(), req); !errors.As(err, &ge) {
			t.Errorf("%s while broken: %v, want *GroupBrokenError", req.RequestID, err)
		}
	}
	st := h.d.Engines()
	if st[0].State != EngineStateGroupBroken || st[1].State != EngineStateDown || st[2].State != EngineStateGroupBroken {
		t.Errorf("Engines() = %+v", st)
	}
	if g, ok := h.d.Group(); !ok || !g.Broken || g.DeadRank != 1 {
		t.Errorf("Group() = %+v, %v", g, ok)
	}
	if got := testutil.ToFloat64(h.d.grp.m.groupFailed); got != 5 {
		t.Errorf("failed by the break: %v, want 5", got)
	}
	if got := testutil.ToFloat64(h.d.grp.m.groupBroken); got != 1 {
		t.Errorf("broken gauge %v", got)
	}

	h.d.EngineUp(1)
	if g, _ := h.d.Group(); g.Broken {
		t.Errorf("still broken after the rank rejoined: %+v", g)
	}
	for i := range 3 {
		s, err := h.d.Submit(context.Background(), pinned(fmt.Sprint("after", i), int64(i)))
		if err != nil {
			t.Fatalf("after rejoin: %v", err)
		}
		h.d.HandleOutputs(i, batch(i, finOut(s.ID(), wire.FinishStop, 5)))
		if _, err := recvAll(t, s); err != nil {
			t.Errorf("after rejoin: %v", err)
		}
	}
	if st := h.d.Engines(); st[0].State != EngineStateUp || st[1].State != EngineStateUp {
		t.Errorf("Engines() after heal = %+v", st)
	}
}

// TestNoGroupMeansIsolation: without LockstepRanks a death stays the dead rank's.
func TestNoGroupMeansIsolation(t *testing.T) {
	h := newHarness(t, Config{}, 0, 1)
	h.d.EngineDown(1, errors.New("gone"))
	if _, err := h.d.Submit(context.Background(), mkReq("x")); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.d.Group(); ok {
		t.Error("Group() reports a group without LockstepRanks")
	}
}

// TestDrainEngine: a draining rank gets no new requests, its in-flight ones
// finish there, pinned ones are refused, undrain brings it back.
func TestDrainEngine(t *testing.T) {
	h := newHarness(t, Config{Policy: PolicyRoundRobin}, 0, 1)
	inflight, err := h.d.Submit(context.Background(), pinned("old", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.d.DrainEngine(1); err != nil {
		t.Fatal(err)
	}
	var unknown *UnknownRankError
	if err := h.d.DrainEngine(9); !errors.As(err, &unknown) {
		t.Errorf("DrainEngine(9) = %v", err)
	}
	for i := range 6 {
		s, err := h.d.Submit(context.Background(), mkReq(fmt.Sprint("n", i)))
		if err != nil || s.Rank() != 0 {
			t.Fatalf("while draining: %v, %v; want rank 0", s, err)
		}
	}
	var dr *EngineDrainingError
	if _, err := h.d.Submit(context.Background(), pinned("p", 1)); !errors.As(err, &dr) || dr.Rank != 1 {
		t.Errorf("pinned to a draining rank: %v", err)
	}
	st := h.d.Engines()[1]
	if st.State != EngineStateDraining || !st.Draining || st.InFlight != 1 {
		t.Errorf("Engines()[1] = %+v", st)
	}
	h.d.HandleOutputs(1, batch(1, finOut("old", wire.FinishStop, 7)))
	if _, err := recvAll(t, inflight); err != nil {
		t.Errorf("in-flight request on the draining rank: %v", err)
	}
	if st := h.d.Engines()[1]; st.InFlight != 0 || st.State != EngineStateDraining {
		t.Errorf("drained: %+v", st)
	}
	// A restart keeps the mark: the operator undrains when ready.
	h.d.EngineDown(1, errors.New("restart"))
	h.d.EngineUp(1)
	if st := h.d.Engines()[1]; st.State != EngineStateDraining {
		t.Errorf("after restart: %+v", st)
	}
	if err := h.d.UndrainEngine(1); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for i := range 4 {
		s, err := h.d.Submit(context.Background(), mkReq(fmt.Sprint("u", i)))
		if err != nil {
			t.Fatal(err)
		}
		seen[s.Rank()] = true
	}
	if !seen[1] {
		t.Error("undrained rank got no requests")
	}
	if got := testutil.ToFloat64(h.d.grp.m.drains.WithLabelValues("drain")); got != 1 {
		t.Errorf("drains %v", got)
	}
}
