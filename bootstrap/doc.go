// Package bootstrap is switchyard's embedded KV-transfer bootstrap registry,
// wire-compatible with the HTTP "bootstrap server" of vLLM's Mooncake
// connector (POST /register, GET /query).
//
// vLLM's own registry has no expiry, no delete and no liveness, so a prefill
// engine that restarts while the registry still holds its old entry is
// rejected with a fatal HTTP 400 ("Engine ID mismatch ..." or "... is already
// registered at ..."). This registry decides such conflicts when they arrive:
// it probes the old holder's ZeroMQ ports and lets the newcomer take over only
// when the old holder is dead. Two live deployments that collide still get the
// exact vLLM 400.
//
// The package is split as the rest of switchyard: [Registry] is the pure state
// (no goroutines, no sockets, time passed in), and [Server] is the thin edge
// (HTTP handler, prober goroutine, snapshot file, metrics).
package bootstrap
