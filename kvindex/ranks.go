package kvindex

import "math/bits"

// A slot's holders are a bitset. The common case, every holder within one group of
// 64 ranks, lives inline (slot.mask over the group slot.base()); holders that span groups
// promote the slot to a full bitset in its aux, sized for Config.MaxRanks. So up to
// 64 ranks pay nothing, and 1,024 ranks pay only for blocks held across groups.

// hasRank reports whether rank holds the slot's block.
func (ix *Index) hasRank(s *slot, rank int) bool {
	return ix.rankWord(s, rank>>6)&(1<<(rank&63)) != 0
}

// rankWord is the slot's holders in group w.
func (ix *Index) rankWord(s *slot, w int) uint64 {
	if s.aux() != 0 {
		if a := &ix.aux[s.aux()]; a.promoted {
			return a.over[w]
		}
	}
	if s.base() == w {
		return s.mask
	}
	return 0
}

// addRank adds rank to the slot's holders; false when it was there already.
func (ix *Index) addRank(s *slot, rank int) bool {
	g, b := rank>>6, uint64(1)<<(rank&63)
	if s.aux() != 0 {
		if a := &ix.aux[s.aux()]; a.promoted {
			if a.over[g]&b != 0 {
				return false
			}
			a.over[g] |= b
			a.overN++
			return true
		}
	}
	switch {
	case s.mask == 0:
		s.setBase(g)
		s.mask = b
	case s.base() == g:
		if s.mask&b != 0 {
			return false
		}
		s.mask |= b
	default:
		ix.promote(s, g, b)
	}
	return true
}

// promote moves the slot's holders to a full bitset and adds bit b of group g.
func (ix *Index) promote(s *slot, g int, b uint64) {
	a := ix.auxOf(s)
	if a.over == nil {
		a.over = make([]uint64, (ix.cfg.MaxRanks+63)/64)
	}
	a.promoted = true
	a.over[s.base()] = s.mask
	a.over[g] |= b
	a.overN = bits.OnesCount64(s.mask) + 1
	s.mask = 0
	s.setBase(0)
}

// delRank removes rank from the slot's holders.
func (ix *Index) delRank(s *slot, rank int) {
	g, b := rank>>6, uint64(1)<<(rank&63)
	if s.aux() != 0 {
		if a := &ix.aux[s.aux()]; a.promoted {
			if a.over[g]&b != 0 {
				a.over[g] &^= b
				a.overN--
			}
			return
		}
	}
	if s.base() == g {
		s.mask &^= b
	}
}

// unheld reports whether no rank holds the slot and no mark waits for it: the
// slot can go.
func (ix *Index) unheld(s *slot) bool {
	if s.aux() == 0 {
		return s.mask == 0
	}
	a := &ix.aux[s.aux()]
	if a.promoted {
		return a.overN == 0 && len(a.pend) == 0
	}
	return s.mask == 0 && len(a.pend) == 0
}
