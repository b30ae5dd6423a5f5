package mockengine

// The mock engine's prefix cache, modelled on vLLM's BlockPool and KVCacheManager
// (vllm/v1/core/block_pool.py, kv_cache_manager.py, kv_cache_utils.py) so that the
// KV events it publishes have the shape, order and timing of a real engine's:
//
//   - a pool of Capacity blocks of BlockSize tokens; free blocks wait in one queue
//     (FreeKVCacheBlockQueue) and allocation takes the queue's head, evicting the
//     block's cached content if it has any (one BlockRemoved per block);
//   - a request's blocks are freed tail first onto the queue's end, so the end of a
//     chain is evicted before its beginning, and a block that is hit again leaves
//     the queue while a request holds it (LRU over unreferenced blocks);
//   - a full block's hash chains its parent's hash, its tokens and its extra keys
//     (the LoRA name on every block, cache_salt on the first), as
//     generate_block_hash_extra_keys orders them. The hash is the mock's own 64-bit
//     one: vLLM's changes with PYTHONHASHSEED and the hash algorithm, and
//     switchyard must not depend on it;
//   - a lookup hits whole blocks only and never the block of the prompt's last
//     token when the whole prompt is cached (get_computed_blocks caps the hit at
//     prompt length - 1, since the last token's logits must be computed);
//   - blocks are allocated when a prefill starts and cached (BlockStored) when it
//     ends; a decoded block is cached once its last token's KV is computed, that
//     is one step after the token was sampled.
//
// Unlike vLLM, a block whose hash is already cached is not cached twice: the
// request shares the cached block (the event still names it, as vLLM's does). A
// request that finds no free block is not preempted; it runs on and nothing
// past its last block is cached ("starved").

// DefaultBlockSize is vLLM's default --block-size.
const DefaultBlockSize = 16

// CacheEventKind is the kind of a CacheEvent.
type CacheEventKind uint8

// Cache event kinds, as vLLM's KVCacheEvent classes.
const (
	CacheStored  CacheEventKind = iota + 1 // BlockStored
	CacheRemoved                           // BlockRemoved
	CacheCleared                           // AllBlocksCleared
)

// CacheEvent is one KV cache event, with the fields vLLM's classes carry. The
// publisher turns it into the wire form of the engine's release.
type CacheEvent struct {
	Kind      CacheEventKind
	Hashes    []uint64 // Stored, Removed: block hashes, in chain order
	Parent    uint64   // Stored: the hash of the block before the first one
	HasParent bool     // Stored: false at the start of a prompt
	Tokens    []int64  // Stored: the tokens of every block, BlockSize each
	BlockSize int      // Stored
	LoRAID    int64    // Stored: the LoRA adapter's int id, when LoRAName is set
	LoRAName  string   // Stored: "" for the base model
	ExtraKeys [][]string
}

// noParentHash seeds the chain of a prompt's first block (vLLM's NONE_HASH).
const noParentHash uint64 = 0x243f6a8885a308d3

// BlockHash is the mock's hash of one full block: parent (noParentHash for the
// first block), the block's tokens, then its extra keys, each string preceded by
// its length so that ("ab", "") and ("a", "b") differ.
func BlockHash(parent uint64, tokens []int64, extra []string) uint64 {
	h := parent
	for _, t := range tokens {
		h = seqHash(h, t)
	}
	for _, s := range extra {
		h = seqHash(h, -1-int64(len(s)))
		for i := 0; i < len(s); i++ {
			h = seqHash(h, int64(s[i]))
		}
	}
	return h
}

// HashBytes is a block hash as a 32-byte bytes hash, the form events carry with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0. Its last 8 bytes are h big-endian, so
// the int form is its low 64 bits, as vLLM's maybe_convert_block_hash takes them.
func HashBytes(h uint64) [32]byte {
	var b [32]byte
	x := h
	for i := 0; i < 3; i++ {
		x = seqHash(x, int64(i))
		for j := 0; j < 8; j++ {
			b[i*8+j] = byte(x >> (56 - 8*j))
		}
	}
	for j := 0; j < 8; j++ {
		b[24+j] = byte(h >> (56 - 8*j))
	}
	return b
}

// cacheBlock is one block of the pool. A block is free (in the queue) when ref
// is 0; it is cached when it holds a full block's content under hash.
type cacheBlock struct {
	hash       uint64
	cached     bool
	ref        int32
	prev, next int32 // free queue links; -1 when not queued
}

// PrefixCache is a pool of blocks with prefix caching. It is a plain value, not
// safe for concurrent use; the engine loop owns it through the Scheduler.
type PrefixCache struct {
	blockSize int
	blocks    []cacheBlock // the last one is the free queue's sentinel
	nfree     int
	used      int // blocks with ref > 0
	byHash    map[uint64]int32
	events    []CacheEvent
	record    bool // keep events (a publisher takes them)
}

