package server

// POST /v1/chat/completions' request: messages rendered through the model's chat
// template into a prompt, then the completions machinery (the sampling fields are
// the completions ones). The body is read with the completions decoder's exact
// field matching.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/switchyard-llm/switchyard/chattemplate"
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

	messages []map[string]any // Messages decoded, by validate
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
	case "prompt", "echo", "suffix", "best_of":
		return nil // not chat fields: ignored as vLLM ignores unknown fields
	}
	return r.CompletionRequest.field(key)
}

// readChat decodes one chat body: exactly one JSON object, fields matched by their
// exact names, unknown fields skipped.
func readChat(r io.Reader) (*ChatRequest, error) {
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(r)
	defer func() {
		br.Reset(nil)
		readerPool.Put(br)
	}()
	p := &jsonReader{r: br, maxTokens: MaxPromptTokens}
	req := &ChatRequest{}
	c, err := p.ws()
	if err != nil {
		var se *bodySyntaxError
		if errors.As(err, &se) && se.Offset == 0 {
			return nil, badRequest("", "invalid JSON body: empty body")
		}
		return nil, jsonBodyError(err)
	}
	if c != '{' {
		return nil, badRequest("", "invalid JSON body: the body must be a JSON object")
	}
	err = p.object(1, func(key string) error {
		dst := req.field(key)
		if dst == nil {
			return p.value(2)
		}
		raw, err := p.capture()
		if err != nil {
			if errors.Is(err, errFieldTooLarge) {
				return badRequest(key, "%s is larger than %d bytes", key, maxFieldBytes)
			}
			return err
		}
		return decodeField(key, raw, dst)
	})
	if err != nil {
		return nil, jsonBodyError(err)
	}
	if _, err := p.ws(); err == nil {
		return nil, badRequest("", "invalid JSON body: unexpected data after the top-level object")
	} else if se := (*bodySyntaxError)(nil); !errors.As(err, &se) {
		return nil, jsonBodyError(err)
	}
	return req, nil
}

// validate checks the chat fields and folds them into the completions ones:
// max_completion_tokens (or max_tokens), logprobs/top_logprobs.
func (r *ChatRequest) validate() error {
	if err := r.decodeMessages(); err != nil {
		return err
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
	r.Echo = false
	return r.validateText()
}

// isNull reports an absent or null raw field.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// decodeMessages decodes messages as the template will see them.
func (r *ChatRequest) decodeMessages() *APIError {
	if isNull(r.Messages) {
		return badRequest("messages", "messages is required: a list of {role, content} objects")
	}
	v, err := chattemplate.DecodeJSON(r.Messages)
	list, ok := v.([]any)
	if err != nil || !ok {
		return badRequest("messages", "messages: expected a list of {role, content} objects")
	}
	if len(list) == 0 {
		return badRequest("messages", "messages must not be empty")
	}
	r.messages = make([]map[string]any, len(list))
	for i, e := range list {
		o, ok := e.(*chattemplate.Object)
		if !ok {
			return badRequest("messages", "messages[%d]: expected an object", i)
		}
		m := make(map[string]any, o.Len())
		for _, k := range o.Keys() {
			m[k], _ = o.Get(k)
		}
		if _, ok := m["role"].(string); !ok {
			return badRequest("messages", "messages[%d].role: expected a string", i)
		}
		r.messages[i] = m
	}
	return nil
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

// chatInput normalises the messages for a template of the given content format
// (vLLM's parse_chat_messages): "string" joins text parts with newlines, "openai"
// turns string content into [{"type": "text", "text": ...}]. Parts other than text
// (images, audio) are refused: switchyard does no multimodal preprocessing. Tool
// call arguments (a JSON string on the wire) are parsed, as templates read them
// as objects.
func (r *ChatRequest) chatInput(format string) (ChatInput, error) {
	if r.messages == nil {
		if err := r.decodeMessages(); err != nil {
			return ChatInput{}, err
		}
	}
	msgs := make([]map[string]any, len(r.messages))
	for i, m := range r.messages {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		content, err := normaliseContent(i, m["content"], format)
		if err != nil {
			return ChatInput{}, err
		}
		out["content"] = content
		if calls, ok := m["tool_calls"].([]any); ok {
			out["tool_calls"] = parseToolArguments(calls)
		}
		msgs[i] = out
	}
	in := ChatInput{Messages: msgs, AddGenerationPrompt: true}
	var apiErr *APIError
	if in.Tools, apiErr = decodeList("tools", r.Tools); apiErr != nil {
		return ChatInput{}, apiErr
	}
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

// parseToolArguments returns tool calls whose function.arguments string is
// replaced by the object it encodes (copies; the request's values are not changed).
func parseToolArguments(calls []any) []any {
	out := make([]any, len(calls))
	for j, c := range calls {
		out[j] = c
		call, ok := c.(*chattemplate.Object)
		if !ok {
			continue
		}
		fv, _ := call.Get("function")
		fn, ok := fv.(*chattemplate.Object)
		if !ok {
			continue
		}
		av, _ := fn.Get("arguments")
		args, ok := av.(string)
		if !ok {
			continue
		}
		parsed, err := chattemplate.DecodeJSON([]byte(args))
		if err != nil {
			continue
		}
		nfn := chattemplate.NewObject()
		for _, k := range fn.Keys() {
			v, _ := fn.Get(k)
			nfn.Set(k, v)
		}
		nfn.Set("arguments", parsed)
		ncall := chattemplate.NewObject()
		for _, k := range call.Keys() {
			v, _ := call.Get(k)
			ncall.Set(k, v)
		}
		ncall.Set("function", nfn)
		out[j] = ncall
	}
	return out
}

func normaliseContent(i int, c any, format string) (any, error) {
	var texts []string
	switch v := c.(type) {
	case nil:
	case string:
		if format != "openai" {
			return v, nil
		}
		texts = []string{v}
	case []any:
		for j, p := range v {
			if s, isStr := p.(string); isStr {
				texts = append(texts, s)
				continue
			}
			pm, ok := p.(*chattemplate.Object)
			if !ok {
				return nil, badRequest("messages", "messages[%d].content[%d]: expected an object", i, j)
			}
			tv, _ := pm.Get("type")
			typ, _ := tv.(string)
			switch typ {
			case "text", "input_text", "output_text", "":
				sv, _ := pm.Get("text")
				s, ok := sv.(string)
				if !ok {
					return nil, badRequest("messages", "messages[%d].content[%d].text: expected a string", i, j)
				}
				texts = append(texts, s)
			case "refusal":
				sv, _ := pm.Get("refusal")
				s, _ := sv.(string)
				texts = append(texts, s)
			default:
				return nil, badRequest("messages", "messages[%d].content[%d]: content type %q is not supported (switchyard does no multimodal preprocessing)", i, j, typ)
			}
		}
	default:
		return nil, badRequest("messages", "messages[%d].content: expected a string or a list of content parts", i)
	}
	if format == "openai" {
		parts := make([]any, len(texts))
		for j, t := range texts {
			o := chattemplate.NewObject()
			o.Set("type", "text")
			o.Set("text", t)
			parts[j] = o
		}
		return parts, nil
	}
	return strings.Join(texts, "\n"), nil
}
