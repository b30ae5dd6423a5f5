package kvindex_test

import (
	"fmt"

	"github.com/switchyard-llm/switchyard/kvindex"
)

// Two ranks have cached different lengths of a system prompt; the index says how
// much of a new prompt each holds, and the scorer trades that against load.
func Example() {
	ix, err := kvindex.New(kvindex.Config{MaxBlocks: 1 << 12, MaxRanks: 8})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Block size 4: a 10-token system prompt fills two blocks (8 tokens).
	system := []int64{1, 887, 526, 263, 8444, 20255, 29889, 13, 4911, 29901}

	// BlockStored events, as the edge hands them over: rank 0 stored both blocks
	// (one chain: a root, then its child), rank 1 only the first. Hashes are the
	// engine's own block hashes, used to link parents and apply BlockRemoved.
	ix.Store(0, &kvindex.Stored{Hashes: []uint64{0xa1, 0xa2}, Tokens: system[:8], BlockSize: 4})
	ix.Store(1, &kvindex.Stored{Hashes: []uint64{0xb1}, Tokens: system[:4], BlockSize: 4})

	prompt := append(append([]int64{}, system...), 1724, 338, 263) // system prompt + question
	q := &kvindex.Query{Tokens: prompt, StopAt: -1}                // -1: no multimodal placeholder
	matches := ix.Lookup(q, nil)
	for _, m := range matches {
		fmt.Printf("rank %d: %d tokens cached, blocks matched: %d\n", m.Rank, m.CachedTokens, m.CachedTokens/4)
	}

	// The scorer weighs the prefill each rank would still do against its load.
	cands := make([]kvindex.Candidate, 2)
	for _, m := range matches {
		cands[m.Rank] = kvindex.Candidate{CachedTokens: m.CachedTokens, PendingTokens: m.PendingTokens}
	}
	cands[0].Ready, cands[1].Ready = true, true
	var sc kvindex.Scorer
	d := sc.Choose(cands, len(prompt), 0)
	fmt.Printf("idle ranks: rank %d (%s), %d tokens cached\n", d.Index, d.Reason, d.CachedTokens)

	// Load counts in tokens too, at the mean prefill per request (at least 128): one
	// more request queued on rank 0 outweighs the 4 tokens more it holds.
	cands[0].Load = 1
	d = sc.Choose(cands, len(prompt), 1)
	fmt.Printf("rank 0 busier: rank %d (%s), %d tokens cached\n", d.Index, d.Reason, d.CachedTokens)
	// Output:
	// rank 0: 8 tokens cached, blocks matched: 2
	// rank 1: 4 tokens cached, blocks matched: 1
	// idle ranks: rank 0 (cache_hit), 8 tokens cached
	// rank 0 busier: rank 1 (load), 4 tokens cached
}