// CacheSeq is one request's view of the cache: the blocks it holds, in order.
type CacheSeq struct {
	tokens   []int64  // the whole sequence: prompt, then generated tokens
	hashes   []uint64 // hashes of its full blocks, as far as computed
	blocks   []int32
	stored   int // leading blocks cached (or shared)
	loraID   int64
	loraName string
	salt     string
	starved  bool // the pool ran dry: no more blocks for it
	broken   bool // its chain left the cache (a reset): it caches nothing more
}

// NewPrefixCache returns an empty cache of capacity blocks; record keeps events
// for TakeEvents.
func NewPrefixCache(capacity, blockSize int, record bool) *PrefixCache {
	c := &PrefixCache{blockSize: blockSize, blocks: make([]cacheBlock, capacity+1), byHash: map[uint64]int32{}, record: record}
	s := int32(capacity)
	c.blocks[s].prev, c.blocks[s].next = s, s
	for i := range capacity {
		c.blocks[i].prev, c.blocks[i].next = -1, -1
		c.pushBack(int32(i))
	}
	return c
}

// BlockSize is the tokens per block.
func (c *PrefixCache) BlockSize() int { return c.blockSize }

// Capacity is the pool's size in blocks.
func (c *PrefixCache) Capacity() int { return len(c.blocks) - 1 }

// Cached is the number of blocks holding cached content.
func (c *PrefixCache) Cached() int { return len(c.byHash) }

// Usage is the share of blocks requests hold, as vLLM's kv_cache_usage.
func (c *PrefixCache) Usage() float64 {
	if c.Capacity() == 0 {
		return 0
	}
	return float64(c.used) / float64(c.Capacity())
}

// TakeEvents appends the events since the last call to dst, in order.
func (c *PrefixCache) TakeEvents(dst []CacheEvent) []CacheEvent {
	dst = append(dst, c.events...)
	clear(c.events)
	c.events = c.events[:0]
	return dst
}

func (c *PrefixCache) emit(ev CacheEvent) {
	if c.record {
		c.events = append(c.events, ev)
	}
}

func (c *PrefixCache) sentinel() int32 { return int32(len(c.blocks) - 1) }

// pushBack queues a free block at the end (evicted last).
func (c *PrefixCache) pushBack(b int32) {
	s := c.sentinel()
	last := c.blocks[s].prev
	c.blocks[b].prev, c.blocks[b].next = last, s
	c.blocks[last].next, c.blocks[s].prev = b, b
	c.nfree++
}

// pushFront queues a free block at the head (reused first).
func (c *PrefixCache) pushFront(b int32) {
	s := c.sentinel()
	first := c.blocks[s].next
	c.blocks[b].prev, c.blocks[b].next = s, first
	c.blocks[first].prev, c.blocks[s].next = b, b
	c.nfree++
}

func (c *PrefixCache) unlink(b int32) {
	p, n := c.blocks[b].prev, c.blocks[b].next
	c.blocks[p].next, c.blocks[n].prev = n, p
	c.blocks[b].prev, c.blocks[b].next = -1, -1
	c.nfree--
}

// alloc takes the queue's head, evicting what it caches.
func (c *PrefixCache) alloc() (int32, bool) {
	if c.nfree == 0 {
		return 0, false
	}
	b := c.blocks[c.sentinel()].next
	c.unlink(b)
	if blk := &c.blocks[b]; blk.cached {
		delete(c.byHash, blk.hash)
		blk.cached = false
		c.emit(CacheEvent{Kind: CacheRemoved, Hashes: []uint64{blk.hash}})
	}
	c.blocks[b].ref = 1
	c.used++
	return b, true
}

// touch takes one more reference to a block, out of the queue if it was free.
func (c *PrefixCache) touch(b int32) {
	if c.blocks[b].ref == 0 {
		c.unlink(b)
		c.used++
	}
	c.blocks[b].ref++
}

// unref drops a reference; a block nobody holds goes back to the queue, at the
// end if it caches something (LRU), at the head if not (nothing to lose).
func (c *PrefixCache) unref(b int32) {
	if c.blocks[b].ref--; c.blocks[b].ref > 0 {
		return
	}
	c.used--
	if c.blocks[b].cached {
		c.pushBack(b)
	} else {
		c.pushFront(b)
	}
}

// extraKeys are block i's extra hash keys: the LoRA name, then cache_salt on the
// first block (nil when none).
func (q *CacheSeq) extraKeys(i int) []string {
	var k []string
	if q.loraName != "" {
		k = append(k, q.loraName)
	}
	if i == 0 && q.salt != "" {
		k = append(k, q.salt)
	}
	return k
}

// hashUpTo computes the hashes of the first n full blocks.
func (q *CacheSeq) hashUpTo(n, bs int) {
	for i := len(q.hashes); i < n; i++ {
		parent := noParentHash
		if i > 0 {
			parent = q.hashes[i-1]
		}
		q.hashes = append(q.hashes, BlockHash(parent, q.tokens[i*bs:(i+1)*bs], q.extraKeys(i)))
	}
}

