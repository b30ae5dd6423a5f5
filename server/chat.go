package server

// POST /v1/chat/completions' request: messages rendered through the model's chat
// template into a prompt, then the completions machinery (the sampling fields are
// the completions ones). The body is read with the completions decoder's exact
// field matching.

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// ChatRequest is the body of POST /v1/chat/completions.
type ChatRequest struct {
	CompletionRequest // the sampling fields; prompt, echo and suffix are not chat's

	Messages             []map[string]any `json:"messages"`
	MaxCompletionTokens  *int64           `json:"max_completion_tokens"`
	ChatLogprobs         bool             `json:"logprobs"`
	TopLogprobs          *int64           `json:"top_logprobs"`
	Tools                []any            `json:"tools"`
	ToolChoice           json.RawMessage  `json:"tool_choice"`
	Documents            []any            `json:"documents"`
	ChatTemplate         *string          `json:"chat_template"`
	ChatTemplateKwargs   map[string]any   `json:"chat_template_kwargs"`
	AddGenerationPrompt  *bool            `json:"add_generation_prompt"`
	ContinueFinalMessage bool             `json:"continue_final_message"`
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
	if len(r.Messages) == 0 {
		return badRequest("messages", "messages is required: a list of {role, content} objects")
	}
	for i, m := range r.Messages {
		if _, ok := m["role"].(string); !ok {
			return badRequest("messages", "messages[%d].role: expected a string", i)
		}
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

// chatInput normalises the messages for a template of the given content format
// (vLLM's parse_chat_messages): "string" joins text parts with newlines, "openai"
// turns string content into [{"type": "text", "text": ...}]. Parts other than text
// (images, audio) are refused: switchyard does no multimodal preprocessing.
func (r *ChatRequest) chatInput(format string) (ChatInput, error) {
	msgs := make([]map[string]any, len(r.Messages))
	for i, m := range r.Messages {
		out := make(map[string]any, len(m))
		for k, v := range m {
			out[k] = v
		}
		content, err := normaliseContent(i, m["content"], format)
		if err != nil {
			return ChatInput{}, err
		}
		out["content"] = content
		// Templates read tool call arguments as objects (vLLM parses the JSON string).
		if calls, ok := m["tool_calls"].([]any); ok {
			fixed := make([]any, len(calls))
			for j, c := range calls {
				fixed[j] = c
				cm, ok := c.(map[string]any)
				if !ok {
					continue
				}
				fn, ok := cm["function"].(map[string]any)
				if !ok {
					continue
				}
				if args, ok := fn["arguments"].(string); ok {
					var parsed any
					if json.Unmarshal([]byte(args), &parsed) == nil {
						nfn := map[string]any{}
						for k, v := range fn {
							nfn[k] = v
						}
						nfn["arguments"] = parsed
						ncm := map[string]any{}
						for k, v := range cm {
							ncm[k] = v
						}
						ncm["function"] = nfn
						fixed[j] = ncm
					}
				}
			}
			out["tool_calls"] = fixed
		}
		msgs[i] = out
	}
	in := ChatInput{Messages: msgs, Tools: r.Tools, Documents: r.Documents, AddGenerationPrompt: true, Kwargs: r.ChatTemplateKwargs}
	if r.AddGenerationPrompt != nil {
		in.AddGenerationPrompt = *r.AddGenerationPrompt
	}
	if r.ContinueFinalMessage {
		in.AddGenerationPrompt = false
	}
	return in, nil
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
			pm, ok := p.(map[string]any)
			if !ok {
				if s, isStr := p.(string); isStr {
					texts = append(texts, s)
					continue
				}
				return nil, badRequest("messages", "messages[%d].content[%d]: expected an object", i, j)
			}
			typ, _ := pm["type"].(string)
			switch typ {
			case "text", "input_text", "output_text", "":
				s, ok := pm["text"].(string)
				if !ok {
					return nil, badRequest("messages", "messages[%d].content[%d].text: expected a string", i, j)
				}
				texts = append(texts, s)
			case "refusal":
				s, _ := pm["refusal"].(string)
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
			parts[j] = map[string]any{"type": "text", "text": t}
		}
		return parts, nil
	}
	return strings.Join(texts, "\n"), nil
}
