// Package coordinator is switchyard's in-process replacement for vLLM's DP
// coordinator (vllm/v1/engine/coordinator.py), plus a client for vLLM's own
// coordinator when switchyard is one of several API servers behind it.
//
// It is shaped like etcd's raft: [Coordinator] is a pure state machine
// (engine events in, messages out, time passed in by the caller) that is
// table-tested without sockets, and [Node] is the thin socket edge that owns
// one loop goroutine feeding it. [External] is the client side of a Python
// coordinator's front publisher.
//
// What it keeps:
//   - load: per-engine waiting/running/kv_cache_usage from the engines' stats
//     messages, handed straight to the dispatcher (no publish lag for our own
//     routing) and published to other frontends at most every PublishInterval;
//   - waves (MoE data parallel only): current_wave and engines_running, the
//     START_DP_WAVE broadcasts that wake paused ranks, and wave_complete.
//
// See engine-protocol.md sections 2.3 and 5 for the wire protocol.
package coordinator
