// Package kvroute is switchyard's cache-aware rank choice: the kv and prefix policies.
// It joins three parts and owns none of their logic:
//
//   - kvindex, the IO-free index of which rank holds which prompt prefix and the
//     scorer that trades cache against load, kept here behind one mutex;
//   - frontend/kvsub, which follows every engine's KV-event publisher and hands the
//     batches to this package (Router implements kvsub.Sink);
//   - the dispatcher, which asks Router.Route for every request that pins no rank
//     (Router implements dispatcher.CacheRouter).
//
// Here live the conversions between them (vLLM's events, filtered by medium and KV
// cache group, into kvindex's input; a request into a lookup), where each rank's
// publisher is (flags or the engine's registration), the metrics of the spec and the
// per-rank status that /v1/engines shows.
package kvroute
