package kvindex

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// model is a plain reference of the index's event semantics: per rank, a list of
// (vLLM hash, content) from oldest to newest, content named by its whole token path.
type model struct {
	max   int
	ranks [][]modelEntry
}

type modelEntry struct {
	v    uint64
	path string
}

func (m *model) total() int {
	n := 0
	for _, r := range m.ranks {
		n += len(r)
	}
	return n
}

func (m *model) find(rank int, v uint64) int {
	return slices.IndexFunc(m.ranks[rank], func(e modelEntry) bool { return e.v == v })
}

func (m *model) store(rank int, parent uint64, hasParent bool, vs []uint64, paths []string) {
	if hasParent && m.find(rank, parent) < 0 {
		return
	}
	for i := len(vs) - 1; i >= 0; i-- {
		if j := m.find(rank, vs[i]); j >= 0 {
			e := m.ranks[rank][j]
			m.ranks[rank] = slices.Delete(m.ranks[rank], j, j+1)
			if e.path == paths[i] {
				m.ranks[rank] = append(m.ranks[rank], e)
				continue
			}
		}
		if m.total() >= m.max {
			big := 0
			for r := range m.ranks {
				if len(m.ranks[r]) > len(m.ranks[big]) {
					big = r
				}
			}
			m.ranks[big] = m.ranks[big][1:]
		}
		m.ranks[rank] = append(m.ranks[rank], modelEntry{vs[i], paths[i]})
	}
}

func (m *model) remove(rank int, vs []uint64) {
	for _, v := range vs {
		if j := m.find(rank, v); j >= 0 {
			m.ranks[rank] = slices.Delete(m.ranks[rank], j, j+1)
		}
	}
}

// lookup is each rank's count of leading blocks it holds, in tokens.
func (m *model) lookup(paths []string, blockSize int) map[int]int {
	got := map[int]int{}
	for r, es := range m.ranks {
		n := 0
		for _, p := range paths {
			if !slices.ContainsFunc(es, func(e modelEntry) bool { return e.path == p }) {
				break
			}
			n++
		}
		if n > 0 {
			got[r] = n * blockSize
		}
	}
	return got
}

// paths names each block of toks by its whole prefix.
func paths(toks []int64, blockSize int) []string {
	var out []string
	for i := blockSize; i <= len(toks); i += blockSize {
		out = append(out, fmt.Sprint(toks[:i]))
	}
	return out
}

func pathHash(p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	return h.Sum64()
}

// TestAgainstModel runs random stores, removals and clears on the index and on the
// reference, and compares every lookup. Small alphabets make chains share prefixes;
// a small cap makes eviction frequent; some hashes are random, so that one content
// gets two hashes and one hash gets rebound.
func TestAgainstModel(t *testing.T) {
	const blockSize, ranks, maxBlocks = 2, 4, 24
	nonEmpty := 0
	defer func() { t.Logf("non-empty rank matches: %d", nonEmpty) }()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 1))
		// MaxPending 1 keeps the content table tight, so clusters and shifts are common.
		ix := newTestIndex(t, Config{MaxBlocks: maxBlocks, MaxRanks: ranks, MaxPending: 1})
		m := &model{max: maxBlocks, ranks: make([][]modelEntry, ranks)}
		randToks := func() []int64 {
			toks := make([]int64, 2*blockSize+rng.IntN(3*blockSize))
			for i := range toks {
				toks[i] = int64(rng.IntN(3))
			}
			return toks
		}
		for step := range 400 {
			rank := rng.IntN(ranks)
			switch op := rng.IntN(10); {
			case op < 6:
				toks := randToks()
				ps := paths(toks, blockSize)
				k := rng.IntN(len(ps))
				vs := make([]uint64, len(ps)-k)
				for i := range vs {
					vs[i] = pathHash(ps[k+i])
					if rng.IntN(20) == 0 {
						vs[i] = uint64(rng.IntN(8)) // collides with other content now and then
					}
				}
				s := &Stored{Hashes: vs, Tokens: toks[k*blockSize : len(ps)*blockSize], BlockSize: blockSize}
				if k > 0 {
					s.Parent, s.HasParent = pathHash(ps[k-1]), true
				}
				ix.Store(rank, s)
				m.store(rank, s.Parent, s.HasParent, vs, ps[k:])
			case op < 8:
				ps := paths(randToks(), blockSize)
				vs := []uint64{pathHash(ps[rng.IntN(len(ps))]), uint64(rng.IntN(8))}
				ix.Remove(rank, vs)
				m.remove(rank, vs)
			case op < 9:
				if rng.IntN(4) == 0 {
					ix.Clear(rank)
					m.ranks[rank] = nil
				} else { // marks share slots with blocks but never change what is cached
					ix.MarkPending(rank, prompt(randToks()), int64(step))
				}
			default:
				for q := range 5 {
					toks := randToks()
					want := m.lookup(paths(toks, blockSize), blockSize)
					nonEmpty += len(want)
					if diff := cmp.Diff(want, cached(ix, prompt(toks))); diff != "" {
						t.Fatalf("seed %d step %d query %d %v (-model +index):\n%s", seed, step, q, toks, diff)
					}
				}
			}
			for r := range ranks {
				if ix.Blocks(r) != len(m.ranks[r]) {
					t.Fatalf("seed %d step %d: rank %d has %d blocks, model %d", seed, step, r, ix.Blocks(r), len(m.ranks[r]))
				}
			}
		}
		for r := range ranks {
			ix.Clear(r)
		}
		ix.Expire(1 << 62)
		if ix.slotsInUse() != 0 || len(ix.dups) != 0 {
			t.Fatalf("seed %d: %d slots and %d dups left after clearing all", seed, ix.slotsInUse(), len(ix.dups))
		}
	}
}
