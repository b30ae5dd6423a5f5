// Package bench is switchyard's dispatch-latency harness (`switchyard bench`).
//
// It drives switchyard and, in the same run, a minimal ZeroMQ relay built on the same
// transport (client -> relay -> engine -> relay -> client, no dispatch logic), with the
// same engines, message sizes and load, so that every report states switchyard's
// overhead as a ratio to the transport floor of that machine at that moment.
//
// Timing crosses the frontend without touching it: the first prompt token of every
// request carries its sequence number, the bench's own engines (engine.go) note when
// each ADD arrives and when its outputs leave, and the client notes when it submitted
// and received. The two logs are joined after the run (timing.go). Both sides read the
// same clock: one process, or wall-clock nanoseconds on one host for child engines.
//
// The pure parts (histograms, arrivals, the join, the report and its comparison) hold
// no goroutines and are tested alone; run.go is the edge that owns sockets and time.
package bench
