package httpapi

// The JSON shapes of text answers, as vLLM's protocol.py serializes them:
// completions (object "text_completion", choices with text) and chat completions
// (object "chat.completion" with messages; "chat.completion.chunk" with deltas).

import (
	"encoding/json"

	"github.com/switchyard-llm/switchyard/internal/textgen"
)

// TextChoice is a completions choice with text.
type TextChoice struct {
	Index          int                         `json:"index"`
	Text           string                      `json:"text"`
	Logprobs       *textgen.CompletionLogprobs `json:"logprobs"`
	FinishReason   *string                     `json:"finish_reason"`
	StopReason     any                         `json:"stop_reason"`
	TokenIDs       []int64                     `json:"token_ids,omitempty"`
	PromptTokenIDs []int64                     `json:"prompt_token_ids,omitempty"`
	PromptLogprobs []textgen.PromptEntry       `json:"prompt_logprobs,omitempty"`
}

// TextCompletionResponse is a completions body or chunk with text.
type TextCompletionResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []TextChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ChatMessage is a chat choice's message. Content is null when a tool parser
// found only calls; Reasoning is the reasoning parser's part (vLLM's current
// field name; it no longer writes reasoning_content).
type ChatMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Reasoning *string    `json:"reasoning"`
	ToolCalls []ToolCall `json:"tool_calls"`
}

// ChatChoice is one non-streaming chat choice.
type ChatChoice struct {
	Index        int                   `json:"index"`
	Message      ChatMessage           `json:"message"`
	Logprobs     *textgen.ChatLogprobs `json:"logprobs"`
	FinishReason *string               `json:"finish_reason"`
	StopReason   any                   `json:"stop_reason"`
	TokenIDs     []int64               `json:"token_ids,omitempty"`
}

// ChatResponse is the non-streaming chat body.
type ChatResponse struct {
	ID             string                `json:"id"`
	Object         string                `json:"object"`
	Created        int64                 `json:"created"`
	Model          string                `json:"model"`
	Choices        []ChatChoice          `json:"choices"`
	Usage          *Usage                `json:"usage"`
	PromptTokenIDs []int64               `json:"prompt_token_ids,omitempty"`
	PromptLogprobs []textgen.PromptEntry `json:"prompt_logprobs,omitempty"`
}

// ChatDelta is a streamed message delta; fields the parsers leave unset are
// left out, as vLLM writes deltas.
type ChatDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Reasoning *string         `json:"reasoning,omitempty"`
	ToolCalls []DeltaToolCall `json:"tool_calls,omitempty"`
}

// ChatStreamChoice is one choice of a chat chunk.
type ChatStreamChoice struct {
	Index        int                   `json:"index"`
	Delta        ChatDelta             `json:"delta"`
	Logprobs     *textgen.ChatLogprobs `json:"logprobs"`
	FinishReason *string               `json:"finish_reason"`
	StopReason   any                   `json:"stop_reason,omitempty"`
	TokenIDs     []int64               `json:"token_ids,omitempty"`
}

// ChatChunk is one server-sent event of a streamed chat completion.
type ChatChunk struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Created        int64              `json:"created"`
	Model          string             `json:"model"`
	Choices        []ChatStreamChoice `json:"choices"`
	Usage          *Usage             `json:"usage,omitempty"`
	PromptTokenIDs []int64            `json:"prompt_token_ids,omitempty"`
}

