package kvindex

// Stored is one BlockStored event as the edge hands it over, already filtered to the
// GPU medium and the first full-attention group.
type Stored struct {
	// Hashes are vLLM's block hashes (a 32-byte hash folded to 64 bits by the edge).
	// They are kept per rank only, to apply BlockRemoved and to find a parent.
	Hashes    []uint64
	Parent    uint64 // parent_block_hash, when HasParent
	HasParent bool
	// Tokens are the token ids of all blocks, BlockSize per block, in order.
	Tokens      []int64
	BlockSize   int
	LoRAName    string
	HasLoRAName bool // v0.15 and later send lora_name
	LoRAID      int64
	HasLoRAID   bool
	// Extra holds each block's extra_keys entry as raw msgpack, one per hash; a nil
	// (or msgpack nil) entry is None. A nil slice: the release sends no extra_keys
	// (before v0.18), and the entry is derived as that release hashed it.
	Extra [][]byte
}

// StoreResult counts what one Store did with its blocks.
type StoreResult struct {
	Stored int // blocks indexed on the rank, new or refreshed
	// UnknownParent: blocks skipped because the parent hash is not indexed on the rank
	// (its prefix is not usable: a lookup could never reach them).
	UnknownParent int
	// Invalid: blocks skipped because the event is malformed (token count not
	// BlockSize × len(Hashes), extra count, block size, rank out of range) or would
	// add a block size past Config.MaxBlockSizes.
	Invalid int
	Evicted int // (block, rank) entries evicted to stay within Config.MaxBlocks
}

// slot is one block content: its key and the ranks that hold it. 24 bytes.
type slot struct {
	key uint64
	// mask is the ranks of group base() holding the block, unless its aux is
	// promoted; the free-list link when the slot is free.
	mask uint64
	// meta packs, from bit 0: aux (24 bits, 1-based index in Index.aux, 0: none),
	// child (24 bits, the slot of the block most recently stored under this one,
	// 1-based, 0: none; a hint a lookup checks by key), base (10 bits, the rank group
	// that mask covers), fam (6 bits, index in Index.fams: the block size).
	meta uint64
}

const (
	childShift = 24
	baseShift  = 48
	famShift   = 58
	field24    = 1<<24 - 1
)

func (s *slot) aux() uint32   { return uint32(s.meta & field24) }
func (s *slot) child() uint32 { return uint32(s.meta>>childShift) & field24 }
func (s *slot) base() int     { return int(s.meta>>baseShift) & (1<<10 - 1) }
func (s *slot) fam() uint8    { return uint8(s.meta >> famShift) }

func (s *slot) setAux(a uint32) { s.meta = s.meta&^field24 | uint64(a) }

func (s *slot) setChild(c uint32) {
	s.meta = s.meta&^(field24<<childShift) | uint64(c)<<childShift
}

func (s *slot) setBase(g int) {
	s.meta = s.meta&^((1<<10-1)<<baseShift) | uint64(g)<<baseShift
}

// rec is one (block, rank) residency: vLLM's hash on that rank and the content it
// names, linked in the rank's list from oldest to newest. 20 bytes: the rank is kept
// in the top bytes of the two links, which hold record numbers of 24 bits.
type rec struct {
	vlo, vhi uint32
	slot     uint32
	prev     uint32 // low 24 bits: the older neighbour, 1-based; high 8: rank>>8
	next     uint32 // low 24 bits: the newer neighbour, 1-based; high 8: rank&0xff
}

const (
	linkMask = 1<<24 - 1
	noSlot   = ^uint32(0)
	noRec    = ^uint32(0)
)

func (r *rec) rank() int        { return int(r.prev>>24)<<8 | int(r.next>>24) }
func (r *rec) vhash() uint64    { return uint64(r.vhi)<<32 | uint64(r.vlo) }
func (r *rec) prevLink() uint32 { return r.prev & linkMask }
func (r *rec) nextLink() uint32 { return r.next & linkMask }
func (r *rec) setPrev(l uint32) { r.prev = r.prev&^linkMask | l }
func (r *rec) setNext(l uint32) { r.next = r.next&^linkMask | l }

func (r *rec) set(rank int, v uint64, s uint32) {
	r.vlo, r.vhi, r.slot = uint32(v), uint32(v>>32), s
	r.prev = uint32(rank>>8) << 24
	r.next = uint32(rank&0xff) << 24
}

// aux is what few slots need: a full rank bitset once the holders span rank groups,
// and pending marks.
type aux struct {
	over     []uint64 // all holders, once promoted; kept, zeroed, when the aux is freed
	promoted bool     // the holders span rank groups: over, not slot.mask, has them
	overN    int      // bits set in over
	pend     []pendEntry
	free     uint32 // free-list link
}

