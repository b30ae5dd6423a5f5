package httpapi

// The response side of /v1/completions: the pure accumulator that turns engine
// outputs into choices and usage (the JSON shapes are openaijson's). Handlers
// feed it; it does no IO.

import (
	"github.com/switchyard-llm/switchyard/wire"
)

// completion accumulates the outputs of one HTTP completion's engine requests.
// Not safe for concurrent use: the handler goroutine owns it.
type completion struct {
	id      string
	model   string
	created int64
	choices []Choice
	usage   Usage
	open    int // choices not finished yet
}

func newCompletion(id, model string, created int64, prompts [][]int64, n int) *completion {
	c := &completion{id: id, model: model, created: created, choices: make([]Choice, len(prompts)*n)}
	for i := range c.choices {
		c.choices[i] = Choice{Index: i, TokenIDs: []int64{}}
	}
	for _, p := range prompts {
		c.usage.PromptTokens += len(p)
	}
	c.open = len(c.choices)
	return c
}

// add folds one engine output of choice i into the totals and returns the
// streaming chunk's choice for it (the delta).
func (c *completion) add(i int, out *wire.EngineCoreOutput) Choice {
	ch := &c.choices[i]
	ch.TokenIDs = append(ch.TokenIDs, out.NewTokenIDs...)
	c.usage.CompletionTokens += len(out.NewTokenIDs)
	delta := Choice{Index: i, TokenIDs: out.NewTokenIDs}
	if delta.TokenIDs == nil {
		delta.TokenIDs = []int64{}
	}
	if out.Finished() && ch.FinishReason == nil {
		fr := out.FinishReason.String()
		ch.FinishReason = &fr
		ch.StopReason = stopReason(out.StopReason)
		delta.FinishReason, delta.StopReason = ch.FinishReason, ch.StopReason
		c.open--
	}
	return delta
}

// fail finishes choice i with reason (abort or error) if it is still open.
func (c *completion) fail(i int, reason wire.FinishReason) Choice {
	ch := &c.choices[i]
	if ch.FinishReason == nil {
		fr := reason.String()
		ch.FinishReason = &fr
		c.open--
	}
	return Choice{Index: i, TokenIDs: []int64{}, FinishReason: ch.FinishReason}
}

func (c *completion) done() bool { return c.open == 0 }

func (c *completion) totals() *Usage {
	u := c.usage
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

// chunk wraps streaming choices (or, with usage, the final usage-only chunk).
func (c *completion) chunk(choices []Choice, usage *Usage) *CompletionResponse {
	if choices == nil {
		choices = []Choice{}
	}
	return &CompletionResponse{
		ID: c.id, Object: "text_completion", Created: c.created, Model: c.model,
		Choices: choices, Usage: usage,
	}
}

func stopReason(s wire.StopReason) any {
	switch s.Kind {
	case wire.StopReasonToken:
		return s.Token
	case wire.StopReasonText:
		return s.Text
	}
	return nil
}
