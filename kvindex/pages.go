package kvindex

// pageBits sets the page of the slabs: 4,096 entries. Pages, not one growing slice,
// so that growth never copies the index under the caller's lock and no capacity is
// left unused beyond the last page.
const (
	pageBits = 12
	pageLen  = 1 << pageBits
)

// pages is a slab of T addressed by a uint32, grown one page at a time.
type pages[T any] struct {
	p [][]T
	n uint32 // entries handed out so far
}

func (s *pages[T]) at(i uint32) *T {
	return &s.p[i>>pageBits][i&(pageLen-1)]
}

// grow hands out a fresh entry.
func (s *pages[T]) grow() uint32 {
	if int(s.n)>>pageBits == len(s.p) {
		s.p = append(s.p, make([]T, pageLen))
	}
	s.n++
	return s.n - 1
}

// newSlot takes a slot from the free list or the slab.
func (ix *Index) newSlot(key uint64, fam uint8) uint32 {
	var i uint32
	if ix.slotFree != 0 {
		i = ix.slotFree - 1
		ix.slotFree = uint32(ix.slots.at(i).mask)
	} else {
		i = ix.slots.grow()
	}
	*ix.slots.at(i) = slot{key: key, meta: uint64(fam) << famShift}
	ix.fams[fam].slots++
	return i
}

func (ix *Index) freeSlot(i uint32) {
	s := ix.slots.at(i)
	ix.dropAux(s)
	ix.fams[s.fam()].slots--
	*s = slot{mask: uint64(ix.slotFree)} // a free slot links the free list through mask
	ix.slotFree = i + 1
}

// newRec takes a record from the free list or the slab.
func (ix *Index) newRec() uint32 {
	if ix.recFree != 0 {
		i := ix.recFree - 1
		ix.recFree = ix.recs.at(i).next
		return i
	}
	return ix.recs.grow()
}

func (ix *Index) freeRec(i uint32) {
	*ix.recs.at(i) = rec{next: ix.recFree}
	ix.recFree = i + 1
}

// auxOf returns the slot's aux, making one when it has none. Freed aux keep their
// slices' capacity, so steady-state marks do not allocate.
func (ix *Index) auxOf(s *slot) *aux {
	if s.aux() != 0 {
		return &ix.aux[s.aux()]
	}
	if ix.auxFree != 0 {
		s.setAux(ix.auxFree)
		ix.auxFree = ix.aux[s.aux()].free
	} else {
		ix.aux = append(ix.aux, aux{})
		s.setAux(uint32(len(ix.aux) - 1))
	}
	a := &ix.aux[s.aux()]
	a.free = 0
	return a
}

// dropAux frees a slot's aux whatever it holds; the slot is going away.
func (ix *Index) dropAux(s *slot) {
	if s.aux() == 0 {
		return
	}
	a := &ix.aux[s.aux()]
	clear(a.over)
	a.promoted, a.overN, a.pend = false, 0, a.pend[:0]
	a.free = ix.auxFree
	ix.auxFree = s.aux()
	s.setAux(0)
}

// maybeDropAux frees a slot's aux once it holds nothing.
func (ix *Index) maybeDropAux(s *slot) {
	if s.aux() == 0 {
		return
	}
	a := &ix.aux[s.aux()]
	if a.promoted || len(a.pend) > 0 {
		return
	}
	a.free = ix.auxFree
	ix.auxFree = s.aux()
	s.setAux(0)
}
