package kvindex

// rtab maps (rank, vLLM hash) to a record: a cuckoo table of groups of four 32-bit
// entries, each the record number+1 in 24 bits beside an 8-bit tag of the hash. A
// key lives in one of two groups, so a lookup reads two short groups and fetches a
// record only on a tag match, and a deletion clears one entry: nothing shifts, so
// neither touches the records of other keys. Only an insert into two full groups
// moves entries (fetching the moved record to find its other group); the table is
// sized at New to stay under 75% full, where that is rare. An entry that finds no
// place after maxKicks moves waits in a small stash; with the stash full, the
// block it names is dropped from the index (predicting too few hits is safe).

const (
	groupLen = 8
	maxKicks = 64
	stashLen = 16
	tagShift = 24
)

// rtabGroups sizes rtab for n records.
func rtabGroups(n int) int { return (n+n/3)/groupLen + 2 }

// recHash places (rank, vLLM hash); keyed, so an engine cannot aim its hashes at a
// few groups.
func (ix *Index) recHash(rank int, v uint64) uint64 {
	return mum(v^ix.k.s[12], uint64(rank)^ix.k.s[13])
}

// groups returns the two groups of hash h and its tag.
func (ix *Index) groups(h uint64) (int, int, uint32) {
	g := len(ix.rtab) / groupLen
	g1 := fastrange(h, g)
	g2 := fastrange(h*0x9e3779b97f4a7c15, g) // fastrange reads high bits: multiply the low ones up
	if g2 == g1 {
		g2 = (g1 + 1) % g
	}
	// The tag comes from bits the group does not: fastrange places by the high ones.
	return g1 * groupLen, g2 * groupLen, uint32(h>>32) << tagShift
}

// findRec returns the record of (rank, v), or noRec.
func (ix *Index) findRec(rank int, v uint64) uint32 {
	a, b, tag := ix.groups(ix.recHash(rank, v))
	for _, g := range [2]int{a, b} {
		for _, e := range ix.rtab[g : g+groupLen] {
			if e != 0 && e&^linkMask == tag && ix.isRec(e&linkMask-1, rank, v) {
				return e&linkMask - 1
			}
		}
	}
	for _, e := range ix.stash {
		if ix.isRec(e&linkMask-1, rank, v) {
			return e&linkMask - 1
		}
	}
	return noRec
}

func (ix *Index) isRec(ri uint32, rank int, v uint64) bool {
	r := ix.recs.at(ri)
	return r.vhash() == v && r.rank() == rank
}

// deleteRec takes record ri, of (rank, v), out of rtab.
func (ix *Index) deleteRec(ri uint32, rank int, v uint64) {
	a, b, tag := ix.groups(ix.recHash(rank, v))
	want := tag | (ri + 1)
	for _, g := range [2]int{a, b} {
		for i := g; i < g+groupLen; i++ {
			if ix.rtab[i] == want {
				ix.rtab[i] = 0
				return
			}
		}
	}
	for i, e := range ix.stash {
		if e&linkMask == ri+1 {
			ix.stash[i] = ix.stash[len(ix.stash)-1]
			ix.stash = ix.stash[:len(ix.stash)-1]
			return
		}
	}
}

// insertRec puts record ri, of (rank, v), in rtab. It returns the record that found
// no place, or noRec: the caller drops that one from the index.
func (ix *Index) insertRec(ri uint32, rank int, v uint64) uint32 {
	a, b, tag := ix.groups(ix.recHash(rank, v))
	e := tag | (ri + 1)
	if ix.free(b) > ix.free(a) { // the emptier group, so that groups fill evenly
		a, b = b, a
	}
	if ix.place(a, e) || ix.place(b, e) {
		return noRec
	}
	return ix.kick(a, e)
}

// free counts the empty entries of group g.
func (ix *Index) free(g int) int {
	n := 0
	for _, e := range ix.rtab[g : g+groupLen] {
		if e == 0 {
			n++
		}
	}
	return n
}

// place puts entry e in an empty entry of group g.
func (ix *Index) place(g int, e uint32) bool {
	for i := g; i < g+groupLen; i++ {
		if ix.rtab[i] == 0 {
			ix.rtab[i] = e
			return true
		}
	}
	return false
}

// kick makes room for e in full group g by moving entries to their other group, a
// random walk whose choices come from a counter, not a random source.
func (ix *Index) kick(g int, e uint32) uint32 {
	for range maxKicks {
		ix.kicks++
		i := g + int(ix.kicks%groupLen)
		e, ix.rtab[i] = ix.rtab[i], e
		r := ix.recs.at(e&linkMask - 1)
		a, b, _ := ix.groups(ix.recHash(r.rank(), r.vhash()))
		if g = a; g == i/groupLen*groupLen {
			g = b
		}
		if ix.place(g, e) {
			return noRec
		}
	}
	if len(ix.stash) < stashLen {
		ix.stash = append(ix.stash, e)
		return noRec
	}
	return e&linkMask - 1
}
