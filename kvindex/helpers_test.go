package kvindex

import (
	"slices"
	"testing"
	"time"
)

const bs = 4 // block size of the small tests

// newTestIndex is an Index with small bounds, failing the test on a bad config.
func newTestIndex(t testing.TB, cfg Config) *Index {
	t.Helper()
	if cfg.MaxBlocks == 0 {
		cfg.MaxBlocks = 4096
	}
	if cfg.DefaultBlockSize == 0 {
		cfg.DefaultBlockSize = bs
	}
	ix, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// seq returns n token ids from start: start, start+1, ...
func seq(start, n int) []int64 {
	t := make([]int64, n)
	for i := range t {
		t[i] = int64(start + i)
	}
	return t
}

// cat joins token slices.
func cat(parts ...[]int64) []int64 { return slices.Concat(parts...) }

// ev is a BlockStored of block size bs over toks, hashes h0, h0+1, ..., under parent
// (0: a root).
func ev(parent uint64, h0 uint64, toks []int64) *Stored {
	s := &Stored{Tokens: toks, BlockSize: bs, Parent: parent, HasParent: parent != 0}
	for i := 0; i < len(toks)/bs; i++ {
		s.Hashes = append(s.Hashes, h0+uint64(i))
	}
	return s
}

// prompt is a Query over toks with no salt, LoRA or multimodal stop.
func prompt(toks []int64) *Query { return &Query{Tokens: toks, StopAt: -1} }

// lookup returns the index's matches as rank → Match.
func lookup(ix *Index, q *Query) map[int]Match {
	got := map[int]Match{}
	for _, m := range ix.Lookup(q, nil) {
		got[m.Rank] = m
	}
	return got
}

// cached returns the cached tokens per rank (ranks with none left out).
func cached(ix *Index, q *Query) map[int]int {
	got := map[int]int{}
	for r, m := range lookup(ix, q) {
		if m.CachedTokens > 0 {
			got[r] = m.CachedTokens
		}
	}
	return got
}

var sec = int64(time.Second)
