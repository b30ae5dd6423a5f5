// Package floor holds the bench's baselines, the floors switchyard is measured
// against in the same run: Relay, a minimal frontend that forwards ADDs and
// outputs between clients and engines with no routing or bookkeeping, and
// HTTPFloor, the same over HTTP with a hand-written JSON or SSE answer, and
// EmbedFloor, POST /v1/embeddings as pooling ADDs. All do the real engine
// handshake, so the bench engines cannot tell them from switchyard.
//
//	r, err := floor.StartRelay(ctx, transport.ZMQ, floor.RelayAddrs{...})
//	err = r.AwaitEngines(ctx, engines)
//	defer r.Close()
package floor
