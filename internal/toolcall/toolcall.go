package toolcall

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sort"
)

// Tool is one function the request offered: its name and its JSON schema
// parameters, as the request carried them (nil when absent).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// Call is one parsed tool call of a complete answer.
type Call struct {
	ID        string
	Name      string
	Arguments string // a JSON text, serialized the way vLLM's parser does
}

// Result is what a parser makes of a complete answer.
type Result struct {
	// Called is vLLM's tools_called. It can be true with no Calls
	// (deepseek_v3 when its regex finds nothing inside the markers).
	Called bool
	Calls  []Call
	// Content is the text outside the calls; nil where vLLM returns None.
	Content *string
	// Reasoning is set by the openai (harmony) parser only: the analysis
	// channel, as vLLM's parse_chat_output joins it.
	Reasoning *string
}

// CallDelta is one entry of a streamed delta's tool_calls. Empty strings
// stand for absent fields; HasArgs says whether function.arguments is
// present (it may be present and empty).
type CallDelta struct {
	Index   int
	ID      string
	Type    string // "function" on the first delta of a call
	Name    string
	Args    string
	HasArgs bool
}

// Delta is one streamed message delta (vLLM's DeltaMessage, tool part).
// Content is nil when the delta carries no content field.
type Delta struct {
	Content *string
	// Reasoning is set by the openai (harmony) parser only.
	Reasoning *string
	Calls     []CallDelta
}

// Parser parses one model family's tool-call syntax. A Parser is stateless
// and safe for concurrent use; a Stream is not.
type Parser interface {
	// Name is the --tool-call-parser name.
	Name() string
	// Parse extracts the calls of a complete answer. newID makes each
	// call's id (nil: NewID).
	Parse(text string, tools []Tool, newID func() string) Result
	// NewStream starts parsing one streamed answer (one choice).
	NewStream(tools []Tool, newID func() string) Stream
}

// Stream turns text deltas into tool-call deltas for one choice.
type Stream interface {
	// Feed takes the next text delta and the number of tokens that made
	// it (len of vLLM's delta_token_ids), and returns the delta to send,
	// or nil when vLLM's parser returns None.
	Feed(text string, tokens int) *Delta
	// Finish is called once, after Feed of the engine output that
	// carried the finish reason, with what that Feed returned. It returns
	// the delta to send with the finish_reason (nil: an empty delta) and
	// whether tools were called (finish_reason "tool_calls"); this is
	// vLLM's serving-layer repair of unstreamed argument text.
	Finish(last *Delta) (final *Delta, toolsCalled bool)
}

// NewID makes a tool call id the way vLLM's make_tool_call_id does:
// "chatcmpl-tool-" and 16 random hex digits.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-tool-" + hex.EncodeToString(b[:])
}

var registry = map[string]Parser{}

func register(p Parser, names ...string) {
	for _, n := range names {
		registry[n] = p
	}
}

// Lookup finds a parser by its --tool-call-parser name.
func Lookup(name string) (Parser, bool) {
	p, ok := registry[name]
	return p, ok
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

func orNewID(f func() string) func() string {
	if f == nil {
		return NewID
	}
	return f
}

// contentOrNil is vLLM's `content if content else None`.
func contentOrNil(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func noCalls(text string) Result { return Result{Content: &text} }

func argsDelta(index int, args string) *Delta {
	return &Delta{Calls: []CallDelta{{Index: index, Args: args, HasArgs: true}}}
}

func nameDelta(index int, id, name string) CallDelta {
	return CallDelta{Index: index, ID: id, Type: "function", Name: name}
}

func contentDelta(s string) *Delta { return &Delta{Content: &s} }
