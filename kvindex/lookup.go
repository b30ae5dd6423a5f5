package kvindex

import (
	"math/bits"
	"slices"
)

// Query is a prompt as the router sees it.
type Query struct {
	Tokens    []int64
	LoRAName  string // the adapter's name; "" for the base model
	CacheSalt string
	HasSalt   bool
	// StopAt is the first token index this side cannot key the way the engine did
	// (the first multimodal placeholder, or 0 for prompt embeddings); -1: none. Only
	// full blocks that end at or before it are keyed.
	StopAt int
	// Now (unix ns) is when the lookup happens: a pending mark counts while Now is
	// before its deadline.
	Now int64
}

// Match is one rank's prefix of the prompt.
type Match struct {
	Rank int
	// CachedTokens: the longest prefix whose blocks the rank has stored (full blocks).
	CachedTokens int
	// PendingTokens: the tokens beyond CachedTokens whose blocks are cached or marked
	// pending on the rank, so on their way there.
	PendingTokens int
}

// scratch is Lookup's reused state; steady-state lookups do not allocate.
type scratch struct {
	c, a    []uint64 // per rank group: ranks still matching cached, cached-or-pending
	cached  []int32  // per rank: cached tokens (max over block sizes)
	any     []int32  // per rank: cached-or-pending tokens
	touched []uint64 // ranks with an entry in cached/any
	keys    [walkBatch]uint64
	buckets [walkBatch]uint64
	slots   [walkBatch]uint32
}

// fullBlocks is how many of the prompt's blocks of size bs can be keyed.
func fullBlocks(q *Query, bs int) int {
	n := len(q.Tokens)
	if q.StopAt >= 0 && q.StopAt < n {
		n = q.StopAt
	}
	return n / bs
}

// Lookup appends to out one Match per rank holding a prefix of the prompt (cached or
// pending), in rank order, and returns it. It keys the prompt once per block size in
// the index and walks the blocks once, keeping the set of ranks still matching; it
// stops at the first block no rank holds.
func (ix *Index) Lookup(q *Query, out []Match) []Match {
	ix.prepareScratch()
	var ex queryExtras
	ex, ix.buf = ix.k.promptExtras(q, ix.buf)
	for f := range ix.fams {
		if ix.fams[f].slots > 0 {
			ix.walk(q, ix.fams[f].size, ex)
		}
	}
	return ix.collect(out)
}

func (ix *Index) prepareScratch() {
	sc := &ix.sc
	for len(sc.cached) < len(ix.ranks) {
		sc.cached = append(sc.cached, 0)
		sc.any = append(sc.any, 0)
	}
	for len(sc.c) < ix.words {
		sc.c, sc.a, sc.touched = append(sc.c, 0), append(sc.a, 0), append(sc.touched, 0)
	}
}

// walkBatch bounds how many blocks a walk keys and probes before it steps through
// them. Their table and slot loads do not depend on one another, so the CPU overlaps
// their cache misses instead of paying them one after another. Batches start at 4
// and double, so a prompt whose first block is unknown wastes little.
const walkBatch = 16

// walk matches the prompt's blocks of size bs against the index.
func (ix *Index) walk(q *Query, bs int, ex queryExtras) {
	n := fullBlocks(q, bs)
	parent, e := ix.k.root(bs), ex.first
	prev := noSlot
	for i0, size := 0, 4; i0 < n; i0, size = i0+size, min(2*size, walkBatch) {
		m := min(size, n-i0)
		parent = ix.k.chain(q.Tokens[i0*bs:], bs, parent, e, ex.rest, ix.sc.keys[:m])
		e = ex.rest
		prev = ix.probeBatch(m, prev)
		for j := range m {
			si := ix.sc.slots[j]
			if si == noSlot {
				ix.endWalk((i0 + j) * bs)
				return
			}
			if !ix.step(ix.slots.at(si), i0+j, bs, q.Now) {
				return
			}
		}
	}
	ix.endWalk(n * bs)
}

// probeBatch finds the slots of sc.keys[:m], up to the first one not indexed (and
// noSlot from there), and returns the last one found; prev is the slot of the block
// before the batch.
//
// It follows the chain from slot to slot before it probes ctab. A chain stored in
// one event takes consecutive slots (Store binds it last block first, so a block's
// child sits just below it; slots freed by evicting a chain are reused in the order
// that puts it just above), so the slot beside the previous block's comes first: a
// load from a line most likely in cache. At a break, the previous slot's child hint
// (the block stored under it last) and the key's home bucket in ctab are loaded
// together, so a wrong hint costs no extra wait. A third break in a batch means
// blocks stored one by one (decoded output, interleaved with other requests): the
// rest of the batch is looked up in ctab at once, the loads overlapping.
func (ix *Index) probeBatch(m int, prev uint32) uint32 {
	sc, breaks := &ix.sc, 0
	for j := range m {
		s := ix.besideSlot(prev, sc.keys[j])
		if s == noSlot {
			if breaks++; breaks > 2 || prev == noSlot {
				return ix.probeRest(j, m)
			}
			if s = ix.jumpSlot(prev, sc.keys[j]); s == noSlot {
				for k := j; k < m; k++ {
					sc.slots[k] = noSlot
				}
				return noSlot
			}
		}
		sc.slots[j] = s
		prev = s
	}
	return prev
}

