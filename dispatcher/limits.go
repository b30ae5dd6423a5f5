package dispatcher

import (
	"fmt"
	"math"

	"github.com/switchyard-llm/switchyard/wire"
)

// EngineLimits is what an engine's registration says about the requests it can
// take (EngineCoreReadyResponse). Zero fields are unknown and not checked.
type EngineLimits struct {
	// MaxModelLen is the engine's context length: prompt plus generated tokens.
	MaxModelLen int64
	// Layout is the engine's vLLM wire layout; its ADDs are encoded in it. Nil is
	// the native (newest) layout.
	Layout *wire.Layout
	// NumGPUBlocks is the engine's KV-cache size in blocks from its registration
	// (vllm:cache_config_info's num_gpu_blocks label); 0 = unknown.
	NumGPUBlocks int64
}

// PromptTooLongError refuses a request whose prompt does not fit the engine's
// max_model_len with room for one generated token: vLLM's frontend refuses a prompt
// longer than max_model_len, and one exactly as long leaves max_tokens 0. Nothing
// is sent. For an unpinned request, Rank and MaxModelLen are those of the ready
// engine with the longest context (none could take it).
type PromptTooLongError struct {
	ID          string
	Rank        int
	PromptLen   int64
	MaxModelLen int64
}

func (e *PromptTooLongError) Error() string {
	if e.PromptLen == e.MaxModelLen {
		return fmt.Sprintf("The decoder prompt (length %d) leaves no room to generate: the maximum model length of engine rank %d is %d.",
			e.PromptLen, e.Rank, e.MaxModelLen)
	}
	return fmt.Sprintf("The decoder prompt (length %d) is longer than the maximum model length of %d (engine rank %d).",
		e.PromptLen, e.MaxModelLen, e.Rank)
}

// promptLen is the number of prompt positions req takes: its token ids, or the
// rows of its prompt embeddings.
func promptLen(req *wire.EngineCoreRequest) int64 {
	if req.PromptTokenIDs == nil && req.PromptEmbeds != nil && len(req.PromptEmbeds.Shape) > 0 {
		return req.PromptEmbeds.Shape[0]
	}
	return int64(len(req.PromptTokenIDs))
}

// fits reports whether a prompt of n positions leaves room for a generated token
// on an engine with context length maxLen (0 = unknown: it fits).
func fits(n, maxLen int64) bool { return maxLen <= 0 || n < maxLen }

// capMaxTokens returns the sampling params to send to an engine with context length
// maxLen: max_tokens lowered to maxLen - prompt length when it asks for more, as
// vLLM's serving layer does (get_max_tokens takes the minimum; the engine would
// stop there anyway, with finish_reason length). A min_tokens that no longer fits
// is refused, as vLLM's SamplingParams refuses min_tokens > max_tokens. The
// caller's params are not modified; p itself is returned when nothing changes.
func capMaxTokens(p *wire.SamplingParams, n, maxLen int64) (*wire.SamplingParams, error) {
	if p == nil || maxLen <= 0 {
		return p, nil
	}
	room := maxLen - n
	if p.MinTokens > room {
		return nil, &wire.ValidationError{Field: "sampling_params.min_tokens", Msg: fmt.Sprintf(
			"must be <= max_tokens=%d (max_model_len %d - prompt length %d), got %d", room, maxLen, n, p.MinTokens)}
	}
	cur := int64(math.MaxInt64)
	if p.MaxTokens.Valid {
		cur = p.MaxTokens.Value
	}
	if cur <= room {
		return p, nil
	}
	c := *p
	c.MaxTokens = wire.SomeInt(room)
	return &c, nil
}
