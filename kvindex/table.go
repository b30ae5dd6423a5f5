package kvindex

// ctab is a linear-probing table, sized for its cap at New (see tableSize) so that it
// never rehashes, with backward-shift deletion so that it never fills with
// tombstones.
//
// ctab maps a content key to its slot. A bucket holds the key's high 32 bits (its
// tag) beside the slot number, so a probe compares in the table and touches the slot
// only on a likely match. The home bucket is computed from the tag alone, so a
// deletion shifts buckets without touching their slots.
//
// rtab, (rank, vLLM hash) to record, is in rtab.go.

const tagMask = 0xffffffff_00000000

// findSlot returns the slot holding key, or noSlot.
func (ix *Index) findSlot(key uint64) uint32 {
	i, _ := ix.probeSlot(key)
	if i < 0 {
		return noSlot
	}
	return uint32(ix.ctab[i]) - 1
}

// ctabHome is the home bucket of a key or of a bucket: from the tag (high 32 bits).
func ctabHome(tagged uint64, n int) int {
	return int((tagged >> 32) * uint64(n) >> 32)
}

// probeSlot returns key's bucket, or -1 and the empty bucket where it would go.
func (ix *Index) probeSlot(key uint64) (int, int) {
	n := len(ix.ctab)
	tag := key & tagMask
	for i := ctabHome(key, n); ; {
		b := ix.ctab[i]
		if b == 0 {
			return -1, i
		}
		if b&tagMask == tag && ix.slots.at(uint32(b)-1).key == key {
			return i, 0
		}
		if i++; i == n {
			i = 0
		}
	}
}

// slotFor finds or makes the slot of key.
func (ix *Index) slotFor(key uint64, fam uint8) uint32 {
	i, empty := ix.probeSlot(key)
	if i >= 0 {
		return uint32(ix.ctab[i]) - 1
	}
	s := ix.newSlot(key, fam)
	ix.ctab[empty] = key&tagMask | uint64(s+1)
	return s
}

// maybeFreeSlot frees slot si once nothing holds it.
func (ix *Index) maybeFreeSlot(si uint32) {
	s := ix.slots.at(si)
	if !ix.unheld(s) {
		return
	}
	if i, _ := ix.probeSlot(s.key); i >= 0 {
		ix.shiftSlots(i)
	}
	ix.freeSlot(si)
}

// shiftSlots empties bucket i and moves later buckets of its cluster back into the
// hole when their probe path crosses it.
func (ix *Index) shiftSlots(i int) {
	n := len(ix.ctab)
	for j := i; ; {
		ix.ctab[i] = 0
		for {
			if j++; j == n {
				j = 0
			}
			b := ix.ctab[j]
			if b == 0 {
				return
			}
			if h := ctabHome(b, n); onPath(h, i, j) {
				ix.ctab[i] = b
				i = j
				break
			}
		}
	}
}

// onPath reports whether bucket i lies on the probe path from home h to bucket j,
// cyclically in [h, j).
func onPath(h, i, j int) bool {
	if h <= j {
		return h <= i && i < j
	}
	return i >= h || i < j
}
