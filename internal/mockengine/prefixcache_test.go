package mockengine

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// seqTokens is n tokens from start, start+1, ...
func seqTokens(start, n int) []int64 {
	t := make([]int64, n)
	for i := range t {
		t[i] = int64(start + i)
	}
	return t
}

// chain is the mock's hashes of prompt's full blocks (no extra keys).
func chain(prompt []int64, bs int) []uint64 {
	var hs []uint64
	parent := noParentHash
	for i := 0; i+bs <= len(prompt); i += bs {
		parent = BlockHash(parent, prompt[i:i+bs], nil)
		hs = append(hs, parent)
	}
	return hs
}

// prefill runs one whole request: Start, Commit at the prompt's end, Release.
func prefill(c *PrefixCache, r CacheRequest) int {
	q, hit := c.Start(r)
	c.Commit(q, len(r.Prompt))
	c.Release(q)
	return hit
}

func stored(parent uint64, hasParent bool, toks []int64, bs int, hashes ...uint64) CacheEvent {
	return CacheEvent{Kind: CacheStored, Hashes: hashes, Parent: parent, HasParent: hasParent, Tokens: toks, BlockSize: bs}
}

func removed(h uint64) CacheEvent { return CacheEvent{Kind: CacheRemoved, Hashes: []uint64{h}} }

func TestPrefixCache(t *testing.T) {
	a, b, c8 := seqTokens(100, 8), seqTokens(200, 8), seqTokens(300, 8)
	ha, hb, hc := chain(a, 4), chain(b, 4), chain(c8, 4)
	p40 := seqTokens(1, 40)
	h40 := chain(p40, 16)
	tests := []struct {
		name     string
		capacity int
		bs       int
		run      func(c *PrefixCache) []int // hits in tokens, one per request
		wantHits []int
		want     []CacheEvent
	}{
		{"miss then hit in whole blocks", 8, 16, func(c *PrefixCache) []int {
			return []int{prefill(c, CacheRequest{Prompt: p40}), prefill(c, CacheRequest{Prompt: p40})}
		}, []int{0, 32}, []CacheEvent{stored(0, false, p40[:32], 16, h40...)}},
		{"a wholly cached prompt recomputes its last block", 8, 16, func(c *PrefixCache) []int {
			return []int{prefill(c, CacheRequest{Prompt: p40[:32]}), prefill(c, CacheRequest{Prompt: p40[:32]})}
		}, []int{0, 16}, []CacheEvent{stored(0, false, p40[:32], 16, h40...), stored(h40[0], true, p40[16:32], 16, h40[1])}},
		{"one token past the blocks hits them all", 8, 16, func(c *PrefixCache) []int {
			return []int{prefill(c, CacheRequest{Prompt: p40[:32]}), prefill(c, CacheRequest{Prompt: p40[:33]})}
		}, []int{0, 32}, []CacheEvent{stored(0, false, p40[:32], 16, h40...)}},
		{"LRU evicts a chain's end first", 4, 4, func(c *PrefixCache) []int {
			return []int{prefill(c, CacheRequest{Prompt: a}), prefill(c, CacheRequest{Prompt: b}), prefill(c, CacheRequest{Prompt: c8})}
		}, []int{0, 0, 0}, []CacheEvent{stored(0, false, a, 4, ha...), stored(0, false, b, 4, hb...),
			removed(ha[1]), removed(ha[0]), stored(0, false, c8, 4, hc...)}},
		{"a hit leaves the LRU queue while held", 4, 4, func(c *PrefixCache) []int {
			h := []int{prefill(c, CacheRequest{Prompt: a}), prefill(c, CacheRequest{Prompt: b})}
			q, hit := c.Start(CacheRequest{Prompt: a}) // holds a's first block, takes the queue's head
			c.Commit(q, len(a))
			h = append(h, hit, prefill(c, CacheRequest{Prompt: c8}))
			c.Release(q)
			return h
		}, []int{0, 0, 4, 0}, []CacheEvent{stored(0, false, a, 4, ha...), stored(0, false, b, 4, hb...),
			removed(ha[1]), stored(ha[0], true, a[4:], 4, ha[1]),
			removed(hb[1]), removed(hb[0]), stored(0, false, c8, 4, hc...)}},
		{"the pool runs dry: only the blocks held are cached", 2, 4, func(c *PrefixCache) []int {
			return []int{prefill(c, CacheRequest{Prompt: seqTokens(1, 16)})}
		}, []int{0}, []CacheEvent{stored(0, false, seqTokens(1, 8), 4, chain(seqTokens(1, 8), 4)...)}},
		{"skip_reading_prefix_cache looks nothing up", 8, 4, func(c *PrefixCache) []int {
			return []int{prefill(c, CacheRequest{Prompt: a}), prefill(c, CacheRequest{Prompt: a, SkipRead: true})}
		}, []int{0, 0}, []CacheEvent{stored(0, false, a, 4, ha...), stored(0, false, a, 4, ha...)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewPrefixCache(tt.capacity, tt.bs, true)
			if got := tt.run(c); !slices.Equal(got, tt.wantHits) {
				t.Errorf("hits %v, want %v", got, tt.wantHits)
			}
			if d := cmp.Diff(tt.want, c.TakeEvents(nil)); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			if c.Usage() != 0 {
				t.Errorf("usage %v after every request ended", c.Usage())
			}
		})
	}
}