// jumpSlot finds key's slot after a break from prev: the child hint if it holds the
// key, else ctab, whose bucket was loaded beside the hint.
func (ix *Index) jumpSlot(prev uint32, key uint64) uint32 {
	b := ix.ctab[ctabHome(key, len(ix.ctab))]
	if c := ix.slots.at(prev).child(); c != 0 && ix.slots.at(c-1).key == key {
		return c - 1
	}
	return ix.resolve(b, key)
}

// resolve finds key's slot from its home bucket b.
func (ix *Index) resolve(b, key uint64) uint32 {
	switch {
	case b == 0:
		return noSlot
	case b&tagMask == key&tagMask && ix.slots.at(uint32(b)-1).key == key:
		return uint32(b) - 1
	}
	return ix.findSlot(key) // the home bucket holds another key: probe on
}

// probeRest looks up sc.keys[j:m] in ctab and returns the last slot (noSlot when
// one is missing: the walk ends there).
func (ix *Index) probeRest(j, m int) uint32 {
	sc, n := &ix.sc, len(ix.ctab)
	for k := j; k < m; k++ {
		sc.buckets[k] = ix.ctab[ctabHome(sc.keys[k], n)]
	}
	for k := j; k < m; k++ {
		sc.slots[k] = ix.resolve(sc.buckets[k], sc.keys[k])
	}
	return sc.slots[m-1]
}

// besideSlot returns the slot just below or above prev if it holds key, else noSlot.
func (ix *Index) besideSlot(prev uint32, key uint64) uint32 {
	if prev == noSlot {
		return noSlot
	}
	if prev > 0 && ix.slots.at(prev-1).key == key {
		return prev - 1
	}
	if prev+1 < ix.slots.n && ix.slots.at(prev+1).key == key {
		return prev + 1
	}
	return noSlot
}

// step narrows the matching ranks to block i's holders; false when none is left.
func (ix *Index) step(s *slot, i, bs int, now int64) bool {
	sc, left := &ix.sc, uint64(0)
	for g := range ix.words {
		c := ix.rankWord(s, g)
		p := c | ix.pendWord(s, g, now)
		if i == 0 {
			sc.c[g], sc.a[g] = c, p
			left |= p
			continue
		}
		nc, na := sc.c[g]&c, sc.a[g]&p
		ix.dropped(g, sc.c[g]&^nc, i*bs, true)
		ix.dropped(g, sc.a[g]&^na, i*bs, false)
		sc.c[g], sc.a[g] = nc, na
		left |= na
	}
	return left != 0
}

// dropped records the ranks of group g in d as matching tokens tokens, cached or
// cached-or-pending; a rank leaves the cached set no later than the other.
func (ix *Index) dropped(g int, d uint64, tokens int, cached bool) {
	for ; d != 0; d &= d - 1 {
		r := g<<6 | bits.TrailingZeros64(d)
		if cached {
			ix.sc.cached[r] = max(ix.sc.cached[r], int32(tokens))
		} else {
			ix.sc.any[r] = max(ix.sc.any[r], int32(tokens))
			ix.sc.touched[g] |= 1 << (r & 63)
		}
	}
}

// endWalk records the ranks still matching when the walk ends (a block no rank
// holds, or the prompt's last full block) at tokens, and clears the sets.
func (ix *Index) endWalk(tokens int) {
	for g := range ix.words {
		if tokens > 0 {
			ix.dropped(g, ix.sc.c[g], tokens, true)
			ix.dropped(g, ix.sc.a[g], tokens, false)
		}
		ix.sc.c[g], ix.sc.a[g] = 0, 0
	}
}

// collect appends the recorded ranks to out in rank order and resets the scratch.
func (ix *Index) collect(out []Match) []Match {
	sc := &ix.sc
	for g := range ix.words {
		for t := sc.touched[g]; t != 0; t &= t - 1 {
			r := g<<6 | bits.TrailingZeros64(t)
			c, a := int(sc.cached[r]), int(sc.any[r])
			out = append(out, Match{Rank: r, CachedTokens: c, PendingTokens: a - c})
			sc.cached[r], sc.any[r] = 0, 0
		}
		sc.touched[g] = 0
	}
	return out
}

// pendWord is the ranks of group g with a live pending mark on the slot.
func (ix *Index) pendWord(s *slot, g int, now int64) uint64 {
	if s.aux() == 0 {
		return 0
	}
	var m uint64
	for _, p := range ix.aux[s.aux()].pend {
		if int(p.rank)>>6 == g && p.deadline > now {
			m |= 1 << (p.rank & 63)
		}
	}
	return m
}

// promptKeys fills ix.keys with the content keys of the prompt's full blocks of
// size bs, in order.
func (ix *Index) promptKeys(q *Query, bs int) {
	ix.k.reserve(bs)
	var ex queryExtras
	ex, ix.buf = ix.k.promptExtras(q, ix.buf)
	n := fullBlocks(q, bs)
	ix.keys = slices.Grow(ix.keys[:0], n)[:n]
	ix.k.chain(q.Tokens, bs, ix.k.root(bs), ex.first, ex.rest, ix.keys)
}
