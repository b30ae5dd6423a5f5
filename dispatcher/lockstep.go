package dispatcher

import "fmt"

// LockstepGroup is the state of one lockstep group: data-parallel ranks that run
// every forward pass as a collective (MoE data parallelism, --enable-wave-
// coordination). When one rank dies the others block in the collective, so the
// group is only as alive as its weakest rank: it breaks when a rank that was up
// goes down, and is whole again once every rank is up at the same time.
//
// It does no IO and reads no clock: the dispatcher steps it with RankUp and
// RankDown and acts on the GroupChange they return. It is not safe for
// concurrent use; the dispatcher holds its groupMu around every call.
type LockstepGroup struct {
	up     []bool
	nUp    int
	broken bool
	dead   int // the rank whose loss broke the group; valid while broken
}

// GroupChange is what one event did to a LockstepGroup.
type GroupChange uint8

// The changes.
const (
	GroupUnchanged GroupChange = iota
	// GroupBroke: a rank of a group that was serving went down; every
	// in-flight request of the group is lost and no new one can make progress.
	GroupBroke
	// GroupWhole: the last missing rank of a broken group came up.
	GroupWhole
)

func (c GroupChange) String() string {
	switch c {
	case GroupBroke:
		return "broke"
	case GroupWhole:
		return "whole"
	}
	return "unchanged"
}

// NewLockstepGroup returns the group of ranks 0..size-1, none of them up yet.
func NewLockstepGroup(size int) *LockstepGroup {
	return &LockstepGroup{up: make([]bool, size)}
}

// Size is the number of ranks in the group.
func (g *LockstepGroup) Size() int { return len(g.up) }

// Contains reports whether rank is a member.
func (g *LockstepGroup) Contains(rank int) bool { return rank >= 0 && rank < len(g.up) }

// Broken reports whether the group is broken and, if so, the rank whose loss
// broke it.
func (g *LockstepGroup) Broken() (dead int, broken bool) { return g.dead, g.broken }

// Missing lists the ranks that are not up, ascending.
func (g *LockstepGroup) Missing() []int {
	var out []int
	for r, up := range g.up {
		if !up {
			out = append(out, r)
		}
	}
	return out
}

// RankUp records that rank is connected and ready. A broken group whose every
// rank is up again is whole (a fresh group: the restarted rank re-handshook).
func (g *LockstepGroup) RankUp(rank int) GroupChange {
	if !g.Contains(rank) || g.up[rank] {
		return GroupUnchanged
	}
	g.up[rank] = true
	g.nUp++
	if g.broken && g.nUp == len(g.up) {
		g.broken = false
		return GroupWhole
	}
	return GroupUnchanged
}

// RankDown records that rank is gone. The first loss of a rank that was up
// breaks the group; later losses while it is broken change nothing (the
// group stays broken, naming the first rank lost).
func (g *LockstepGroup) RankDown(rank int) GroupChange {
	if !g.Contains(rank) || !g.up[rank] {
		return GroupUnchanged
	}
	g.up[rank] = false
	g.nUp--
	if g.broken {
		return GroupUnchanged
	}
	g.broken, g.dead = true, rank
	return GroupBroke
}

// GroupBrokenError is the Cause of every in-flight request of a lockstep group
// failed when one of its ranks died, and the refusal of a new request while the
// group is broken (the survivors are blocked in a collective with the dead rank,
// so nothing sent to them could finish).
type GroupBrokenError struct {
	DeadRank int   // the rank whose loss broke the group
	Size     int   // ranks in the group
	Missing  []int // ranks not up when the error was made
	Cause    error // why DeadRank went down
}

func (e *GroupBrokenError) Error() string {
	return fmt.Sprintf("lockstep group of %d ranks is broken: rank %d died (%v); waiting for ranks %s to rejoin",
		e.Size, e.DeadRank, e.Cause, formatRanks(e.Missing))
}

func (e *GroupBrokenError) Unwrap() error { return e.Cause }