// emptyIDs is a non-nil empty list: return_token_ids shows [] rather than nothing.
func idsOrEmpty(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// chunk is the streamed answer to one delta of choice i.
func (run *textRun) chunk(i int, d delta) any {
	if run.chat != nil {
		return run.chatChunk(i, d, false)
	}
	ch := &run.choices[i]
	text := d.text
	if ch.echo != "" && !ch.sentRole {
		text = ch.echo + text
	}
	ch.sentRole = true
	c := TextChoice{Index: i, Text: text, Logprobs: d.lp, FinishReason: d.finish, StopReason: d.stop}
	if run.choiceIDs {
		c.TokenIDs = idsOrEmpty(d.ids)
	}
	resp := &TextCompletionResponse{ID: run.id, Object: "text_completion", Created: run.created, Model: run.model, Choices: []TextChoice{c}}
	if run.continuous {
		resp.Usage = run.totals()
	}
	return resp
}

// chatChunk is a chat chunk: the role chunk (role set) or a content delta.
func (run *textRun) chatChunk(i int, d delta, role bool) *ChatChunk {
	content := d.text
	c := ChatStreamChoice{Index: i, Delta: ChatDelta{Content: &content}, FinishReason: d.finish, StopReason: d.stop}
	if d.parsed != nil {
		c.Delta, c.FinishReason = *d.parsed, d.parsedFinish
	}
	if d.finished && d.stop == nil {
		c.StopReason = json.RawMessage("null") // vLLM sets it on the last chunk, null or not
	}
	if role {
		c.Delta.Role = "assistant"
	} else {
		if d.chatLP != nil || run.req.Logprobs != nil && !d.finished {
			c.Logprobs = &textgen.ChatLogprobs{Content: d.chatLP}
			if c.Logprobs.Content == nil {
				c.Logprobs.Content = []textgen.ChatLogprobContent{}
			}
		}
		if run.req.ReturnTokenIDs {
			c.TokenIDs = idsOrEmpty(d.ids)
		}
	}
	resp := &ChatChunk{ID: run.id, Object: "chat.completion.chunk", Created: run.created, Model: run.model, Choices: []ChatStreamChoice{c}}
	if role && run.req.ReturnTokenIDs {
		resp.PromptTokenIDs = run.choices[i].prompt
	}
	if run.continuous {
		resp.Usage = run.totals()
	}
	return resp
}

// usageChunk is the last chunk with stream_options.include_usage.
func (run *textRun) usageChunk() any {
	if run.chat != nil {
		return &ChatChunk{ID: run.id, Object: "chat.completion.chunk", Created: run.created, Model: run.model, Choices: []ChatStreamChoice{}, Usage: run.totals()}
	}
	return &TextCompletionResponse{ID: run.id, Object: "text_completion", Created: run.created, Model: run.model, Choices: []TextChoice{}, Usage: run.totals()}
}

// response is the non-streaming body.
func (run *textRun) response() any {
	if run.chat != nil {
		resp := &ChatResponse{ID: run.id, Object: "chat.completion", Created: run.created, Model: run.model, Usage: run.totals(),
			Choices: make([]ChatChoice, len(run.choices))}
		for i := range run.choices {
			ch := &run.choices[i]
			text := ch.det.Text()
			c := ChatChoice{Index: i, Message: ChatMessage{Role: "assistant", Content: &text, ToolCalls: []ToolCall{}},
				FinishReason: ch.finish, StopReason: ch.stop}
			if run.chat.parse != nil {
				c.Message, c.FinishReason = run.chat.parse.message(text, ch.finish)
			}
			run.withEcho(i, &c.Message)
			if run.req.Logprobs != nil {
				c.Logprobs = &textgen.ChatLogprobs{Content: ch.chatLP}
				if c.Logprobs.Content == nil {
					c.Logprobs.Content = []textgen.ChatLogprobContent{}
				}
			}
			if run.req.ReturnTokenIDs {
				c.TokenIDs = idsOrEmpty(ch.ids)
			}
			resp.Choices[i] = c
		}
		if run.req.ReturnTokenIDs && len(run.choices) > 0 {
			resp.PromptTokenIDs = run.choices[0].prompt
		}
		if len(run.choices) > 0 {
			resp.PromptLogprobs = run.choices[0].promptLP
		}
		return resp
	}
	resp := &TextCompletionResponse{ID: run.id, Object: "text_completion", Created: run.created, Model: run.model, Usage: run.totals(),
		Choices: make([]TextChoice, len(run.choices))}
	for i := range run.choices {
		ch := &run.choices[i]
		c := TextChoice{Index: i, Text: ch.echo + ch.det.Text(), Logprobs: ch.lp, FinishReason: ch.finish, StopReason: ch.stop,
			PromptLogprobs: ch.promptLP}
		if run.choiceIDs {
			c.TokenIDs = idsOrEmpty(ch.ids)
		}
		if run.req.ReturnTokenIDs {
			c.PromptTokenIDs = ch.prompt
		}
		resp.Choices[i] = c
	}
	return resp
}
