package chattemplate

import (
	"fmt"
	"strings"
)

// PrepareMessages turns an OpenAI chat request's "messages" JSON into the
// conversation vLLM hands to apply_chat_template (parse_chat_messages and
// _postprocess_messages in vllm/entrypoints/chat_utils.py), so a prompt
// rendered here is the one vLLM would render:
//
//   - content becomes a string (text parts joined with "\n"; null is "")
//     for format "string", or a list of {"type": "text", "text": ...} for
//     "openai" (null is []);
//   - only role, content, tool_calls (assistant), reasoning and
//     reasoning_content (assistant), tool_call_id (tool), name (a string)
//     and tools (developer) are kept;
//   - tool call arguments given as a JSON string are parsed into an object
//     (empty or null arguments become {}), and an empty tool_calls list is
//     dropped.
//
// Non-text content parts (images, audio, video) are refused: this frontend
// serves text models.
func PrepareMessages(messagesJSON []byte, contentFormat string) ([]map[string]any, error) {
	v, err := DecodeJSON(messagesJSON)
	if err != nil {
		return nil, fmt.Errorf("chattemplate: messages: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("chattemplate: messages must be a JSON array")
	}
	out := make([]map[string]any, 0, len(list))
	for i, e := range list {
		m, ok := e.(*Object)
		if !ok {
			return nil, fmt.Errorf("chattemplate: message %d is not an object", i)
		}
		pm, err := prepareMessage(m, contentFormat)
		if err != nil {
			return nil, fmt.Errorf("chattemplate: message %d: %w", i, err)
		}
		out = append(out, pm)
	}
	return out, nil
}

func prepareMessage(m *Object, format string) (map[string]any, error) {
	roleV, _ := m.Get("role")
	role, ok := roleV.(string)
	if !ok {
		return nil, fmt.Errorf("missing or non-string role")
	}
	content, err := prepareContent(m, format)
	if err != nil {
		return nil, err
	}
	pm := map[string]any{"role": role, "content": content}
	switch role {
	case "assistant":
		if tc, ok := m.Get("tool_calls"); ok && tc != nil {
			calls, ok := tc.([]any)
			if !ok {
				return nil, fmt.Errorf("tool_calls must be a list")
			}
			if len(calls) > 0 {
				for j, c := range calls {
					if err := parseArguments(c); err != nil {
						return nil, fmt.Errorf("tool_calls[%d]: %w", j, err)
					}
				}
				pm["tool_calls"] = calls
			}
		}
		r, ok := m.Get("reasoning")
		if !ok || r == nil {
			r, ok = m.Get("reasoning_content")
		}
		if ok && r != nil {
			pm["reasoning"] = r
			pm["reasoning_content"] = r
		}
	case "tool":
		if id, ok := m.Get("tool_call_id"); ok {
			pm["tool_call_id"] = id
		}
	case "developer":
		tools, _ := m.Get("tools")
		pm["tools"] = tools
	}
	if name, ok := m.Get("name"); ok {
		if s, isStr := name.(string); isStr {
			pm["name"] = s
		}
	}
	return pm, nil
}

func prepareContent(m *Object, format string) (any, error) {
	c, _ := m.Get("content")
	var parts []any
	switch x := c.(type) {
	case nil:
	case string:
		parts = []any{x}
	case []any:
		parts = x
	default:
		return nil, fmt.Errorf("content must be a string, a list of parts or null")
	}
	var texts []string
	var wrapped []any
	for _, p := range parts {
		var text string
		switch p := p.(type) {
		case string:
			text = p
		case *Object:
			tv, _ := p.Get("type")
			typ, _ := tv.(string)
			switch typ {
			case "text", "input_text", "output_text", "refusal", "thinking":
				key := typ
				if typ != "refusal" && typ != "thinking" {
					key = "text"
				}
				v, _ := p.Get(key)
				if v == nil {
					continue // vLLM skips text parts without text
				}
				s, ok := v.(string)
				if !ok {
					return nil, fmt.Errorf("%s part must hold a string", typ)
				}
				text = s
			default:
				return nil, fmt.Errorf("unsupported content part type %q (text only)", typ)
			}
		default:
			return nil, fmt.Errorf("content parts must be objects")
		}
		texts = append(texts, text)
		o := NewObject()
		o.Set("type", "text")
		o.Set("text", text)
		wrapped = append(wrapped, o)
	}
	if format == "openai" {
		if wrapped == nil {
			wrapped = []any{}
		}
		return wrapped, nil
	}
	return strings.Join(texts, "\n"), nil
}

// parseArguments replaces a tool call's JSON-string arguments with the
// decoded object, as vLLM does before rendering.
func parseArguments(call any) error {
	c, ok := call.(*Object)
	if !ok {
		return fmt.Errorf("not an object")
	}
	fv, _ := c.Get("function")
	f, ok := fv.(*Object)
	if !ok {
		return fmt.Errorf("missing function")
	}
	args, _ := f.Get("arguments")
	switch a := args.(type) {
	case *Object, []any:
		return nil
	case string:
		if a == "" {
			f.Set("arguments", NewObject())
			return nil
		}
		v, err := DecodeJSON([]byte(a))
		if err != nil {
			return fmt.Errorf("arguments are not valid JSON: %w", err)
		}
		f.Set("arguments", v)
	case nil:
		f.Set("arguments", NewObject())
	default:
		if !truthy(a) {
			f.Set("arguments", NewObject())
		} else {
			return fmt.Errorf("arguments must be a JSON string or object")
		}
	}
	return nil
}

// PrepareTools decodes a request's "tools" JSON as vLLM passes them to the
// template (each tool.model_dump()): {"type", "function": {"name",
// "description", "parameters", then any extra keys}}, with null for a missing
// description or parameters. A nil or "null" input gives nil (no tools).
func PrepareTools(toolsJSON []byte) ([]any, error) {
	if len(toolsJSON) == 0 || strings.TrimSpace(string(toolsJSON)) == "null" {
		return nil, nil
	}
	v, err := DecodeJSON(toolsJSON)
	if err != nil {
		return nil, fmt.Errorf("chattemplate: tools: %w", err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("chattemplate: tools must be a JSON array")
	}
	out := make([]any, len(list))
	for i, t := range list {
		to, ok := t.(*Object)
		if !ok {
			return nil, fmt.Errorf("chattemplate: tool %d is not an object", i)
		}
		fv, _ := to.Get("function")
		f, ok := fv.(*Object)
		if !ok {
			return nil, fmt.Errorf("chattemplate: tool %d has no function", i)
		}
		if n, _ := f.Get("name"); n == nil {
			return nil, fmt.Errorf("chattemplate: tool %d has no function name", i)
		}
		nf := NewObject()
		for _, k := range []string{"name", "description", "parameters"} {
			v, _ := f.Get(k)
			nf.Set(k, v)
		}
		for _, k := range f.Keys() {
			if _, done := nf.Get(k); !done {
				v, _ := f.Get(k)
				nf.Set(k, v)
			}
		}
		nt := NewObject()
		typ, ok := to.Get("type")
		if !ok {
			typ = "function"
		}
		nt.Set("type", typ)
		nt.Set("function", nf)
		for _, k := range to.Keys() {
			if k != "type" && k != "function" {
				v, _ := to.Get(k)
				nt.Set(k, v)
			}
		}
		out[i] = nt
	}
	return out, nil
}
