package kvroute

import (
	"github.com/switchyard-llm/switchyard/kvindex"
	"github.com/switchyard-llm/switchyard/wire"
)

// The event labels of switchyard_kv_events_total: vLLM's three tags, and what was
// not applied.
const (
	evStored   = "BlockStored"
	evRemoved  = "BlockRemoved"
	evCleared  = "AllBlocksCleared"
	evMedium   = "ignored_medium" // a lower tier (CPU offload): not what a prefill reads
	evGroup    = "ignored_group"  // a KV cache group other than the first (hybrid models)
	evSkipped  = "skipped"        // the decoder could not take it (unknown tag, wrong types...)
	evUnparent = "unknown_parent" // its parent is not in the index: its prefix is unusable
	evInvalid  = "invalid"        // refused by the index (block size, token count)
)

// KVBatch implements kvsub.Sink: one batch of rank's events, in order.
func (r *Router) KVBatch(rank int, b *wire.KVEventBatch) {
	rm := r.m.rank(rank)
	skipped := 0
	for _, n := range b.Skipped {
		skipped += n
	}
	rm.add(evSkipped, skipped)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range b.Events {
		r.apply(rank, &b.Events[i], rm)
	}
}

// apply applies one event. Caller holds r.mu.
func (r *Router) apply(rank int, e *wire.KVEvent, rm *rankMetrics) {
	switch e.Kind {
	case wire.KVAllBlocksCleared:
		r.ix.Clear(rank)
		rm.add(evCleared, 1)
		return
	case wire.KVBlockStored, wire.KVBlockRemoved:
	default:
		rm.add(evSkipped, 1)
		return
	}
	// Only the GPU tier of the first full-attention group is what a prefill can
	// skip; vLLM's medium is "GPU" by default and group 0 (or none) is that group.
	if e.Medium.Valid && e.Medium.Value != "GPU" {
		rm.add(evMedium, 1)
		return
	}
	if e.GroupIdx.Valid && e.GroupIdx.Value != 0 {
		rm.add(evGroup, 1)
		return
	}
	r.hashes = r.hashes[:0]
	for _, h := range e.BlockHashes {
		r.hashes = append(r.hashes, uint64(h))
	}
	if e.Kind == wire.KVBlockRemoved {
		r.ix.Remove(rank, r.hashes)
		rm.add(evRemoved, 1)
		return
	}
	s := &r.stored
	*s = kvindex.Stored{Hashes: r.hashes, Parent: uint64(e.Parent), HasParent: e.HasParent,
		Tokens: e.TokenIDs, BlockSize: int(e.BlockSize), Extra: s.Extra[:0]}
	if e.LoRAName.Valid {
		s.LoRAName, s.HasLoRAName = e.LoRAName.Value, true
	}
	if e.LoRAID.Valid {
		s.LoRAID, s.HasLoRAID = e.LoRAID.Value, true
	}
	if e.ExtraKeys != nil {
		for _, x := range e.ExtraKeys {
			s.Extra = append(s.Extra, []byte(x))
		}
	} else {
		s.Extra = nil
	}
	res := r.ix.Store(rank, s)
	rm.add(evStored, 1)
	rm.add(evUnparent, res.UnknownParent)
	rm.add(evInvalid, res.Invalid)
}

// KVClear implements kvsub.Sink.
func (r *Router) KVClear(rank int, reason string) { r.Clear(rank, reason) }
