package kvindex

import (
	"encoding/binary"
	"testing"
)

// FuzzOps drives an Index with operations decoded from the input, as a hostile
// engine or client could shape them, and checks that it never panics and stays
// within its bounds.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("\x00\x03\x05\x07\x01\x03\x05\x00\x02\x00\x04\x01\x05\x02\x06\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := New(Config{MaxBlocks: 16, MaxRanks: 70, MaxPending: 8, MaxBlockSizes: 2,
			MaxBlockSize: 8, DefaultBlockSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		r := fuzzReader{data: data}
		for r.more() {
			fuzzStep(ix, &r)
			checkBounds(t, ix)
		}
	})
}

// fuzzStep applies one decoded operation.
func fuzzStep(ix *Index, r *fuzzReader) {
	rank := int(r.byte()%72) - 1 // includes -1 and ranks past MaxRanks
	switch r.byte() % 7 {
	case 0, 1:
		n, bs := int(r.byte()%4), int(r.byte()%10)
		s := &Stored{BlockSize: bs, HasParent: r.byte()%2 == 0, Parent: uint64(r.byte() % 8)}
		for range n {
			s.Hashes = append(s.Hashes, uint64(r.byte()%8))
		}
		for range n*max(bs, 0) + int(r.byte()%2) {
			s.Tokens = append(s.Tokens, int64(r.byte()%3))
		}
		if r.byte()%3 == 0 {
			s.Extra = make([][]byte, n+int(r.byte()%2))
		}
		s.LoRAName, s.HasLoRAName = "a", r.byte()%4 == 0
		ix.Store(rank, s)
	case 2:
		ix.Remove(rank, []uint64{uint64(r.byte() % 8), uint64(r.byte() % 8)})
	case 3:
		ix.Clear(rank)
	case 4:
		ix.MarkPending(rank, r.query(), int64(r.byte()))
	case 5:
		ix.Routed(rank, r.query(), int(r.byte()%6), int(r.byte()%5))
	default:
		ix.Lookup(r.query(), nil)
		ix.Expire(int64(r.byte()) * sec / 16)
	}
}

func checkBounds(t *testing.T, ix *Index) {
	t.Helper()
	sum := 0
	for r := range ix.ranks {
		sum += ix.Blocks(r)
	}
	if sum != ix.Len() || ix.Len() > ix.cfg.MaxBlocks || ix.Pending() > ix.cfg.MaxPending {
		t.Fatalf("Len %d, sum of ranks %d, Pending %d", ix.Len(), sum, ix.Pending())
	}
	if ix.slotsInUse() > ix.Len()+ix.Pending() {
		t.Fatalf("%d slots for %d entries and %d marks", ix.slotsInUse(), ix.Len(), ix.Pending())
	}
}

type fuzzReader struct {
	data []byte
	off  int
}

func (r *fuzzReader) more() bool { return r.off < len(r.data) }

func (r *fuzzReader) byte() byte {
	if r.off >= len(r.data) {
		return 0
	}
	r.off++
	return r.data[r.off-1]
}

func (r *fuzzReader) query() *Query {
	q := &Query{StopAt: int(int8(r.byte())), Now: int64(binary.LittleEndian.Uint16([]byte{r.byte(), r.byte()}))}
	for range r.byte() % 12 {
		q.Tokens = append(q.Tokens, int64(r.byte()%3))
	}
	if r.byte()%4 == 0 {
		q.LoRAName = "a"
	}
	return q
}
