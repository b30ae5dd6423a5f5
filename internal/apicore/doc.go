// Package apicore holds what both of serve's protocols apply to a request, so
// that a value refused on one is refused on the other: the model's rules
// (EOS ids, vocabulary and logprobs bounds; ModelRules), the per-request limits
// and error type names, the request span for tracing (Span), and the
// PromptCounter the stats line counts prompt tokens through.
//
// The composition root builds a ModelRules from its Config and a tracer
// provider with NewTracerProvider, and hands both to internal/httpapi and
// internal/clientapi. Everything here is a value or safe for concurrent use,
// except a Span, which belongs to its request's goroutine (FirstToken may be
// called from any).
package apicore
