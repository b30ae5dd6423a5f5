package kvindex

// Pending marks: between routing a request and its BlockStored events, the prompt's
// blocks are on their way to the rank. A mark makes Lookup report them there
// (PendingTokens), so a burst of requests sharing a new system prompt lands on one
// rank instead of scattering before the first events come back.
//
// Each mark is a (content, rank, deadline) in a FIFO of at most MaxPending; the
// slot keeps the live (rank, deadline) pairs for Lookup. A Store of that content on
// that rank releases the pair, the FIFO entry is then stale and goes by itself.

// mark is one FIFO entry. It names the content by key, not slot number, so that a
// stale entry can never touch a slot reused for other content.
type mark struct {
	key      uint64
	deadline int64
	rank     int32
}

// markRing is the FIFO of marks, grown by doubling up to MaxPending.
type markRing struct {
	buf  []mark
	head int
	n    int
}

func (m *markRing) push(x mark) {
	if m.n == len(m.buf) {
		m.grow()
	}
	m.buf[(m.head+m.n)%len(m.buf)] = x
	m.n++
}

func (m *markRing) grow() {
	nb := make([]mark, max(64, 2*len(m.buf)))
	for i := range m.n {
		nb[i] = m.buf[(m.head+i)%len(m.buf)]
	}
	m.buf, m.head = nb, 0
}

func (m *markRing) front() *mark { return &m.buf[m.head] }

func (m *markRing) pop() mark {
	x := m.buf[m.head]
	m.head = (m.head + 1) % len(m.buf)
	m.n--
	return x
}

// MarkPending marks the prompt's blocks as on their way to rank until now +
// PendingTTL, or until a Store of that content on rank releases them. Blocks the
// rank holds already are not marked. The prompt is keyed with the rank's block size
// (Config.DefaultBlockSize before its first event). Past MaxPending marks, the
// oldest go first.
func (ix *Index) MarkPending(rank int, q *Query, now int64) {
	if !ix.validRank(rank) {
		return
	}
	ix.Expire(now)
	rs := ix.noteRank(rank, 0)
	bs := rs.blockSize
	if bs == 0 {
		bs = ix.cfg.DefaultBlockSize
	}
	fam, ok := ix.family(bs)
	if !ok {
		return
	}
	ix.promptKeys(q, bs)
	deadline := now + ix.ttl
	for _, key := range ix.keys {
		if si := ix.findSlot(key); si != noSlot && ix.hasRank(ix.slots.at(si), rank) {
			continue
		}
		if ix.marks.n >= ix.cfg.MaxPending {
			// Before slotFor: the dropped mark may be this content's, and free its slot.
			ix.dropMark(ix.marks.pop())
		}
		ix.setPending(ix.slotFor(key, fam), rank, deadline)
		ix.marks.push(mark{key: key, deadline: deadline, rank: int32(rank)})
	}
}

// Expire drops the marks whose deadline is at or before now and returns how many
// left the FIFO. MarkPending calls it; an edge that marks rarely may call it on a
// timer. Lookup ignores expired marks either way.
func (ix *Index) Expire(now int64) int {
	n := 0
	for ix.marks.n > 0 && ix.marks.front().deadline <= now {
		ix.dropMark(ix.marks.pop())
		n++
	}
	return n
}

// Pending is the number of marks in the FIFO, stale ones included.
func (ix *Index) Pending() int { return ix.marks.n }

// dropMark ends a mark that left the FIFO, unless its pair was refreshed later (a
// newer mark of the same content and rank is still queued) or released by a Store.
func (ix *Index) dropMark(m mark) {
	si := ix.findSlot(m.key)
	if si == noSlot {
		return
	}
	s := ix.slots.at(si)
	if s.aux() == 0 {
		return
	}
	a := &ix.aux[s.aux()]
	for i, p := range a.pend {
		if p.rank == m.rank && p.deadline <= m.deadline {
			a.pend = deleteAt(a.pend, i)
			ix.maybeDropAux(s)
			ix.maybeFreeSlot(si)
			return
		}
	}
}

// setPending sets (or refreshes) the slot's mark for rank.
func (ix *Index) setPending(si uint32, rank int, deadline int64) {
	a := ix.auxOf(ix.slots.at(si))
	for i := range a.pend {
		if int(a.pend[i].rank) == rank {
			a.pend[i].deadline = deadline
			return
		}
	}
	a.pend = append(a.pend, pendEntry{rank: int32(rank), deadline: deadline})
}

// releasePending ends the slot's mark for rank: the content has arrived there.
func (ix *Index) releasePending(si uint32, rank int) {
	s := ix.slots.at(si)
	if s.aux() == 0 {
		return
	}
	a := &ix.aux[s.aux()]
	for i := range a.pend {
		if int(a.pend[i].rank) == rank {
			a.pend = deleteAt(a.pend, i)
			ix.maybeDropAux(s)
			return
		}
	}
}

// deleteAt removes element i without keeping order; pending lists are tiny.
func deleteAt(p []pendEntry, i int) []pendEntry {
	p[i] = p[len(p)-1]
	return p[:len(p)-1]
}
