package kvindex

// Store indexes a BlockStored of rank. A chain whose parent hash is not indexed on
// the rank is skipped (counted): a lookup could never reach it. A chain with no
// parent starts a new root. A hash already indexed on the rank is refreshed (made
// newest) when it names the same content, and rebound when it names other content.
func (ix *Index) Store(rank int, s *Stored) StoreResult {
	n := len(s.Hashes)
	if !ix.validRank(rank) || !ix.validStored(s) {
		return StoreResult{Invalid: n}
	}
	parent, parentSlot, ok := ix.parentKey(rank, s)
	if !ok {
		return StoreResult{UnknownParent: n}
	}
	fam, ok := ix.family(s.BlockSize)
	if !ok {
		return StoreResult{Invalid: n}
	}
	ix.noteRank(rank, s.BlockSize)
	ix.k.reserve(s.BlockSize)
	ix.keyStored(s, parent)
	ix.warmStore(rank, s.Hashes)
	res := StoreResult{Stored: n}
	// Newest last: the chain's first block ends most recent, so a long chain loses
	// its tail first, as vLLM's own eviction order does.
	ix.bound = ix.bound[:0]
	for i := n - 1; i >= 0; i-- {
		si, evicted := ix.bind(rank, s.Hashes[i], ix.keys[i], fam)
		ix.bound = append(ix.bound, si)
		res.Evicted += evicted
	}
	ix.linkChildren(parentSlot)
	return res
}

// linkChildren points each slot of a chain just bound (ix.bound, last block first)
// at its child, and the parent's slot (noSlot: a root) at the first block, so that a
// lookup following the chain finds the next block without probing ctab. A hint is
// only a hint: the lookup checks the key, so one overwritten by a later child, or
// left on a slot freed since, costs a probe and nothing else.
func (ix *Index) linkChildren(parent uint32) {
	b := ix.bound
	for i := len(b) - 1; i > 0; i-- {
		ix.slots.at(b[i]).setChild(b[i-1] + 1)
	}
	if parent != noSlot && len(b) > 0 {
		ix.slots.at(parent).setChild(b[len(b)-1] + 1)
	}
}

func (ix *Index) validStored(s *Stored) bool {
	n, bs := len(s.Hashes), s.BlockSize
	return n > 0 && bs > 0 && bs <= ix.cfg.MaxBlockSize &&
		len(s.Tokens) == n*bs && (s.Extra == nil || len(s.Extra) == n)
}

// parentKey is the content key the event's first block hangs from, and its slot
// (noSlot for a root).
func (ix *Index) parentKey(rank int, s *Stored) (uint64, uint32, bool) {
	if !s.HasParent {
		return ix.k.root(s.BlockSize), noSlot, true
	}
	ri := ix.findRec(rank, s.Parent)
	if ri == noRec {
		return 0, noSlot, false
	}
	si := ix.recs.at(ri).slot
	return ix.slots.at(si).key, si, true
}

// keyStored fills ix.keys with the event's content keys, in chain order.
func (ix *Index) keyStored(s *Stored, parent uint64) {
	bs := s.BlockSize
	ix.keys = ix.keys[:0]
	for i := range s.Hashes {
		var e extraIdentity
		e, ix.buf = eventExtra(s, i, ix.buf)
		parent = ix.k.block(parent, ix.k.tokens(s.Tokens[i*bs:(i+1)*bs]), ix.k.extra(e))
		ix.keys = append(ix.keys, parent)
	}
}

// bind makes vLLM hash v on rank name content key, newest in the rank's list, and
// returns its slot and the entries evicted to make room.
func (ix *Index) bind(rank int, v, key uint64, fam uint8) (uint32, int) {
	if ri := ix.findRec(rank, v); ri != noRec {
		if si := ix.recs.at(ri).slot; ix.slots.at(si).key == key {
			// No mark can wait here: MarkPending skips blocks the rank holds.
			ix.touch(rank, ri)
			return si, 0
		}
		ix.dropRec(ri)
	}
	evicted := 0
	if ix.total >= ix.cfg.MaxBlocks {
		evicted = ix.makeRoom()
	}
	si := ix.slotFor(key, fam)
	ix.addRec(rank, v, si)
	ix.releasePending(si, rank)
	return si, evicted
}

// addRec records that rank holds slot si under vLLM hash v, newest.
func (ix *Index) addRec(rank int, v uint64, si uint32) {
	ri := ix.newRec()
	ix.recs.at(ri).set(rank, v, si)
	ix.linkNewest(rank, ri)
	ix.ranks[rank].n++
	ix.total++
	if !ix.addRank(ix.slots.at(si), rank) {
		ix.dups[dupKey(rank, si)]++
	}
	if lost := ix.insertRec(ri, rank, v); lost != noRec {
		ix.forgetRec(lost)
	}
}

func dupKey(rank int, si uint32) uint64 { return uint64(rank)<<32 | uint64(si) }

// dropRec removes a record: from rtab, then from the rest (forgetRec).
func (ix *Index) dropRec(ri uint32) {
	r := ix.recs.at(ri)
	ix.deleteRec(ri, r.rank(), r.vhash())
	ix.forgetRec(ri)
}

