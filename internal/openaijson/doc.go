// Package openaijson is the JSON codec of switchyard's OpenAI-style HTTP API:
// a streaming decoder for request bodies (completions, chat, tokenize,
// detokenize) and the hand-written encoder of token-path completion answers.
// It does no IO of its own and knows nothing of handlers: internal/httpapi owns
// the body types, their field tables and the answers' HTTP side.
//
// # Decoding
//
// Make one Decoder per process with NewDecoder, naming the body types (their
// json tags are interned so a known member's name costs no allocation) and the
// bound on a prompt's lists; it is safe for concurrent use. Decode reads one
// body from an io.Reader as it arrives:
//
//	req := &MyBody{}
//	pr := openaijson.Prompt{MaxTokens: limit}
//	err := dec.Decode(r, req.field, &pr) // req.field(key) returns &req.X or nil
//
// fields(key) returns a pointer to where a known member decodes to, or nil to
// skip it; with a *Prompt, the "prompt" member is parsed into it (token ids into
// IDs, a string or list of strings into Texts) instead of through fields.
//
// The rules, which are vLLM's (pydantic's) where vLLM has one:
//   - Exact keys: "MAX_TOKENS" is not "max_tokens"; an escaped name such as
//     "max\u005ftokens" is the name it spells; a name given twice takes its last
//     value, as in Python. Unknown members are skipped without being kept.
//   - One JSON object, nothing but whitespace after it; an empty body, a
//     non-object and trailing data are errors.
//   - Bounds, checked while reading so a body never costs more than they allow:
//     nesting at most 64 levels anywhere, a member name at most 256 bytes (a
//     longer one is unknown), a known member's raw JSON at most MaxFieldBytes,
//     a prompt of at most Prompt.MaxTokens ids per list (never more than
//     apicore.MaxPromptTokens; the read stops at the first id past it) and at
//     most the Decoder's maxPrompts lists or strings. A text prompt is bounded
//     only by the reader (httpapi wraps the body in http.MaxBytesReader).
//   - Type errors name the field and the JSON type expected
//     ("max_tokens: expected an integer, got JSON string"), never a Go type.
//
// A client's fault is an *Error (Param: the field at fault, empty for the body
// as a whole; Message: the text of the 400); any other error is the reader's
// (the size limit, a deadline) and is returned as it came.
//
// Allocation: read buffers are pooled (one per body in flight); member names
// and captured values reuse per-body scratch buffers; scalars (booleans,
// integers, floats, plain strings, lists of integers, null) are decoded without
// encoding/json's reflection when their text is plainly of the field's type,
// anything else goes through encoding/json with the same result; prompt ids
// are read straight from the buffered bytes. A completions body with a short
// prompt costs about 9 allocations. A json.RawMessage destination gets its own
// copy (the scratch buffer is reused by the next member).
//
// # Encoding
//
// AppendCompletion writes a CompletionResponse (an answer or an SSE chunk)
// exactly as encoding/json would, without reflection, and reports false when a
// value needs escaping or a shape it does not write (logprobs, an unusual stop
// reason); MarshalCompletion is then the fallback, with or without HTML
// escaping.
//
// # Tests
//
// The fast paths are held to encoding/json: TestScalarFieldAgreesWithEncodingJSON,
// TestBodyScalarFastPathsAgreeWithEncodingJSON and the fuzz target
// FuzzBodyScalarFastPaths (run by .ci/run's fuzz smoke:
// go test -run '^$' -fuzz '^FuzzBodyScalarFastPaths$' ./internal/openaijson/);
// TestFastIDsAgreeWithTheGeneralPath for prompt ids under any read sizes;
// TestAppendCompletionMatchesEncodingJSON for the encoder. BenchmarkSSEChunk
// compares the encoder with encoding/json; httpapi's BenchmarkParseCompletion
// and TestParseCompletionAllocations measure the decoder through its body type.
package openaijson
