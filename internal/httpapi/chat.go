package httpapi

// POST /v1/chat/completions' request: messages rendered through the model's chat
// template into a prompt, then the completions machinery (the sampling fields are
// the completions ones). The body is read with the completions decoder's exact
// field matching.

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/chattemplate"
)

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	CompletionRequest // the sampling fields; prompt, echo and suffix are not chat's

	// Messages, Tools, Documents and ChatTemplateKwargs stay raw JSON until they
	// are decoded for the template as Python would (ordered objects, int64s).
	Messages             json.RawMessage `json:"messages"`
	MaxCompletionTokens  *int64          `json:"max_completion_tokens"`
	ChatLogprobs         bool            `json:"logprobs"`
	TopLogprobs          *int64          `json:"top_logprobs"`
	Tools                json.RawMessage `json:"tools"`
	ToolChoice           json.RawMessage `json:"tool_choice"`
	Documents            json.RawMessage `json:"documents"`
	ChatTemplate         *string         `json:"chat_template"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	// IncludeReasoning false drops the reasoning parser's part; ParallelToolCalls
	// false keeps only the first tool call (vLLM's defaults: both true).
	IncludeReasoning  *bool `json:"include_reasoning"`
	ParallelToolCalls *bool `json:"parallel_tool_calls"`

	parse *chatParse // the tool and reasoning parsing; nil: none applies
	echo  bool       // the body's echo (chatecho.go)
}

// field returns a pointer to the field named key, or nil.
func (r *ChatRequest) field(key string) any {
	switch key {
	case "messages":
		return &r.Messages
	case "max_completion_tokens":
		return &r.MaxCompletionTokens
	case "logprobs":
		return &r.ChatLogprobs
	case "top_logprobs":
		return &r.TopLogprobs
	case "tools":
		return &r.Tools
	case "tool_choice":
		return &r.ToolChoice
	case "documents":
		return &r.Documents
	case "chat_template":
		return &r.ChatTemplate
	case "chat_template_kwargs":
		return &r.ChatTemplateKwargs
	case "add_generation_prompt":
		return &r.AddGenerationPrompt
	case "continue_final_message":
		return &r.ContinueFinalMessage
	case "include_reasoning":
		return &r.IncludeReasoning
	case "parallel_tool_calls":
		return &r.ParallelToolCalls
	case "prompt", "suffix", "best_of":
		return nil // not chat fields: ignored as vLLM ignores unknown fields
	}
	return r.CompletionRequest.field(key)
}

// readChat decodes one chat body: exactly one JSON object, fields matched by their
// exact names, unknown fields skipped.
func readChat(r io.Reader) (*ChatRequest, error) {
	req := &ChatRequest{}
	if err := readObject(r, apicore.MaxPromptTokens, req, nil); err != nil {
		return nil, err
	}
	return req, nil
}

// validate checks the chat fields and folds them into the completions ones:
// max_completion_tokens (or max_tokens), logprobs/top_logprobs.
func (r *ChatRequest) validate() error {
	if isNull(r.Messages) {
		return badRequest("messages", "messages is required: a list of {role, content} objects")
	}
	if r.MaxCompletionTokens != nil {
		r.MaxTokens = r.MaxCompletionTokens
	}
	if r.TopLogprobs != nil {
		if *r.TopLogprobs < 0 && *r.TopLogprobs != -1 {
			return badRequest("top_logprobs", "top_logprobs must be a non-negative integer or -1, got %d", *r.TopLogprobs)
		}
		if *r.TopLogprobs != 0 && !r.ChatLogprobs {
			return badRequest("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true.")
		}
	}
	r.Logprobs = nil
	if r.ChatLogprobs {
		var n int64
		if r.TopLogprobs != nil {
			n = *r.TopLogprobs
		}
		r.Logprobs = &n
	}
	if r.ContinueFinalMessage && r.AddGenerationPrompt != nil && *r.AddGenerationPrompt {
		return badRequest("continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	}
	// Chat's echo is the last message's content (chatecho.go), not the prompt's.
	r.echo, r.Echo = r.Echo, false
	return r.validateText()
}

// requestTemplate reports whether the request brings its own chat template: a
// chat_template, or a chat_template_kwargs.chat_template, that is not null (vLLM's
// test, so an empty string or a named template counts too).
func (r *ChatRequest) requestTemplate() bool {
	if r.ChatTemplate != nil {
		return true
	}
	if isNull(r.ChatTemplateKwargs) {
		return false
	}
	v, err := chattemplate.DecodeJSON(r.ChatTemplateKwargs)
	o, ok := v.(*chattemplate.Object)
	if err != nil || !ok {
		return false // not an object: chatInput refuses it
	}
	t, ok := o.Get("chat_template")
	return ok && t != nil
}

// isNull reports an absent or null raw field.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// decodeList decodes an optional JSON list (tools, documents).
func decodeList(name string, raw json.RawMessage) ([]any, *APIError) {
	if isNull(raw) {
		return nil, nil
	}
	v, err := chattemplate.DecodeJSON(raw)
	l, ok := v.([]any)
	if err != nil || !ok {
		return nil, badRequest(name, "%s: expected a list", name)
	}
	return l, nil
}

// chatInput prepares the conversation as vLLM hands it to apply_chat_template
// (chattemplate.PrepareMessages/PrepareTools: content joined into a string or
// wrapped in text parts per the template's content format, only the fields vLLM
// keeps, tool call arguments parsed, tools as their pydantic dump). Parts other
// than text (images, audio) are refused: switchyard does no multimodal
// preprocessing.
func (r *ChatRequest) chatInput(format string) (ChatInput, error) {
	msgs, err := chattemplate.PrepareMessages(r.Messages, format)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "chattemplate: ")
		if strings.Contains(msg, "unsupported content part") {
			msg += "; switchyard does no multimodal preprocessing"
		}
		return ChatInput{}, badRequest("messages", "messages: %s", msg)
	}
	if len(msgs) == 0 {
		return ChatInput{}, badRequest("messages", "messages must not be empty")
	}
	in := ChatInput{Messages: msgs, AddGenerationPrompt: true}
	if in.Tools, err = chattemplate.PrepareTools(r.Tools); err != nil {
		return ChatInput{}, badRequest("tools", "tools: %s", strings.TrimPrefix(err.Error(), "chattemplate: "))
	}
	var apiErr *APIError
	if in.Documents, apiErr = decodeList("documents", r.Documents); apiErr != nil {
		return ChatInput{}, apiErr
	}
	if !isNull(r.ChatTemplateKwargs) {
		v, err := chattemplate.DecodeJSON(r.ChatTemplateKwargs)
		o, ok := v.(*chattemplate.Object)
		if err != nil || !ok {
			return ChatInput{}, badRequest("chat_template_kwargs", "chat_template_kwargs: expected an object")
		}
		in.Kwargs = make(map[string]any, o.Len())
		for _, k := range o.Keys() {
			in.Kwargs[k], _ = o.Get(k)
		}
	}
	if r.AddGenerationPrompt != nil {
		in.AddGenerationPrompt = *r.AddGenerationPrompt
	}
	if r.ContinueFinalMessage {
		in.AddGenerationPrompt = false
	}
	return in, nil
}