// forgetRec removes a record that rtab no longer holds: from its rank's list, and
// from its slot's holders unless another record of the rank holds the same content.
func (ix *Index) forgetRec(ri uint32) {
	r := ix.recs.at(ri)
	rank, si := r.rank(), r.slot
	ix.unlink(rank, ri)
	ix.ranks[rank].n--
	ix.total--
	ix.freeRec(ri)
	if len(ix.dups) > 0 {
		k := dupKey(rank, si)
		if d := ix.dups[k]; d > 0 {
			if d == 1 {
				delete(ix.dups, k)
			} else {
				ix.dups[k] = d - 1
			}
			return
		}
	}
	ix.delRank(ix.slots.at(si), rank)
	ix.maybeFreeSlot(si)
}

// linkNewest appends record ri to rank's list.
func (ix *Index) linkNewest(rank int, ri uint32) {
	rs := &ix.ranks[rank]
	r := ix.recs.at(ri)
	r.setPrev(rs.tail)
	r.setNext(0)
	if rs.tail != 0 {
		ix.recs.at(rs.tail - 1).setNext(ri + 1)
	} else {
		rs.head = ri + 1
	}
	rs.tail = ri + 1
}

// unlink takes record ri out of rank's list.
func (ix *Index) unlink(rank int, ri uint32) {
	rs := &ix.ranks[rank]
	r := ix.recs.at(ri)
	p, n := r.prevLink(), r.nextLink()
	if p != 0 {
		ix.recs.at(p - 1).setNext(n)
	} else {
		rs.head = n
	}
	if n != 0 {
		ix.recs.at(n - 1).setPrev(p)
	} else {
		rs.tail = p
	}
}

// touch makes record ri its rank's newest.
func (ix *Index) touch(rank int, ri uint32) {
	if ix.ranks[rank].tail == ri+1 {
		return
	}
	ix.unlink(rank, ri)
	ix.linkNewest(rank, ri)
}

// makeRoom keeps the index within MaxBlocks before one more entry: it evicts the
// oldest entries of the rank holding the most (a chain's middle going first makes
// its tail unreachable to lookups, which only predicts too few hits). It evicts a
// little more than needed (slack) so that the scan for the largest rank is paid
// once per batch, not once per entry.
func (ix *Index) makeRoom() int {
	rank := ix.largestRank()
	n := min(ix.total-ix.cfg.MaxBlocks+1+ix.slack, ix.ranks[rank].n)
	ix.evictOldest(rank, n)
	return n
}

func (ix *Index) largestRank() int {
	best := 0
	for r := range ix.ranks {
		if ix.ranks[r].n > ix.ranks[best].n {
			best = r
		}
	}
	return best
}

// evictOldest drops the n oldest entries of rank. It warms the table entries of the
// records warmAhead places further down the list as it goes, so that their cache
// misses overlap with the work on the current one.
func (ix *Index) evictOldest(rank, n int) {
	ahead := ix.ranks[rank].head
	for k := 0; k < warmAhead && k < n && ahead != 0; k++ {
		ahead = ix.warmRec(ahead - 1)
	}
	for k := 0; k < n; k++ {
		head := ix.ranks[rank].head
		if ahead != 0 && k+warmAhead < n {
			ahead = ix.warmRec(ahead - 1)
		}
		ix.dropRec(head - 1)
	}
}

// warmAhead is how many records eviction warms ahead of the one it drops.
const warmAhead = 8

// warmRec loads the rtab groups and the ctab bucket that dropping record ri will
// touch, and returns the next record's link. The loads feed ix.sink so that the
// compiler keeps them.
func (ix *Index) warmRec(ri uint32) uint32 {
	r := ix.recs.at(ri)
	a, b, _ := ix.groups(ix.recHash(r.rank(), r.vhash()))
	key := ix.slots.at(r.slot).key
	ix.sink += uint64(ix.rtab[a]+ix.rtab[b]) + ix.ctab[ctabHome(key, len(ix.ctab))]
	return r.nextLink()
}

// warmStore loads the rtab groups and ctab buckets the binds of an event will probe,
// all at once, so that their cache misses overlap instead of adding up.
func (ix *Index) warmStore(rank int, hashes []uint64) {
	var x uint64
	for i, v := range hashes {
		a, b, _ := ix.groups(ix.recHash(rank, v))
		x += uint64(ix.rtab[a]+ix.rtab[b]) + ix.ctab[ctabHome(ix.keys[i], len(ix.ctab))]
	}
	ix.sink += x
}

// Remove applies a BlockRemoved: it drops the named hashes from rank and returns how
// many were indexed. Unknown hashes are ignored (the block was never usable, or was
// evicted here first).
func (ix *Index) Remove(rank int, hashes []uint64) int {
	if rank < 0 || rank >= len(ix.ranks) {
		return 0
	}
	n := 0
	for _, v := range hashes {
		if ri := ix.findRec(rank, v); ri != noRec {
			ix.dropRec(ri)
			n++
		}
	}
	return n
}

// Clear drops every block of rank: AllBlocksCleared, a gap that no replay covers,
// a seq that went back (restart), an engine that left or rejoined. Its pending marks
// stay: they stand for requests in flight, which still compute their prefixes (and
// expire on their own). Clear walks the rank's blocks, the one method whose time
// grows with the index.
func (ix *Index) Clear(rank int) {
	if rank < 0 || rank >= len(ix.ranks) {
		return
	}
	ix.evictOldest(rank, ix.ranks[rank].n)
}
