package kvindex

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time. The machine is shared: wall-clock
// rates mostly measure the neighbours, CPU rates what this code costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The benchmark fleet: 8 ranks of 16-token blocks, filled to 1 M (block, rank)
// entries with realistic chains. 256 system prompts of 1,024 tokens are each cached
// on two or three ranks; conversations hang below them (512 to 3,072 tokens of
// history), each on one rank that holds its system prompt. Events arrive as vLLM
// sends them: prompts in prefill chunks of up to 32 blocks under the previous
// chunk's last hash, then the decoded third of each history one block per event,
// 64 conversations interleaved.
const (
	benchRanks     = 8
	benchBlock     = 16
	benchEntries   = 1_000_000
	benchSystems   = 256
	benchSysBlocks = 64
)

type benchConv struct {
	rank int
	toks []int64 // system prompt and history: all cached on rank
}

type benchFleet struct {
	ix    *Index
	convs []benchConv
}

var fleet *benchFleet

func benchFleetOnce(b *testing.B) *benchFleet {
	b.Helper()
	if fleet == nil {
		fleet = buildFleet(b, benchEntries)
	}
	return fleet
}

func randToks(rng *rand.Rand, n int) []int64 {
	t := make([]int64, n)
	for i := range t {
		t[i] = int64(rng.IntN(128_000))
	}
	return t
}

// storeChain stores toks on rank as vLLM's events would, chunk by chunk, each block's
// vLLM hash drawn from rng.
func storeChain(ix *Index, rng *rand.Rand, rank int, toks []int64, parent uint64) uint64 {
	for off := 0; off < len(toks); {
		n := min(32*benchBlock, len(toks)-off)
		s := &Stored{Tokens: toks[off : off+n], BlockSize: benchBlock, Parent: parent, HasParent: parent != 0}
		for range n / benchBlock {
			s.Hashes = append(s.Hashes, rng.Uint64()|1)
		}
		ix.Store(rank, s)
		parent = s.Hashes[len(s.Hashes)-1]
		off += n
	}
	return parent
}

func buildFleet(tb testing.TB, entries int) *benchFleet {
	ix, err := New(Config{MaxBlocks: entries + entries/16, MaxRanks: benchRanks})
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	type sys struct {
		toks  []int64
		ranks []int
		last  map[int]uint64 // rank → the system prompt's last vLLM hash there
	}
	systems := make([]sys, benchSystems)
	for i := range systems {
		s := &systems[i]
		s.toks, s.last = randToks(rng, benchSysBlocks*benchBlock), map[int]uint64{}
		for _, r := range rng.Perm(benchRanks)[:2+rng.IntN(2)] {
			s.ranks = append(s.ranks, r)
			s.last[r] = storeChain(ix, rng, r, s.toks, 0)
		}
	}
	f := &benchFleet{ix: ix}
	for ix.Len() < entries {
		var group []decoding
		for range 64 {
			s := &systems[rng.IntN(len(systems))]
			r := s.ranks[rng.IntN(len(s.ranks))]
			hist := randToks(rng, benchBlock*(32+rng.IntN(161)))
			hist = hist[:min(len(hist), (entries-ix.Len())*benchBlock)]
			if len(hist) == 0 {
				break
			}
			// The history's first two thirds were prompts, prefilled in chunks; the
			// last third was decoded, one block per event.
			pre := len(hist) / benchBlock * 2 / 3 * benchBlock
			last := storeChain(ix, rng, r, hist[:pre], s.last[r])
			group = append(group, decoding{rank: r, toks: hist[pre:], parent: last})
			f.convs = append(f.convs, benchConv{rank: r, toks: slices.Concat(s.toks, hist)})
		}
		storeDecoded(ix, rng, group)
	}
	return f
}

// decoding is a conversation whose output blocks are still to be stored.
type decoding struct {
	rank   int
	toks   []int64
	parent uint64
}

// storeDecoded stores the groups' output blocks as concurrent decoding does: one
// block per event, the conversations interleaved.
func storeDecoded(ix *Index, rng *rand.Rand, group []decoding) {
	for k := 0; ; k++ {
		more := false
		for i := range group {
			g := &group[i]
			if (k+1)*benchBlock > len(g.toks) {
				continue
			}
			h := rng.Uint64() | 1
			ix.Store(g.rank, &Stored{Hashes: []uint64{h}, Tokens: g.toks[k*benchBlock : (k+1)*benchBlock],
				BlockSize: benchBlock, Parent: g.parent, HasParent: true})
			g.parent, more = h, true
		}
		if !more {
			return
		}
	}
}

// benchQueries are 4,096-token prompts: the next turn of a conversation (its history
// cached on one rank, the rest new), or, one in eight, a new conversation under a
// known system prompt.
func benchQueries(f *benchFleet, n int) []*Query {
	rng := rand.New(rand.NewPCG(9, 9))
	qs := make([]*Query, n)
	for i := range qs {
		c := f.convs[rng.IntN(len(f.convs))]
		base := c.toks
		if i%8 == 0 {
			base = c.toks[:benchSysBlocks*benchBlock]
		}
		base = base[:min(len(base), 4096)]
		qs[i] = &Query{Tokens: slices.Concat(base, randToks(rng, 4096-len(base))), StopAt: -1}
	}
	return qs
}

// BenchmarkLookup4096 looks up 4,096-token prompts against 1 M entries, rotating over
// 1,024 prompts (about 200,000 distinct blocks walked, more than the CPU caches
// hold). p50-ns and p99-ns time each call.
func BenchmarkLookup4096(b *testing.B) {
	f := benchFleetOnce(b)
	benchLookup(b, f, benchQueries(f, 1024))
}

