package kvindex

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPendingMarks(t *testing.T) {
	sys, user := seq(100, 8), seq(500, 4)
	full := cat(sys, user)
	at := func(now int64) *Query { return &Query{Tokens: full, StopAt: -1, Now: now} }
	ttl := 10 * sec
	tests := []struct {
		name string
		run  func(ix *Index) *Query
		want map[int]Match
	}{
		{"a mark shows as pending", func(ix *Index) *Query {
			ix.MarkPending(2, prompt(full), 0)
			return at(1)
		}, map[int]Match{2: {Rank: 2, PendingTokens: 12}}},
		{"pending beyond what is cached", func(ix *Index) *Query {
			ix.Store(2, ev(0, 10, sys))
			ix.MarkPending(2, prompt(full), 0)
			return at(1)
		}, map[int]Match{2: {Rank: 2, CachedTokens: 8, PendingTokens: 4}}},
		{"cached on one rank, pending on another", func(ix *Index) *Query {
			ix.Store(0, ev(0, 10, sys))
			ix.MarkPending(1, prompt(full), 0)
			return at(1)
		}, map[int]Match{0: {Rank: 0, CachedTokens: 8}, 1: {Rank: 1, PendingTokens: 12}}},
		{"expired at the deadline", func(ix *Index) *Query {
			ix.MarkPending(2, prompt(full), 0)
			return at(ttl)
		}, map[int]Match{}},
		{"a Store of the content releases the mark", func(ix *Index) *Query {
			ix.MarkPending(2, prompt(full), 0)
			ix.Store(2, ev(0, 10, sys))
			return at(1)
		}, map[int]Match{2: {Rank: 2, CachedTokens: 8, PendingTokens: 4}}},
		{"a Store on another rank does not", func(ix *Index) *Query {
			ix.MarkPending(2, prompt(full), 0)
			ix.Store(3, ev(0, 10, full))
			return at(1)
		}, map[int]Match{2: {Rank: 2, PendingTokens: 12}, 3: {Rank: 3, CachedTokens: 12}}},
		{"marking again refreshes the deadline", func(ix *Index) *Query {
			ix.MarkPending(2, prompt(full), 0)
			ix.MarkPending(2, prompt(full), 5*sec)
			ix.Expire(ttl) // the first marks leave the FIFO; the refreshed pairs stay
			return at(ttl + 1)
		}, map[int]Match{2: {Rank: 2, PendingTokens: 12}}},
		{"the multimodal stop bounds the marks", func(ix *Index) *Query {
			ix.MarkPending(2, &Query{Tokens: full, StopAt: 5}, 0)
			return at(1)
		}, map[int]Match{2: {Rank: 2, PendingTokens: 4}}},
		{"the rank's block size keys the marks", func(ix *Index) *Query {
			s := ev(0, 10, sys)
			s.BlockSize, s.Hashes = 8, s.Hashes[:1]
			ix.Store(2, s) // rank 2 uses 8-token blocks
			ix.MarkPending(2, prompt(cat(sys, seq(500, 8))), 0)
			return &Query{Tokens: cat(sys, seq(500, 8)), StopAt: -1, Now: 1}
		}, map[int]Match{2: {Rank: 2, CachedTokens: 8, PendingTokens: 8}}},
		{"a LoRA prompt's marks are its own", func(ix *Index) *Query {
			ix.MarkPending(2, &Query{Tokens: full, StopAt: -1, LoRAName: "a"}, 0)
			return at(1)
		}, map[int]Match{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newTestIndex(t, Config{PendingTTL: time.Duration(ttl)})
			q := tt.run(ix)
			if diff := cmp.Diff(tt.want, lookup(ix, q)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPendingReleasedThenExpiredFreesAll(t *testing.T) {
	ix := newTestIndex(t, Config{PendingTTL: time.Second})
	toks := seq(1, 8)
	ix.MarkPending(0, prompt(toks), 0)
	ix.MarkPending(1, prompt(toks), 0)
	if ix.slotsInUse() != 2 || ix.Pending() != 4 {
		t.Fatalf("slots %d, marks %d", ix.slotsInUse(), ix.Pending())
	}
	ix.Store(0, ev(0, 10, toks))
	ix.Clear(0)
	if n := ix.Expire(sec); n != 4 {
		t.Errorf("Expire = %d, want 4", n)
	}
	if ix.slotsInUse() != 0 || ix.Pending() != 0 || len(ix.aux) > 1 && ix.auxFree == 0 {
		t.Errorf("left: slots %d, marks %d", ix.slotsInUse(), ix.Pending())
	}
}

func TestPendingCapDropsOldest(t *testing.T) {
	ix := newTestIndex(t, Config{MaxPending: 4, PendingTTL: time.Hour})
	a, b := seq(1, 8), seq(100, 12)
	ix.MarkPending(0, prompt(a), 0) // 2 marks
	ix.MarkPending(1, prompt(b), 1) // 3 marks: a's first block goes
	if ix.Pending() != 4 {
		t.Fatalf("marks = %d, want the cap 4", ix.Pending())
	}
	// a's first mark is gone, so its chain matches nothing on rank 0.
	if got := lookup(ix, &Query{Tokens: a, StopAt: -1, Now: 2}); len(got) != 0 {
		t.Errorf("a: %v, want nothing", got)
	}
	want := map[int]Match{1: {Rank: 1, PendingTokens: 12}}
	if diff := cmp.Diff(want, lookup(ix, &Query{Tokens: b, StopAt: -1, Now: 2})); diff != "" {
		t.Errorf("b (-want +got):\n%s", diff)
	}
	if ix.slotsInUse() != 4 {
		t.Errorf("slots = %d, want 4 (one of a's, three of b's)", ix.slotsInUse())
	}
}

func TestPendingBadRank(t *testing.T) {
	ix := newTestIndex(t, Config{MaxRanks: 2})
	ix.MarkPending(2, prompt(seq(1, 8)), 0)
	ix.MarkPending(-1, prompt(seq(1, 8)), 0)
	if ix.Pending() != 0 {
		t.Errorf("marks = %d", ix.Pending())
	}
}
