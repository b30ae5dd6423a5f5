// Package httpapi is the HTTP API of `switchyard serve`: vLLM's OpenAI-style
// endpoints on token ids (/v1/completions) and, with a tokenizer (Text), on
// text (/v1/completions, /v1/chat/completions, /tokenize, /detokenize),
// /v1/models, /v1/engines with drain and undrain, /health, /version and
// /metrics. README.md is the endpoints' reference.
//
// It owns request validation and the bodies' field tables (decoded by
// internal/openaijson, which bounds what a body may cost as it is read),
// admission (API keys, admin guard, the concurrent-choices slots, busy
// engines), the answers (JSON and SSE) and the access log. The composition root
// builds the handler with NewAPI(APIConfig) — the dispatcher, how to list
// engines, the model rules, limits and an optional PromptCounter for the stats
// line — and serves it with internal/httpserve, the HTTP server with its
// connection guards.
//
// Concurrency: API's fields are set once by NewAPI; its handlers run on
// net/http's goroutines and share only what is safe for concurrent use (the
// dispatcher, atomic counters, the slots). A request with several choices
// reads its streams through one forwarding goroutine per stream, ended by the
// request's context. Server.Serve runs on one goroutine that Shutdown and
// Close join.
package httpapi
