// Package kvsub follows the KV-cache events that vLLM engines publish (vLLM's
// ZmqEventPublisher: a PUB socket, three frames per message, a replay ROUTER) and
// hands each rank's batches, in sequence order, to a Sink. It owns the sockets and
// one goroutine per subscribed rank; what the events mean is the Sink's concern
// (kvroute keeps the index).
//
// The pure parts are plain types tested without sockets: Resolve applies vLLM's
// bind-or-connect rule and per-rank port offset to an endpoint, and tracker decides,
// per message, whether its seq follows on, leaves a gap to replay, or went back (the
// engine restarted).
package kvsub
