package apicore

// Limits both protocols apply to one request.
const (
	MaxPromptTokens = 1 << 20 // tokens in one prompt
	// MaxRequestIDLen bounds a client-chosen request id (both protocols) and
	// MaxModelNameLen the model name: both are repeated in every output or chunk
	// of the request, so a long one would multiply through the whole stream.
	MaxRequestIDLen = 256
	MaxModelNameLen = 256
)

// PromptCounter counts the prompt tokens submitted to a rank, for the stats line
// (the composition root's statsLog). Implementations are safe for concurrent use.
type PromptCounter interface {
	AddPrompt(rank, n int)
}

// Error types both protocols use (the Rust frontend's typed names).
const (
	TypeInvalidDataParallelRank = "InvalidDataParallelRank"
	TypeDuplicateRequestID      = "DuplicateRequestId"
)

// DefaultServedModelName is the model name when none is configured: the vllm:*
// series' model_name and /v1/models' id.
const DefaultServedModelName = "switchyard"
