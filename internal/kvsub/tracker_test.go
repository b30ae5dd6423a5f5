package kvsub

import "testing"

func TestTracker(t *testing.T) {
	tests := []struct {
		name string
		seqs []uint64
		want []verdict
		miss uint64 // want of the last gap
	}{
		{"in order from zero", []uint64{0, 1, 2}, []verdict{inOrder, inOrder, inOrder}, 0},
		{"joined late", []uint64{41, 42}, []verdict{inOrder, inOrder}, 0},
		{"gap", []uint64{0, 1, 5, 6}, []verdict{inOrder, inOrder, gap, inOrder}, 2},
		{"restart", []uint64{7, 8, 0, 1}, []verdict{inOrder, inOrder, wentBack, inOrder}, 0},
		{"repeat", []uint64{3, 3}, []verdict{inOrder, wentBack}, 0},
	}
	for _, tt := range tests {
		var tr tracker
		var miss uint64
		for i, s := range tt.seqs {
			v, w := tr.observe(s)
			if v != tt.want[i] {
				t.Fatalf("%s: seq %d: verdict %d, want %d", tt.name, s, v, tt.want[i])
			}
			if v == gap {
				miss = w
			}
		}
		if miss != tt.miss {
			t.Errorf("%s: first missing %d, want %d", tt.name, miss, tt.miss)
		}
		if tr.last() != int64(tt.seqs[len(tt.seqs)-1]) {
			t.Errorf("%s: last %d", tt.name, tr.last())
		}
	}
	var fresh tracker
	if fresh.last() != -1 {
		t.Fatal("a fresh tracker has a last seq")
	}
}
