package kvindex

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoutedPrefixMode(t *testing.T) {
	sys := seq(100, 8)
	a, b, c := cat(sys, seq(1, 8)), cat(sys, seq(20, 8)), cat(sys, seq(40, 8))
	tests := []struct {
		name     string
		capacity int
		route    [][]int64 // routed to rank 0, in order
		query    []int64
		want     map[int]int
	}{
		{"routed prompt is indexed", 0, [][]int64{a}, a, map[int]int{0: 16}},
		{"shared prefix", 0, [][]int64{a}, b, map[int]int{0: 8}},
		{"partial block ignored", 0, [][]int64{a[:15]}, a, map[int]int{0: 12}},
		{"shared blocks are counted once", 6, [][]int64{a, b}, a, map[int]int{0: 16}},
		{"capacity keeps the newest", 4, [][]int64{a, b}, a, map[int]int{0: 8}},
		{"capacity: the newest whole", 4, [][]int64{a, b}, b, map[int]int{0: 16}},
		{"routing again refreshes", 4, [][]int64{a, b, a}, a, map[int]int{0: 16}},
		{"routing again refreshes, the other goes", 4, [][]int64{a, b, a}, b, map[int]int{0: 8}},
		{"the shared prefix outlives its branches", 4, [][]int64{a, b, c}, c, map[int]int{0: 16}},
		{"a prompt longer than the capacity keeps its head", 2, [][]int64{a}, a, map[int]int{0: 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := newTestIndex(t, Config{})
			for _, p := range tt.route {
				ix.Routed(0, prompt(p), tt.capacity, bs)
			}
			if diff := cmp.Diff(tt.want, cached(ix, prompt(tt.query))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.capacity > 0 && ix.Blocks(0) > tt.capacity {
				t.Errorf("Blocks = %d past capacity %d", ix.Blocks(0), tt.capacity)
			}
		})
	}
}

func TestRoutedBounds(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBlocks: 5, MaxRanks: 4})
	ix.Routed(0, prompt(seq(1, 16)), 0, bs)
	ix.Routed(1, prompt(seq(100, 16)), 0, bs)
	if ix.Len() > 5 {
		t.Errorf("Len = %d past MaxBlocks", ix.Len())
	}
	ix.Routed(4, prompt(seq(1, 16)), 0, bs) // rank out of range
	ix.Routed(0, prompt(seq(1, 16)), 0, 0)  // no block size
	ix.Routed(0, prompt(seq(1, 16)), 0, 1<<20)
	if ix.Blocks(4) != 0 {
		t.Error("out-of-range rank indexed")
	}
	// Salted and LoRA prompts are keyed as the events would key them.
	q := &Query{Tokens: seq(300, 8), StopAt: -1, LoRAName: "x", CacheSalt: "s", HasSalt: true}
	ix.Routed(2, q, 0, bs)
	if got := cached(ix, q); got[2] != 8 {
		t.Errorf("LoRA+salt prompt: %v", got)
	}
	if got := cached(ix, prompt(seq(300, 8))); len(got) != 0 {
		t.Errorf("base prompt matched the LoRA one: %v", got)
	}
}