type pendEntry struct {
	rank     int32
	deadline int64
}

// rankState is one rank's list of residencies, oldest first.
type rankState struct {
	head, tail uint32 // 1-based record numbers; 0: empty
	n          int
	blockSize  int // from the rank's last Stored or Routed; 0: none yet
	capacity   int // prefix mode: the engine's num_gpu_blocks; 0: no bound of its own
}

// family is one block size in the index; a lookup keys the prompt once per family.
type family struct {
	size  int
	slots int // live slots of this size; 0: the entry is free
}

// Index is the prefix index. It is not safe for concurrent use; the caller wraps it
// in a mutex.
type Index struct {
	cfg   Config
	ttl   int64
	slack int // extra entries evicted at once past MaxBlocks, so the scan is amortised
	k     keyer

	ctab     []uint64 // content key → slot: the key's high 32 bits (its tag) | slot+1
	rtab     []uint32 // (rank, vLLM hash) → record, see rtab.go
	stash    []uint32 // rtab entries that found no group
	kicks    uint64   // rtab moves so far; picks the entry each move evicts
	sink     uint64   // where warming loads go, so that they are not optimised away
	slots    pages[slot]
	slotFree uint32 // 1-based free list through slot.mask
	recs     pages[rec]
	recFree  uint32 // 1-based free list through rec.next
	aux      []aux  // aux[0] unused
	auxFree  uint32

	ranks []rankState
	fams  []family
	total int
	words int // rank groups in use: highest rank seen / 64 + 1
	// dups counts second records of one content on one rank (two vLLM hashes for
	// the same content, as a salt unseen before v0.18 makes), keyed rank<<32|slot,
	// so that removing one keeps the rank's bit.
	dups  map[uint64]int32
	marks markRing

	buf   []byte
	keys  []uint64
	bound []uint32 // the slots of the chain being stored, last block first
	sc    scratch
}

// New returns an empty Index, or a *ConfigError.
func New(cfg Config) (*Index, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ix := &Index{
		cfg:   cfg,
		ttl:   int64(cfg.PendingTTL),
		slack: cfg.MaxBlocks / 1024,
		k:     newKeyer(cfg.Seed),
		ctab:  make([]uint64, tableSize(cfg.MaxBlocks+cfg.MaxPending)),
		rtab:  make([]uint32, rtabGroups(cfg.MaxBlocks)*groupLen),
		aux:   make([]aux, 1),
		words: 1,
		dups:  map[uint64]int32{},
	}
	ix.k.reserve(cfg.DefaultBlockSize)
	return ix, nil
}

// tableSize keeps a linear-probing table at most 3/4 full at n entries.
func tableSize(n int) int {
	return n + n/3 + 8
}

// Blocks is the number of blocks indexed on rank.
func (ix *Index) Blocks(rank int) int {
	if rank < 0 || rank >= len(ix.ranks) {
		return 0
	}
	return ix.ranks[rank].n
}

// Len is the number of (block, rank) entries in the index.
func (ix *Index) Len() int { return ix.total }

func (ix *Index) validRank(rank int) bool {
	return rank >= 0 && rank < ix.cfg.MaxRanks
}

// noteRank makes room for rank's state and remembers its block size.
func (ix *Index) noteRank(rank, blockSize int) *rankState {
	for len(ix.ranks) <= rank {
		ix.ranks = append(ix.ranks, rankState{})
	}
	ix.words = max(ix.words, rank/64+1)
	rs := &ix.ranks[rank]
	if blockSize > 0 {
		rs.blockSize = blockSize
	}
	return rs
}

// family finds or makes the family of a block size; false when MaxBlockSizes are
// all in use.
func (ix *Index) family(size int) (uint8, bool) {
	free := -1
	for i := range ix.fams {
		if ix.fams[i].size == size {
			return uint8(i), true
		}
		if free < 0 && ix.fams[i].slots == 0 {
			free = i
		}
	}
	if free >= 0 {
		ix.fams[free] = family{size: size}
		return uint8(free), true
	}
	if len(ix.fams) >= ix.cfg.MaxBlockSizes {
		return 0, false
	}
	ix.fams = append(ix.fams, family{size: size})
	return uint8(len(ix.fams) - 1), true
}

// slotsInUse is the number of live slots, for tests and memory accounting.
func (ix *Index) slotsInUse() int {
	n := 0
	for _, f := range ix.fams {
		n += f.slots
	}
	return n
}
