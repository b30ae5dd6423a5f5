// Package kvindex knows which engine rank holds which prompt prefix in its KV cache,
// and trades that cache against load when a request is routed.
//
// Its one concern is the prefix index and the score built on it: blocks keyed by their
// content (parent key, token ids, the block's extra keys, LoRA name), looked up for a
// prompt in one pass, plus the marks of prefixes still on their way to a rank and the
// approximate index of prompts routed when engines publish no events.
//
// It is an IO-free core in the manner of etcd's raft: no goroutines, no sockets, no
// clock (time comes in as unix nanoseconds), and it does not import wire. The edge
// decodes vLLM's KV events, keeps only the GPU medium and the first full-attention
// group (group_idx 0 or absent), folds a 32-byte block hash to 64 bits, and hands
// the rest to [Index.Store], [Index.Remove] and [Index.Clear]. Routing calls
// [Index.Lookup], [Index.MarkPending] (or [Index.Routed] without events) and
// [Scorer.Choose].
//
// An [Index] is not safe for concurrent use: the caller holds one mutex around every
// call. Every method is short in time (work proportional to the blocks it is given,
// with no rehash or large copy), except [Index.Clear], which walks the rank's blocks.
package kvindex
