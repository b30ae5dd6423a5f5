// Package dispatcher is switchyard's Go API: submit a request, get a stream of its
// outputs. It chooses each request's data-parallel rank, keeps the table of live
// requests, routes every engine output to its stream, batches aborts per engine, fans
// utility calls out to every engine and turns every failure into a typed error.
//
// It does no socket IO itself. A Sender (the frontend's per-engine writers) carries
// frames to engines; an adapter over the frontend's handler feeds engine events in
// (EngineUp, EngineDown, HandleOutputs, ObserveLoad). The rank policy, the abort
// batches and the utility-call table are plain types with pure methods; the
// Dispatcher is the thin concurrent shell around them. The hot path (Submit and
// output routing) takes no global lock: the request table is a lock-free map, engine
// load is kept in atomics, and each request has its own small lock.
//
// The package example wires a toy engine in as the Sender and shows [New],
// [Dispatcher.EngineUp], [Dispatcher.Submit], [Stream.Recv] until io.EOF and
// [Dispatcher.Close]. Send runs under the submitted request's lock, so a Sender
// must not call back into the Dispatcher (HandleOutputs) from Send: it hands the
// frame on, and engine events come in from another goroutine.
//
// See README.md for the policies and their scores, the errors and their messages, the
// stream semantics, the slow-consumer policy and the utility semantics.
package dispatcher
