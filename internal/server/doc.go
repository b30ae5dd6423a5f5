// Package server is the composition root of `switchyard serve`: Config (what
// cmd/switchyard sets from its flags), Start and Shutdown. It builds every
// component and hands each the others it needs; nothing below it knows how
// the process is assembled.
//
// Start wires, in dependency order: the DP coordinator (in-process, external,
// or the cluster leader's), the dispatcher, the engine frontend (and the
// built-in mock engines, the only package that imports internal/mockengine),
// the bootstrap registry, tracing, the stats line, the client protocol
// (internal/clientapi), the HTTP API (internal/httpapi), prefill engines for
// P/D disaggregation and cache-aware routing (internal/kvroute). Shutdown
// drains the dispatcher for Config.ShutdownTimeout, then closes everything in
// reverse order; a Start that fails part way tears down what it started.
//
// Concurrency: Start and Shutdown are called once each, from one goroutine;
// Shutdown is idempotent. Every other exported method is safe for concurrent
// use once Start returned. Done is closed when a component fails on its own
// (Err says why); the caller then calls Shutdown. Each goroutine the root
// starts (stats loop, bootstrap registry, mock engines) is joined by Shutdown.
package server
