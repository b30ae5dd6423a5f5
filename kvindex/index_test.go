package kvindex

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStoreAndLookup(t *testing.T) {
	sys := seq(100, 8)  // two blocks every prompt shares
	user := seq(500, 8) // two more blocks
	tests := []struct {
		name   string
		events func(ix *Index)
		query  []int64
		want   map[int]int
	}{
		{"empty index", func(ix *Index) {}, cat(sys, user), map[int]int{}},
		{"root chain", func(ix *Index) {
			ix.Store(0, ev(0, 10, sys))
		}, cat(sys, user), map[int]int{0: 8}},
		{"chain across two events", func(ix *Index) {
			ix.Store(0, ev(0, 10, sys))
			ix.Store(0, ev(11, 20, user))
		}, cat(sys, user), map[int]int{0: 16}},
		{"two ranks, different depths", func(ix *Index) {
			ix.Store(0, ev(0, 10, sys))
			ix.Store(1, ev(0, 10, sys)) // the same vLLM hashes on another rank
			ix.Store(1, ev(11, 20, user))
		}, cat(sys, user), map[int]int{0: 8, 1: 16}},
		{"partial last block does not count", func(ix *Index) {
			ix.Store(0, ev(0, 10, sys))
		}, sys[:7], map[int]int{0: 4}},
		{"a different first token misses all", func(ix *Index) {
			ix.Store(0, ev(0, 10, sys))
		}, cat([]int64{9}, sys[1:]), map[int]int{}},
		{"same tokens under another parent do not match", func(ix *Index) {
			ix.Store(0, ev(0, 30, user)) // user blocks as a root
		}, cat(sys, user), map[int]int{}},
		{"block sizes do not mix", func(ix *Index) {
			s := ev(0, 10, sys)
			s.BlockSize, s.Hashes = 8, s.Hashes[:1]
			ix.Store(0, s)
		}, sys, map[int]int{0: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newTestIndex(t, Config{})
			tt.events(ix)
			if diff := cmp.Diff(tt.want, cached(ix, prompt(tt.query))); diff != "" {
				t.Errorf("cached tokens per rank (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStoreResults(t *testing.T) {
	ix := newTestIndex(t, Config{MaxRanks: 8})
	good := ev(0, 10, seq(1, 8))
	tests := []struct {
		name string
		rank int
		s    *Stored
		want StoreResult
	}{
		{"stored", 0, good, StoreResult{Stored: 2}},
		{"refreshed, not duplicated", 0, good, StoreResult{Stored: 2}},
		{"unknown parent skipped", 0, ev(999, 50, seq(9, 8)), StoreResult{UnknownParent: 2}},
		{"parent known on another rank only", 1, ev(11, 60, seq(9, 4)), StoreResult{UnknownParent: 1}},
		{"token count not blocks × size", 0, &Stored{Hashes: []uint64{1, 2}, Tokens: seq(1, 7), BlockSize: 4}, StoreResult{Invalid: 2}},
		{"extra count not one per block", 0, &Stored{Hashes: []uint64{1}, Tokens: seq(1, 4), BlockSize: 4, Extra: [][]byte{nil, nil}}, StoreResult{Invalid: 1}},
		{"block size zero", 0, &Stored{Hashes: []uint64{1}, BlockSize: 0}, StoreResult{Invalid: 1}},
		{"block size past MaxBlockSize", 0, &Stored{Hashes: []uint64{1}, Tokens: seq(1, 5000), BlockSize: 5000}, StoreResult{Invalid: 1}},
		{"rank past MaxRanks", 8, good, StoreResult{Invalid: 2}},
		{"negative rank", -1, good, StoreResult{Invalid: 2}},
		{"no hashes", 0, &Stored{BlockSize: 4}, StoreResult{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ix.Store(tt.rank, tt.s); got != tt.want {
				t.Errorf("Store = %+v, want %+v", got, tt.want)
			}
		})
	}
	if ix.Blocks(0) != 2 || ix.Len() != 2 {
		t.Errorf("Blocks(0) = %d, Len = %d, want 2 and 2", ix.Blocks(0), ix.Len())
	}
}

func TestRemoveByVLLMHash(t *testing.T) {
	toks := seq(1, 16) // four blocks, hashes 10..13
	tests := []struct {
		name   string
		remove []uint64
		wantN  int
		want   map[int]int
	}{
		{"nothing", nil, 0, map[int]int{0: 16, 1: 16}},
		{"the tail", []uint64{13}, 1, map[int]int{0: 12, 1: 16}},
		{"a middle block cuts the chain there", []uint64{11}, 1, map[int]int{0: 4, 1: 16}},
		{"the root", []uint64{10}, 1, map[int]int{1: 16}},
		{"unknown hashes are ignored", []uint64{77, 12}, 1, map[int]int{0: 8, 1: 16}},
		{"all", []uint64{10, 11, 12, 13}, 4, map[int]int{1: 16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newTestIndex(t, Config{})
			ix.Store(0, ev(0, 10, toks))
			ix.Store(1, ev(0, 10, toks))
			if n := ix.Remove(0, tt.remove); n != tt.wantN {
				t.Errorf("Remove = %d, want %d", n, tt.wantN)
			}
			if diff := cmp.Diff(tt.want, cached(ix, prompt(toks))); diff != "" {
				t.Errorf("after Remove (-want +got):\n%s", diff)
			}
			if got := ix.Blocks(0); got != 4-tt.wantN {
				t.Errorf("Blocks(0) = %d, want %d", got, 4-tt.wantN)
			}
		})
	}
}

func TestRemovedChildCanBeStoredAgain(t *testing.T) {
	ix := newTestIndex(t, Config{})
	ix.Store(0, ev(0, 10, seq(1, 8)))
	ix.Remove(0, []uint64{11})
	if r := ix.Store(0, ev(10, 11, seq(5, 4))); r.Stored != 1 {
		t.Fatalf("re-store = %+v", r)
	}
	if got := cached(ix, prompt(seq(1, 8))); got[0] != 8 {
		t.Errorf("cached = %v, want rank 0 at 8", got)
	}
	// Once the parent is gone, its children's events are skipped.
	ix.Remove(0, []uint64{10, 11})
	if r := ix.Store(0, ev(10, 11, seq(5, 4))); r.UnknownParent != 1 {
		t.Errorf("store under a removed parent = %+v, want UnknownParent 1", r)
	}
}

func TestClear(t *testing.T) {
	ix := newTestIndex(t, Config{})
	toks := seq(1, 12)
	ix.Store(0, ev(0, 10, toks))
	ix.Store(1, ev(0, 10, toks))
	ix.Clear(0)
	ix.Clear(7)  // a rank never seen
	ix.Clear(-1) // out of range
	if diff := cmp.Diff(map[int]int{1: 12}, cached(ix, prompt(toks))); diff != "" {
		t.Errorf("after Clear(0) (-want +got):\n%s", diff)
	}
	if ix.Blocks(0) != 0 || ix.Len() != 3 {
		t.Errorf("Blocks(0) = %d, Len = %d, want 0 and 3", ix.Blocks(0), ix.Len())
	}
	// The rank's hashes are gone: a child of a cleared block has an unknown parent.
	if r := ix.Store(0, ev(12, 20, seq(13, 4))); r.UnknownParent != 1 {
		t.Errorf("child after Clear = %+v", r)
	}
	ix.Store(0, ev(0, 10, toks))
	if got := cached(ix, prompt(toks)); got[0] != 12 {
		t.Errorf("re-stored after Clear: %v", got)
	}
}

func TestRebindAndDuplicates(t *testing.T) {
	t.Run("a hash that names other content is rebound", func(t *testing.T) {
		ix := newTestIndex(t, Config{})
		ix.Store(0, ev(0, 10, seq(1, 4)))
		ix.Store(0, ev(0, 10, seq(50, 4)))
		if got := cached(ix, prompt(seq(1, 4))); len(got) != 0 {
			t.Errorf("old content still cached: %v", got)
		}
		if got := cached(ix, prompt(seq(50, 4))); got[0] != 4 || ix.Blocks(0) != 1 {
			t.Errorf("new content: %v, Blocks %d", got, ix.Blocks(0))
		}
	})
	t.Run("two hashes for one content keep it until both go", func(t *testing.T) {
		// A salt unseen before v0.18 gives one content two vLLM hashes on a rank.
		ix := newTestIndex(t, Config{})
		ix.Store(0, ev(0, 10, seq(1, 4)))
		ix.Store(0, ev(0, 20, seq(1, 4)))
		if ix.Blocks(0) != 2 {
			t.Fatalf("Blocks = %d, want 2", ix.Blocks(0))
		}
		ix.Remove(0, []uint64{10})
		if got := cached(ix, prompt(seq(1, 4))); got[0] != 4 {
			t.Errorf("after removing one of two: %v", got)
		}
		ix.Remove(0, []uint64{20})
		if got := cached(ix, prompt(seq(1, 4))); len(got) != 0 || ix.Len() != 0 {
			t.Errorf("after removing both: %v, Len %d", got, ix.Len())
		}
		if len(ix.dups) != 0 {
			t.Errorf("dups left: %v", ix.dups)
		}
	})
}

func TestGlobalCapEvictsLargestRankOldestFirst(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBlocks: 6})
	a, b, c := seq(1, 8), seq(100, 8), seq(200, 8)
	ix.Store(0, ev(0, 10, a)) // rank 0: a0 a1
	ix.Store(0, ev(0, 20, b)) // rank 0: b0 b1
	ix.Store(1, ev(0, 10, c)) // rank 1: c0 c1; 6 entries
	r := ix.Store(1, ev(11, 30, seq(300, 4)))
	if r.Evicted != 1 {
		t.Fatalf("Store past the cap = %+v, want 1 evicted", r)
	}
	// Rank 0 held the most; its oldest entry is chain a's tail (a chain is stored
	// tail first, so its head stays the most recent).
	want := map[int]int{0: 4}
	if diff := cmp.Diff(want, cached(ix, prompt(a))); diff != "" {
		t.Errorf("chain a (-want +got):\n%s", diff)
	}
	if got := cached(ix, prompt(cat(c, seq(300, 4)))); got[1] != 12 {
		t.Errorf("rank 1: %v", got)
	}
	if ix.Len() != 6 {
		t.Errorf("Len = %d, want 6", ix.Len())
	}
}

func TestRefreshedChainIsNewest(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBlocks: 4})
	a, b := seq(1, 8), seq(100, 8)
	ix.Store(0, ev(0, 10, a))
	ix.Store(0, ev(0, 20, b))
	ix.Store(0, ev(0, 10, a)) // a again: refreshed, so b is now the oldest
	if r := ix.Store(0, ev(0, 30, seq(300, 4))); r.Evicted != 1 {
		t.Fatalf("Store past the cap = %+v", r)
	}
	if got := cached(ix, prompt(a)); got[0] != 8 {
		t.Errorf("refreshed chain a: %v", got)
	}
	if got := cached(ix, prompt(b)); got[0] != 4 {
		t.Errorf("chain b: %v, want its tail evicted", got)
	}
}

func TestManyRanks(t *testing.T) {
	ix := newTestIndex(t, Config{MaxRanks: 1024})
	toks := seq(1, 8)
	holders := []int{3, 63, 64, 700, 1023}
	for _, r := range holders {
		ix.Store(r, ev(0, 10, toks))
	}
	ix.Store(700, ev(11, 20, seq(9, 4)))
	want := map[int]int{3: 8, 63: 8, 64: 8, 700: 12, 1023: 8}
	if diff := cmp.Diff(want, cached(ix, prompt(cat(toks, seq(9, 4))))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	ix.Remove(64, []uint64{11})
	ix.Clear(3)
	delete(want, 3)
	want[64] = 4
	if diff := cmp.Diff(want, cached(ix, prompt(cat(toks, seq(9, 4))))); diff != "" {
		t.Errorf("after removals (-want +got):\n%s", diff)
	}
	for _, r := range holders {
		ix.Clear(r)
	}
	if ix.Len() != 0 || ix.slotsInUse() != 0 {
		t.Errorf("Len = %d, slots = %d after clearing all", ix.Len(), ix.slotsInUse())
	}
	// A single group outside group 0 needs no promotion.
	ix.Store(900, ev(0, 10, toks))
	if got := cached(ix, prompt(toks)); got[900] != 8 {
		t.Errorf("rank 900 alone: %v", got)
	}
}

func TestSeveralBlockSizes(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBlockSizes: 2})
	toks := seq(1, 32)
	s16 := &Stored{Hashes: []uint64{1, 2}, Tokens: toks, BlockSize: 16}
	s8 := &Stored{Hashes: []uint64{1, 2, 3}, Tokens: toks[:24], BlockSize: 8}
	ix.Store(0, s16)
	ix.Store(1, s8)
	want := map[int]int{0: 32, 1: 24}
	if diff := cmp.Diff(want, cached(ix, prompt(toks))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A third size is refused while two are in use, and accepted once one is free.
	s4 := &Stored{Hashes: []uint64{9}, Tokens: toks[:4], BlockSize: 4}
	if r := ix.Store(2, s4); r.Invalid != 1 {
		t.Errorf("third block size = %+v, want Invalid", r)
	}
	ix.Clear(1)
	if r := ix.Store(2, s4); r.Stored != 1 {
		t.Errorf("third block size after one freed = %+v", r)
	}
	if diff := cmp.Diff(map[int]int{0: 32, 2: 4}, cached(ix, prompt(toks))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string
	}{
		{"defaults", Config{}, ""},
		{"MaxBlocks too big", Config{MaxBlocks: 1 << 25}, "MaxBlocks"},
		{"MaxRanks negative", Config{MaxRanks: -1}, "MaxRanks"},
		{"MaxRanks too big", Config{MaxRanks: 1<<16 + 1}, "MaxRanks"},
		{"PendingTTL negative", Config{PendingTTL: -1}, "PendingTTL"},
		{"DefaultBlockSize past MaxBlockSize", Config{DefaultBlockSize: 64, MaxBlockSize: 32}, "DefaultBlockSize"},
		{"MaxBlockSizes too many", Config{MaxBlockSizes: 65}, "MaxBlockSizes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			var ce *ConfigError
			switch {
			case tt.field == "" && err != nil:
				t.Errorf("New = %v", err)
			case tt.field != "" && (!errors.As(err, &ce) || ce.Field != tt.field):
				t.Errorf("New = %v, want a ConfigError on %s", err, tt.field)
			}
		})
	}
}

// TestMemoryPerEntry guards the README's figure: the heap per (block, rank) entry of
// a full index of distinct blocks, tables included, stays within 64 bytes.
func TestMemoryPerEntry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 200,000 entries")
	}
	const entries = 200_000
	before := heapInUse()
	ix := newTestIndex(t, Config{MaxBlocks: entries, MaxPending: entries / 16, MaxRanks: 8})
	rng := rand.New(rand.NewPCG(5, 5))
	for r := 0; ix.Len() < entries; r = (r + 1) % 8 {
		storeChain(ix, rng, r, randToks(rng, 128*benchBlock), 0)
	}
	per := float64(heapInUse()-before) / float64(ix.Len())
	t.Logf("%.1f bytes per entry", per)
	if per > 64 {
		t.Errorf("%.1f bytes per (block, rank) entry, want at most 64", per)
	}
	runtime.KeepAlive(ix)
}
