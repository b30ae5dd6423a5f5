// Package chattemplate renders Hugging Face chat templates (Jinja) exactly as
// transformers' apply_chat_template does, without Python: a small Jinja
// interpreter of the subset chat templates use, with jinja2's whitespace
// rules and Python's value semantics and printing.
package chattemplate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Template is a parsed chat template. It is immutable after Parse and safe
// for concurrent Render calls.
type Template struct {
	src           string
	body          []node
	contentFormat string
}

// Parse parses a chat template. A template that uses a statement, filter or
// test we do not implement is refused here, naming it, rather than rendered
// approximately.
func Parse(src string) (*Template, error) {
	body, err := parseTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("chattemplate: %w", err)
	}
	t := &Template{src: src, body: body}
	t.contentFormat = detectContentFormat(body)
	return t, nil
}

// Source returns the template text.
func (t *Template) Source() string { return t.src }

// ContentFormat tells how message content must be shaped for this template,
// as vLLM's _detect_content_format does: "openai" when the template iterates
// a message's content (parts), else "string".
func (t *Template) ContentFormat() string { return t.contentFormat }

// Input is what apply_chat_template passes to the template.
type Input struct {
	// Messages are decoded JSON messages (role, content, tool_calls, ...).
	// Decode them with DecodeJSON so ints stay ints and key order is kept.
	Messages []map[string]any
	// Tools are OpenAI tools; nil is passed as None, as transformers does.
	Tools []any
	// Documents for RAG templates; nil is passed as None.
	Documents           []any
	AddGenerationPrompt bool
	// SpecialTokens (bos_token, eos_token, ...) from tokenizer_config.json.
	SpecialTokens map[string]string
	// Kwargs are chat_template_kwargs (e.g. enable_thinking), merged into the
	// context after the special tokens.
	Kwargs map[string]any
	// Now is the clock behind strftime_now; nil means time.Now.
	Now func() time.Time
	// MaxOutputBytes bounds the rendered prompt (0 = DefaultMaxOutputBytes).
	MaxOutputBytes int
	// MaxSteps bounds the work of one render: statements, loop iterations,
	// calls, and scans in proportion to what they read (0 = DefaultMaxSteps
	// plus 4 per byte of input).
	MaxSteps int64
	// MaxBytes bounds the values one render produces, all added up: every
	// string, list and dict built and the output (0 = DefaultMaxBytes plus
	// 16 per byte of input).
	MaxBytes int64
}

// Render renders the template. A raise_exception call in the template comes
// back as a *RaisedError carrying its message.
func (t *Template) Render(in Input) (string, error) {
	return t.RenderContext(context.Background(), in)
}

// RenderContext is Render stopped when ctx is done (within a few
// milliseconds: the context is checked as the render works).
func (t *Template) RenderContext(ctx context.Context, in Input) (string, error) {
	s, _, err := t.render(ctx, in)
	return s, err
}

// render renders and returns what is left of the budget.
func (t *Template) render(ctx context.Context, in Input) (string, budget, error) {
	if err := ctx.Err(); err != nil {
		return "", budget{}, fmt.Errorf("chattemplate: render stopped: %w", err)
	}
	r := &renderer{
		b:       newBudget(ctx, &in),
		maxOut:  in.MaxOutputBytes,
		now:     in.Now,
		globals: globals,
	}
	if r.maxOut <= 0 {
		r.maxOut = DefaultMaxOutputBytes
	}
	if r.now == nil {
		r.now = time.Now
	}
	root := &frame{vars: make(map[string]any, len(in.SpecialTokens)+len(in.Kwargs)+4)}
	for k, v := range in.SpecialTokens {
		root.vars[k] = v
	}
	for k, v := range in.Kwargs {
		root.vars[k] = v
	}
	msgs := make([]any, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = m
	}
	root.vars["messages"] = msgs
	root.vars["tools"] = listOrNone(in.Tools)
	root.vars["documents"] = listOrNone(in.Documents)
	root.vars["add_generation_prompt"] = in.AddGenerationPrompt
	var out strings.Builder
	if _, err := r.exec(t.body, root, &out); err != nil {
		var re *RaisedError
		if errors.As(err, &re) {
			return "", r.b, re
		}
		return "", r.b, fmt.Errorf("chattemplate: %w", err)
	}
	return out.String(), r.b, nil
}

func listOrNone(l []any) any {
	if l == nil {
		return nil
	}
	return l
}
