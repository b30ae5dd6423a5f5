package kvindex

import "testing"

// TestRtabOverflow fills rtab past its groups: entries that find no group wait in
// the stash, and past the stash one is handed back to be dropped; every other
// entry stays findable, and deleting works in groups and stash alike.
func TestRtabOverflow(t *testing.T) {
	ix := newTestIndex(t, Config{MaxBlocks: 8})
	capacity := len(ix.rtab) + stashLen
	var held, lost []uint32
	for i := range capacity + 5 {
		ri := ix.newRec()
		ix.recs.at(ri).set(i%3, uint64(i)*7919, 0)
		if l := ix.insertRec(ri, i%3, uint64(i)*7919); l != noRec {
			lost = append(lost, l)
		}
		held = append(held, ri)
	}
	if len(lost) != 5 || len(ix.stash) != stashLen {
		t.Fatalf("lost %d, stash %d; want 5 and %d", len(lost), len(ix.stash), stashLen)
	}
	isLost := map[uint32]bool{}
	for _, l := range lost {
		isLost[l] = true
	}
	for _, ri := range held {
		r := ix.recs.at(ri)
		got := ix.findRec(r.rank(), r.vhash())
		if isLost[ri] != (got == noRec) || !isLost[ri] && got != ri {
			t.Fatalf("record %d (lost %v): findRec = %d", ri, isLost[ri], got)
		}
	}
	for _, ri := range held {
		if r := ix.recs.at(ri); !isLost[ri] {
			ix.deleteRec(ri, r.rank(), r.vhash())
			if ix.findRec(r.rank(), r.vhash()) != noRec {
				t.Fatalf("record %d still found after deleteRec", ri)
			}
		}
	}
	if len(ix.stash) != 0 {
		t.Errorf("stash holds %d after deleting all", len(ix.stash))
	}
	for _, e := range ix.rtab {
		if e != 0 {
			t.Fatal("rtab not empty after deleting all")
		}
	}
}