// Salts and LoRA names are extra keys: a prompt hits only blocks made with the
// same ones, and BlockStored names them per block (the salt on the first only).
func TestPrefixCacheExtraKeys(t *testing.T) {
	p := seqTokens(1, 9)
	tests := []struct {
		name      string
		first, re CacheRequest
		hit       int
		extra     [][]string
	}{
		{"same salt", CacheRequest{Prompt: p, Salt: "s1"}, CacheRequest{Prompt: p, Salt: "s1"}, 8, [][]string{{"s1"}, nil}},
		{"other salt", CacheRequest{Prompt: p, Salt: "s1"}, CacheRequest{Prompt: p, Salt: "s2"}, 0, [][]string{{"s1"}, nil}},
		{"salt then none", CacheRequest{Prompt: p, Salt: "s1"}, CacheRequest{Prompt: p}, 0, [][]string{{"s1"}, nil}},
		{"same LoRA", CacheRequest{Prompt: p, LoRAName: "sql", LoRAID: 7}, CacheRequest{Prompt: p, LoRAName: "sql", LoRAID: 7}, 8, [][]string{{"sql"}, {"sql"}}},
		{"other LoRA", CacheRequest{Prompt: p, LoRAName: "sql", LoRAID: 7}, CacheRequest{Prompt: p, LoRAName: "chat", LoRAID: 8}, 0, [][]string{{"sql"}, {"sql"}}},
		{"LoRA and salt", CacheRequest{Prompt: p, LoRAName: "sql", Salt: "s"}, CacheRequest{Prompt: p, LoRAName: "sql", Salt: "s"}, 8, [][]string{{"sql", "s"}, {"sql"}}},
		{"base model after LoRA", CacheRequest{Prompt: p, LoRAName: "sql"}, CacheRequest{Prompt: p}, 0, [][]string{{"sql"}, {"sql"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewPrefixCache(16, 4, true)
			prefill(c, tt.first)
			if hit := prefill(c, tt.re); hit != tt.hit {
				t.Errorf("hit %d, want %d", hit, tt.hit)
			}
			ev := c.TakeEvents(nil)[0]
			if d := cmp.Diff(tt.extra, ev.ExtraKeys); d != "" || ev.LoRAName != tt.first.LoRAName || ev.LoRAID != tt.first.LoRAID {
				t.Errorf("first BlockStored %+v, extra keys (-want +got):\n%s", ev, d)
			}
		})
	}
}

// A decoded block is cached once the KV of its last token is computed: one token
// after the block is full.
func TestPrefixCacheDecodeBlocks(t *testing.T) {
	c := NewPrefixCache(8, 4, true)
	prompt := seqTokens(1, 6)
	q, _ := c.Start(CacheRequest{Prompt: prompt})
	c.Commit(q, len(prompt))
	h := chain(prompt[:4], 4)
	if d := cmp.Diff([]CacheEvent{stored(0, false, prompt[:4], 4, h...)}, c.TakeEvents(nil)); d != "" {
		t.Fatalf("prefill (-want +got):\n%s", d)
	}
	c.Append(q, 7)
	c.Append(q, 8) // block 1 is full, its last token not yet computed
	if ev := c.TakeEvents(nil); len(ev) != 0 {
		t.Fatalf("stored before the KV was computed: %+v", ev)
	}
	c.Append(q, 9)
	all := append(slices.Clone(prompt), 7, 8, 9)
	h1 := BlockHash(h[0], all[4:8], nil)
	if d := cmp.Diff([]CacheEvent{stored(h[0], true, all[4:8], 4, h1)}, c.TakeEvents(nil)); d != "" {
		t.Fatalf("decode block (-want +got):\n%s", d)
	}
	if got := c.Usage(); got != 3.0/8 {
		t.Fatalf("usage %v, want 3/8", got)
	}
	c.Release(q)
	if q2, hit := c.Start(CacheRequest{Prompt: all}); hit != 8 {
		t.Fatalf("a continuation hit %d tokens, want 8", hit)
	} else {
		c.Release(q2)
	}
}

// reset_prefix_cache: refused while blocks are held (unless forced), then every
// block is forgotten with one AllBlocksCleared.
func TestPrefixCacheReset(t *testing.T) {
	c := NewPrefixCache(8, 4, true)
	p := seqTokens(1, 9)
	prefill(c, CacheRequest{Prompt: p})
	q, _ := c.Start(CacheRequest{Prompt: seqTokens(50, 5)})
	c.Commit(q, 5)
	c.TakeEvents(nil)
	if c.Reset(false) {
		t.Fatal("reset with a running request succeeded")
	}
	if ev := c.TakeEvents(nil); len(ev) != 0 {
		t.Fatalf("a refused reset reported %+v", ev)
	}
	if !c.Reset(true) || c.Cached() != 0 {
		t.Fatalf("forced reset: cached %d", c.Cached())
	}
	c.Append(q, 1, 2, 3, 4) // its chain began before the reset: nothing more is cached
	c.Release(q)
	if d := cmp.Diff([]CacheEvent{{Kind: CacheCleared}}, c.TakeEvents(nil)); d != "" {
		t.Fatalf("events (-want +got):\n%s", d)
	}
	if hit := prefill(c, CacheRequest{Prompt: p}); hit != 0 || !c.Reset(false) {
		t.Fatalf("after the reset: hit %d", hit)
	}
}

func TestBlockHash(t *testing.T) {
	toks := seqTokens(1, 4)
	if BlockHash(noParentHash, toks, []string{"ab", ""}) == BlockHash(noParentHash, toks, []string{"a", "b"}) {
		t.Error("extra keys are not delimited")
	}
	if BlockHash(1, toks, nil) == BlockHash(2, toks, nil) {
		t.Error("the parent is not hashed")
	}
	h := BlockHash(noParentHash, toks, nil)
	b := HashBytes(h)
	if binary.BigEndian.Uint64(b[24:]) != h || HashBytes(h) != b || binary.BigEndian.Uint64(b[:8]) == 0 {
		t.Errorf("HashBytes(%x) = %x", h, b)
	}
}
