// Package engine is the bench's engine stand-in. It does the real engine-core
// handshake (HELLO, INIT, input registration, READY), so a frontend sees a
// protocol-exact engine, and on its side of the socket it notes when each ADD
// arrived and when each output left (Record). It runs behind switchyard and behind
// the floors alike, so the only difference between two phases of a run is the
// frontend.
//
//	recs, err := engine.Run(ctx, engine.Config{Rank: 0, Handshake: addr, TokensPerStep: 1})
package engine
