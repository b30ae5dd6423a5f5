package openaijson

import (
	"fmt"
	"reflect"
	"strings"
)

// Decoder decodes the request bodies of the types it was made for. It holds no
// per-body state: one Decoder serves any number of goroutines.
type Decoder struct {
	// names interns the JSON names of the body types' fields, so a member's name
	// is looked up (a map index on string(raw) does not allocate) rather than
	// copied into a new string per member.
	names map[string]string
	// maxPrompts bounds the lists of a prompt (Prompt).
	maxPrompts int
}

// NewDecoder returns a Decoder for bodies of the given struct types (their json
// tags, embedded structs included, name the members that cost no allocation;
// any other member is still decoded, at the cost of a string). A prompt may hold
// at most maxPrompts lists or strings.
func NewDecoder(maxPrompts int, bodies ...reflect.Type) *Decoder {
	m := map[string]string{"prompt": "prompt"}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for f := range t.Fields() {
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				add(f.Type)
				continue
			}
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				m[name] = name
			}
		}
	}
	for _, t := range bodies {
		add(t)
	}
	return &Decoder{names: m, maxPrompts: maxPrompts}
}

// Prompt is where Decode parses a completions prompt as it streams in: a list of
// token ids or a list of such lists (IDs), or a string or a list of strings
// (Texts). MaxTokens bounds each list of ids (0 or more than
// apicore.MaxPromptTokens: apicore.MaxPromptTokens).
type Prompt struct {
	IDs       [][]int64
	Texts     []string
	MaxTokens int
}

// StreamOptions is OpenAI's stream_options, matched by its exact field names.
type StreamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// Error is a body the client got wrong: malformed or too deep JSON, a value of
// the wrong JSON type, a prompt out of bounds. Param names the field at fault
// (empty: the body as a whole); Message is the text a 400 answers with.
type Error struct {
	Param   string
	Message string
}

func (e *Error) Error() string { return e.Message }

func badRequest(param, format string, args ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}
