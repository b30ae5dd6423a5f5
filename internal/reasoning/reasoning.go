package reasoning

import (
	"sort"
	"strings"
)

// Delta is one streamed split: the reasoning and content fields of vLLM's
// DeltaMessage. nil means the field is not set; a set field may be "".
type Delta struct {
	Reasoning *string
	Content   *string
}

// Options carries what the request says about thinking: its
// chat_template_kwargs, decoded from JSON (nil when absent).
type Options struct {
	ChatTemplateKwargs map[string]any
}

// Parser is one --reasoning-parser, bound to one request's options. It is
// safe for concurrent use; its Streams are not.
type Parser interface {
	// Split is vLLM's extract_reasoning for a complete answer.
	Split(text string) (reasoning, content *string)
	// PromptEndsReasoning is vLLM's is_reasoning_end over the prompt:
	// true when the rendered prompt already closed reasoning (thinking
	// disabled), so every output delta is content.
	PromptEndsReasoning(prompt string) bool
	// NewStream starts a streamed split of one choice.
	NewStream() Stream
}

// Stream splits text deltas, in order.
type Stream interface {
	// Feed is vLLM's extract_reasoning_streaming for the next delta: nil
	// where it returns None. ends is vLLM's is_reasoning_end over this
	// delta's tokens: the moment the serving layer hands the rest of the
	// output to the tool parser.
	Feed(delta string) (d *Delta, ends bool)
	// FeedSplit is Feed with the delta's parts spread out (ok false for
	// nil), the shape toolcall.ChatStream takes.
	FeedSplit(delta string) (reasoning, content *string, ok, ends bool)
}

func feedSplit(d *Delta, ends bool) (reasoning, content *string, ok, e bool) {
	if d == nil {
		return nil, nil, false, ends
	}
	return d.Reasoning, d.Content, true, ends
}

// Factory makes a Parser for one request.
type Factory func(Options) Parser

var registry = map[string]Factory{}

func register(f Factory, names ...string) {
	for _, n := range names {
		registry[n] = f
	}
}

// Lookup finds a parser by its --reasoning-parser name and binds it to
// the request's options.
func Lookup(name string, opts Options) (Parser, bool) {
	f, ok := registry[name]
	if !ok {
		return nil, false
	}
	return f(opts), true
}

// Names lists the registered parser names, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// kwarg reads a chat_template_kwargs entry: its Python truth value, and
// whether it was there (and not null).
func (o Options) kwarg(key string) (val, present bool) {
	v, ok := o.ChatTemplateKwargs[key]
	if !ok || v == nil {
		return false, false
	}
	return truthy(v), true
}

func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	case nil:
		return false
	}
	return true
}

func ptr(s string) *string { return &s }

func orNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// endsAfterLastStart reports whether, scanning s backwards, end occurs
// before start does: the text form of vLLM's is_reasoning_end.
func endsAfterLastStart(s, start, end string) bool {
	e := strings.LastIndex(s, end)
	if e < 0 {
		return false
	}
	return strings.LastIndex(s, start) < e
}
