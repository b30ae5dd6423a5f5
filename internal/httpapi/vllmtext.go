package httpapi

// Error texts as vLLM's serving layer words them, so clients and dashboards
// that match on vLLM's messages keep working.

import "github.com/switchyard-llm/switchyard/dispatcher"

// promptTooLong is vLLM's 400 for a prompt that leaves no room to generate in
// the context (its serving layer refuses input tokens >= max_model_len before
// the engine's "decoder prompt is longer" check is reached).
func promptTooLong(e *dispatcher.PromptTooLongError) *APIError {
	return badRequest("prompt", "This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
		"Please reduce the length of the input messages.", e.MaxModelLen, e.PromptLen)
}
