// Package clientapi is the msgpack client protocol on --client-address: a
// ZeroMQ ROUTER that speaks the engine-core vocabulary (ADD, ABORT, UTILITY,
// AUTH) to clients and answers with EngineCoreOutputs, so a vLLM-style client
// drives the dispatcher as it would drive an engine. README.md is the
// protocol's reference.
//
// It owns the client connections, their requests and the batching of their
// outputs; it does not own the dispatcher. The composition root builds it with
// ListenClients(ctx, ClientConfig, dispatcher), calls EndBatch(rank) after
// every engine message it hands the dispatcher and SealBatchDown(rank) when an
// engine goes down, and Close at shutdown before closing the dispatcher.
//
// Concurrency: each connection's messages are handled on that connection's
// reader goroutine; one writer at a time writes to each client; outputs
// arrive on the dispatcher's delivery goroutines. ClientServer.mu guards what
// they share. UTILITY calls run on their own goroutines (at most 64). Close
// stops the sweeper, lets each writer send what is queued, closes the socket
// and joins every goroutine the server started, including those started to
// get out from under its lock (aborts at the engines, a gone client's
// cleanup). EndBatch, SealBatchDown and Addr are safe from any goroutine.
package clientapi