// BenchmarkLookup4096Hot repeats one prompt whose 4,096 tokens are all cached: the
// full walk with the index in cache.
func BenchmarkLookup4096Hot(b *testing.B) {
	f := benchFleetOnce(b)
	var q *Query
	for _, c := range f.convs {
		if len(c.toks) >= 4096 {
			q = &Query{Tokens: c.toks[:4096], StopAt: -1}
			break
		}
	}
	if got := f.ix.Lookup(q, nil); len(got) == 0 || slices.MaxFunc(got, byCached).CachedTokens != 4096 {
		b.Fatalf("hot prompt: %v", got)
	}
	benchLookup(b, f, []*Query{q})
}

func byCached(a, b Match) int { return a.CachedTokens - b.CachedTokens }

func benchLookup(b *testing.B, f *benchFleet, qs []*Query) {
	out := make([]Match, 0, benchRanks)
	lat := make([]time.Duration, 0, 1<<16)
	// The prompt was just tokenized when the router looks it up: its tokens are in
	// cache, the index is not. Each prompt is copied into one buffer before the
	// timed call.
	buf := &Query{Tokens: make([]int64, 0, 4096)}
	hit, tok, n := 0, 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for i := 0; b.Loop(); i++ {
		q := qs[i%len(qs)]
		*buf = Query{Tokens: append(buf.Tokens[:0], q.Tokens...), StopAt: q.StopAt}
		q = buf
		t0 := time.Now()
		out = f.ix.Lookup(q, out[:0])
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(t0))
		}
		if len(out) > 0 {
			hit += slices.MaxFunc(out, byCached).CachedTokens
		}
		tok += len(q.Tokens)
		n++
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(n), "cpu-ns/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(hit)/float64(tok), "best-hit-ratio")
}

// BenchmarkStore ingests chains of 16-token blocks, events of 16 blocks, 8 events
// to a chain, into an index already full at 1 M entries: every block stored evicts
// one.
func BenchmarkStore(b *testing.B) {
	ix, err := New(Config{MaxBlocks: benchEntries, MaxRanks: benchRanks})
	if err != nil {
		b.Fatal(err)
	}
	st := newStoreStream()
	for ix.Len() < benchEntries {
		st.next(ix)
	}
	stored, blocks := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		stored += st.next(ix).Stored
		blocks += storeEvent
	}
	b.ReportMetric(float64(blocks)/b.Elapsed().Seconds(), "blocks/s")
	b.ReportMetric(float64(blocks)/(cpuTime()-cpu).Seconds(), "blocks/cpu-s")
	b.ReportMetric(float64(ix.kicks)/float64(blocks), "kicks/block")
	if stored != blocks {
		b.Fatalf("%d of %d blocks stored", stored, blocks)
	}
}

const storeEvent, storeChainLen = 16, 8

// storeStream makes the events of BenchmarkStore: new content, each chain on one
// rank, the ranks in turn.
type storeStream struct {
	i      int
	pool   []int64
	hashes []uint64
	toks   []int64
	parent uint64
}

func newStoreStream() *storeStream {
	return &storeStream{pool: randToks(rand.New(rand.NewPCG(3, 3)), 1<<16),
		hashes: make([]uint64, storeEvent), toks: make([]int64, storeEvent*benchBlock)}
}

func (st *storeStream) next(ix *Index) StoreResult {
	i := st.i
	st.i++
	copy(st.toks, st.pool[(i*97*benchBlock)%(len(st.pool)-len(st.toks)):])
	if i%storeChainLen == 0 {
		st.toks[0], st.parent = int64(i), 0 // a new root: new content all the way down
	}
	for j := range st.hashes {
		st.hashes[j] = uint64(i)<<8 | uint64(j) | 1<<63
	}
	s := Stored{Hashes: st.hashes, Tokens: st.toks, BlockSize: benchBlock, Parent: st.parent, HasParent: st.parent != 0}
	res := ix.Store(i/storeChainLen%benchRanks, &s)
	st.parent = st.hashes[storeEvent-1]
	return res
}

// BenchmarkMemoryPerEntry reports the heap per (block, rank) entry at 1 M entries:
// "distinct" stores a million different blocks (one rank each, the costliest case),
// "fleet" the benchmark fleet (system prompts on two or three ranks share a slot).
func BenchmarkMemoryPerEntry(b *testing.B) {
	for _, c := range []struct {
		name  string
		build func() *Index
	}{
		{"distinct", func() *Index {
			ix, _ := New(Config{MaxBlocks: benchEntries, MaxRanks: benchRanks})
			rng := rand.New(rand.NewPCG(5, 5))
			for r := 0; ix.Len() < benchEntries; r = (r + 1) % benchRanks {
				storeChain(ix, rng, r, randToks(rng, 128*benchBlock), 0)
			}
			return ix
		}},
		{"fleet", func() *Index { return buildFleet(b, benchEntries).ix }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				before := heapInUse()
				ix := c.build()
				after := heapInUse()
				perEntry := float64(after-before) / float64(ix.Len())
				perSlot := float64(ix.slotsInUse())
				b.ReportMetric(perEntry, "B/entry")
				b.ReportMetric(float64(ix.Len())/perSlot, "entries/slot")
				runtime.KeepAlive(ix)
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkKeyPrompt4096 keys a 4,096-token prompt (256 blocks of 16): the hashing
// every lookup pays before it touches the index.
func BenchmarkKeyPrompt4096(b *testing.B) {
	ix, _ := New(Config{MaxBlocks: 1024})
	q := &Query{Tokens: randToks(rand.New(rand.NewPCG(1, 1)), 4096), StopAt: -1}
	cpu := cpuTime()
	for b.Loop() {
		ix.promptKeys(q, benchBlock)
	}
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
