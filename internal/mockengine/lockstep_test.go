package mockengine

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"
)

// waitWhole polls l.whole until it equals want or 5 s pass.
func waitWhole(t *testing.T, l *lockstep, want bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for l.whole() != want {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("rank %d: whole() stayed %v", l.rank, !want)
		}
	}
}

// A rank of a lockstep group steps only while every rank is alive: losing one
// blocks the others until it is back.
func TestLockstepNeedsEveryRank(t *testing.T) {
	dir, err := os.MkdirTemp("", "ls") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	var ls [3]*lockstep
	for r := range 2 {
		if ls[r], err = startLockstep(ctx, dir, r, 3, log); err != nil {
			t.Fatal(err)
		}
		defer func() { ls[r].close() }()
	}
	if ls[0].whole() || ls[1].whole() {
		t.Fatal("whole before rank 2 started")
	}
	if ls[2], err = startLockstep(ctx, dir, 2, 3, log); err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		waitWhole(t, l, true)
	}
	ls[1].close() // rank 1 dies
	waitWhole(t, ls[0], false)
	waitWhole(t, ls[2], false)
	if ls[1], err = startLockstep(ctx, dir, 1, 3, log); err != nil { // and restarts
		t.Fatal(err)
	}
	defer ls[2].close()
	for _, l := range ls {
		waitWhole(t, l, true)
	}
}