// CacheRequest is what a lookup needs of a request.
type CacheRequest struct {
	Prompt   []int64
	LoRAID   int64
	LoRAName string // "" for the base model
	Salt     string // cache_salt; "" for none
	SkipRead bool   // skip_reading_prefix_cache: look nothing up, still cache
}

// Start begins a request's prefill: it finds the cached prefix (whole blocks, at
// most prompt length - 1 tokens), holds those blocks and allocates the rest of the
// prompt's. It returns the sequence and the number of cached prompt tokens.
func (c *PrefixCache) Start(r CacheRequest) (*CacheSeq, int) {
	bs := c.blockSize
	q := &CacheSeq{tokens: append(make([]int64, 0, len(r.Prompt)+bs), r.Prompt...), loraID: r.LoRAID, loraName: r.LoRAName, salt: r.Salt}
	q.hashUpTo(len(r.Prompt)/bs, bs)
	hit := 0
	if !r.SkipRead && len(r.Prompt) > 0 {
		for hit < (len(r.Prompt)-1)/bs {
			b, ok := c.byHash[q.hashes[hit]]
			if !ok {
				break
			}
			c.touch(b)
			q.blocks = append(q.blocks, b)
			hit++
		}
	}
	q.stored = hit
	c.grow(q, (len(r.Prompt)+bs-1)/bs)
	return q, hit * bs
}

// grow allocates blocks until q holds n, or marks it starved.
func (c *PrefixCache) grow(q *CacheSeq, n int) {
	for !q.starved && len(q.blocks) < n {
		b, ok := c.alloc()
		if !ok {
			q.starved = true
			return
		}
		q.blocks = append(q.blocks, b)
	}
}

// Commit caches q's full blocks up to computed tokens, as one BlockStored: the
// end of a prefill (computed = prompt length).
func (c *PrefixCache) Commit(q *CacheSeq, computed int) {
	bs := c.blockSize
	full := min(computed/bs, len(q.blocks))
	if q.broken || full <= q.stored {
		return
	}
	if q.stored > 0 && !c.holds(q.blocks[q.stored-1], q.hashes[q.stored-1]) {
		// The cache was reset under the request: its chain's start is gone, so
		// nothing it caches later could be found. vLLM would have preempted it.
		q.broken = true
		return
	}
	q.hashUpTo(full, bs)
	ev := CacheEvent{Kind: CacheStored, BlockSize: bs, Tokens: q.tokens[q.stored*bs : full*bs : full*bs], LoRAID: q.loraID, LoRAName: q.loraName}
	if q.stored > 0 {
		ev.Parent, ev.HasParent = q.hashes[q.stored-1], true
	}
	for i := q.stored; i < full; i++ {
		h := q.hashes[i]
		if other, ok := c.byHash[h]; ok && other != q.blocks[i] {
			c.touch(other) // already cached elsewhere: share it
			c.unref(q.blocks[i])
			q.blocks[i] = other
		} else {
			c.blocks[q.blocks[i]].hash, c.blocks[q.blocks[i]].cached = h, true
			c.byHash[h] = q.blocks[i]
		}
		ev.Hashes = append(ev.Hashes, h)
		if q.loraName != "" || q.salt != "" {
			ev.ExtraKeys = append(ev.ExtraKeys, q.extraKeys(i))
		}
	}
	q.stored = full
	c.emit(ev)
}

// holds reports whether block b still caches hash h.
func (c *PrefixCache) holds(b int32, h uint64) bool {
	return c.blocks[b].cached && c.blocks[b].hash == h
}

// Append adds generated tokens to q: a block for each new position that needs
// one, then the blocks whose tokens' KV is now computed (all but the newest
// token's) are cached.
func (c *PrefixCache) Append(q *CacheSeq, toks ...int64) {
	q.tokens = append(q.tokens, toks...)
	c.grow(q, (len(q.tokens)+c.blockSize-1)/c.blockSize)
	c.Commit(q, len(q.tokens)-1)
}

// Release frees q's blocks, its last block first, as vLLM frees a finished
// request's blocks so that the end of a chain is evicted first.
func (c *PrefixCache) Release(q *CacheSeq) {
	for i := len(q.blocks) - 1; i >= 0; i-- {
		c.unref(q.blocks[i])
	}
	q.blocks, q.starved, q.broken = nil, true, true
}

// Reset drops every cached block and reports AllBlocksCleared, as
// reset_prefix_cache does. Without force it refuses (false) while requests hold
// blocks, as vLLM does; with force (reset_running_requests) it clears anyway, and
// the running requests cache nothing more.
func (c *PrefixCache) Reset(force bool) bool {
	if c.used > 0 && !force {
		return false
	}
	for _, b := range c.byHash {
		c.blocks[b].cached = false
	}
	clear(c.byHash)
	c.emit(CacheEvent{Kind: CacheCleared})
	return true
}
