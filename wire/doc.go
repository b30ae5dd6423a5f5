// Package wire holds the msgpack types and codecs of vLLM's engine-core protocol
// (what a frontend and an engine core say over ZeroMQ) and of switchyard's client
// protocol, which speaks the same vocabulary. It does no IO: no sockets, no
// goroutines. Callers hand it frames and buffers; the frontend and the mock engine
// move them.
//
// A message is a list of frames: a one-byte type frame (see [TypeFrame]), a msgpack
// body, then zero or more aux frames. The main values are [EngineCoreRequest] (an
// ADD, with its [SamplingParams]) going to an engine and [EngineCoreOutputs] (one
// step's progress of every running request) coming back; ABORT, UTILITY,
// START_DP_WAVE, the handshake and the data-parallel coordinator's messages have
// their own small codecs.
//
// # Layouts
//
// vLLM's engine-core structs are msgspec array_like structs: a field's position is
// the wire format, and positions change between vLLM releases. A [Layout] is one
// release range's field order (and its SamplingParams keys, finish reasons and
// handshake shape); the codec precomputes index tables from it once, so the hot
// loops switch on a small field id per position and never look a name up.
//
//   - [Native] is the newest layout, the one switchyard's client protocol speaks.
//     The package-level [AppendAdd], [DecodeAdd] ([DecodeAddWith] into the
//     caller's sampling params), [AppendOutputs], [DecodeOutputs] and a zero
//     [OutputsDecoder] use it.
//   - [BuiltinLayout] returns a built-in layout by name ("v0.18", "newest");
//     [BuiltinLayouts] and [LayoutNames] list them. [ParseLayout] reads a layout
//     file an operator generated with vLLM's own classes.
//   - An engine's layout is chosen at its handshake, never guessed:
//     [LayoutSet.Place] decides from the registration frame (the reported
//     vllm_version and the key set) and READY's keys; where several built-ins
//     still fit, a [Prober] tells them apart with UTILITY probes. Operator files
//     are tried first; a forced layout ([LayoutSet].Force) takes the engines that
//     report no version and the versions nothing else places. The first output
//     message then confirms it ([OutputsDecoder.CheckLayout]).
//
// On the hot path each engine's requests are encoded with its layout's methods
// ([Layout.AppendAdd]) and its outputs decoded by an [OutputsDecoder] whose Layout
// field is set. A request that sets something the layout has no place for is
// refused with a [*LayoutError] rather than silently trimmed.
//
// # Encoding
//
// Encoders append into a caller's buffer and return the extended slice, in the
// manner of strconv.AppendInt: they write nothing anywhere else, and on the hot
// path allocate only to grow dst. [GetBuffer] and [PutBuffer] pool such
// buffers between the encoder and the socket writer. Array-like structs are written
// in full, as msgspec writes them. Encoders refuse ([*EncodeError] and the Err
// values) what an engine could not decode, because a body that fails its typed
// decode kills the engine's input thread. For a request built here, call
// [SamplingParams.SetEOS], then [SamplingParams.Prepare], then
// [EngineCoreRequest.Validate] before sending: the encoders check types, not
// vLLM's value rules ([EngineAccepts]).
//
// # Decoding
//
// Decoders take frames (frames[0] the body, frames[1:] the aux frames) or a body,
// follow msgspec's rules (a shorter array takes defaults for missing trailing
// fields, a missing required field is an error, a longer array's extra elements are
// ignored, maps may carry unknown keys), and never panic: bad input of any shape
// yields a [*DecodeError] naming the type, the field and the byte offset. Every
// length prefix is checked against the bytes left before anything is allocated.
// The decoders of what a client may send on to an engine (ADD, ABORT, UTILITY)
// refuse invalid UTF-8 in any string.
//
// # Aliasing
//
// Decoded strings are always copies. Decoded [Raw] values, [Tensor] data and
// SchedulerStats.Raw point into the frames they came from: keep those frames alive
// and unmodified while they are used, and copy (bytes.Clone) what is kept longer.
// An [OutputsDecoder] reuses the Outputs slice of its target on the next Decode,
// and one message's request ids and token ids share one backing string and array:
// copy an entry to keep it past the next Decode, and clone its id or tokens
// (strings.Clone, slices.Clone) to keep them long.
//
// # Aux frames
//
// Tensors of [AuxThreshold] bytes or more (prompt_embeds, a pooling output, prompt
// logprobs, ...) travel as aux frames after the body, as vLLM's zero-copy msgpack
// encoder sends them; the body refers to them by index. Encoders return them beside
// the body (nil when there are none) for the caller to send as further frames;
// decoders read them from frames[1:] and set [Tensor.AuxIndex].
//
// # KV events
//
// The KV-event codec (kvevent*.go) reads and writes what an engine's
// ZmqEventPublisher sends for cache-aware routing: frames [topic, seq, payload] and
// the replay ROUTER's answers, and the payload, a [KVEventBatch] of BlockStored,
// BlockRemoved and AllBlocksCleared. One [KVBatchDecoder] reads every release's
// encoding (the arrays of v0.11 to v0.21 and the maps of the newest, in any mix),
// counts and steps over an event it cannot use instead of failing the batch, and
// decodes a steady stream without allocating; [AppendKVEventBatch] writes the bytes
// a chosen release's msgspec writes, for the mock engine. Block hashes are kept only
// to apply removals (bytes hashes folded to 64 bits); the index keys blocks by
// their tokens.
package wire
