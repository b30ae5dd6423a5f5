package kvindex

// Routed records, in prefix mode (engines publish no KV events), that the prompt's
// full blocks of blockSize are now cached on rank, as SGLang's router keeps an
// approximate tree of what it routed. The rank keeps at most capacityBlocks of them
// (the engine's reported num_gpu_blocks; 0 or less: only the global MaxBlocks),
// losing the least recently routed first. Blocks routed again become the newest.
func (ix *Index) Routed(rank int, q *Query, capacityBlocks int, blockSize int) {
	if !ix.validRank(rank) || blockSize < 1 || blockSize > ix.cfg.MaxBlockSize {
		return
	}
	fam, ok := ix.family(blockSize)
	if !ok {
		return
	}
	rs := ix.noteRank(rank, blockSize)
	rs.capacity = max(capacityBlocks, 0)
	ix.promptKeys(q, blockSize)
	// The content key stands in for vLLM's hash: it is unique on the rank. Newest
	// last, so the prompt's first block is the most recent, as in Store.
	ix.bound = ix.bound[:0]
	for i := len(ix.keys) - 1; i >= 0; i-- {
		si, _ := ix.bind(rank, ix.keys[i], ix.keys[i], fam)
		ix.bound = append(ix.bound, si)
	}
	ix.linkChildren(noSlot)
	if c := ix.ranks[rank].capacity; c > 0 && ix.ranks[rank].n > c {
		ix.evictOldest(rank, ix.ranks[rank].n-c)
	}
}
