package toolcall

import (
	"errors"
	"strings"
)

// This file reads the answers of forced tool choices the way vLLM's serving
// layer does (_parse_tool_calls_from_content for complete answers,
// extract_named_tool_call_streaming and extract_required_tool_call_streaming
// for streams), and applies parallel_tool_calls false
// (maybe_filter_parallel_tool_calls).

var errNotForced = errors.New("toolcall: tool_choice is not named or required")

// ParseForced reads a complete answer of a named or "required" tool choice.
// content is the answer's content (after the reasoning parser; nil for
// vLLM's None).
//
// Named: the whole content is the arguments, verbatim, of one call to the
// named function (no call when content is nil). Required: the content must
// be a JSON list of {"name": str, "parameters": object or null,
// "description": str or null, ...} objects (pydantic's
// list[FunctionDefinition]); each becomes a call whose arguments are
// json.dumps(parameters, ensure_ascii=False). Anything else gives no calls,
// and no error, as vLLM suppresses the validation error.
//
// As vLLM answers: the message content is "" (not null) beside the calls;
// finish_reason is the engine's for a named function, and "tool_calls" for
// "required" when the engine's is "stop".
func ParseForced(choice ToolChoice, content *string, newID func() string) ([]Call, error) {
	newID = orNewID(newID)
	switch choice.Mode {
	case ChoiceNamed:
		if content == nil {
			return []Call{}, nil
		}
		return []Call{{ID: newID(), Name: choice.Name, Arguments: *content}}, nil
	case ChoiceRequired:
		text := ""
		if content != nil {
			text = *content
		}
		defs, ok := functionDefinitions(text)
		calls := make([]Call, 0, len(defs))
		if !ok {
			return calls, nil
		}
		for _, d := range defs {
			calls = append(calls, Call{ID: newID(), Name: d.name, Arguments: pyDumps(d.params, false)})
		}
		return calls, nil
	}
	return nil, errNotForced
}

type funcDef struct {
	name   string
	params jval // null when absent
}

// functionDefinitions validates text as pydantic's
// TypeAdapter(list[FunctionDefinition]).validate_json does.
func functionDefinitions(text string) ([]funcDef, bool) {
	v, err := pyLoads(text)
	if err != nil || v.kind != jArray {
		return nil, false
	}
	out := make([]funcDef, 0, len(v.arr))
	for _, e := range v.arr {
		if e.kind != jObject {
			return nil, false
		}
		name, ok := e.get("name")
		if !ok || name.kind != jString {
			return nil, false
		}
		d := funcDef{name: name.text, params: jval{kind: jNull}}
		if p, ok := e.get("parameters"); ok {
			if p.kind != jObject && p.kind != jNull {
				return nil, false
			}
			d.params = p
		}
		if desc, ok := e.get("description"); ok && desc.kind != jString && desc.kind != jNull {
			return nil, false
		}
		if dl, ok := e.get("defer_loading"); ok && !laxBool(dl) {
			return nil, false
		}
		out = append(out, d)
	}
	return out, true
}

// laxBool is what pydantic's lax mode takes for an optional bool.
func laxBool(v jval) bool {
	switch v.kind {
	case jNull, jBool:
		return true
	case jInt:
		return v.text == "0" || v.text == "1"
	case jFloat:
		return v.num == 0 || v.num == 1
	case jString:
		switch strings.ToLower(v.text) {
		case "0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes":
			return true
		}
	}
	return false
}

// ForcedStream streams the answer of a named or "required" tool choice as
// vLLM does. It is a Stream, so NewChatStream can put a reasoning parser in
// front of it.
//
// Named: every delta (the empty text of the final end-of-sequence output
// included) is an argument fragment of call 0; the first also carries the
// id, type and name. Required: the text is read as a partial JSON list;
// a call's first entry (id, type, name and the arguments so far) comes once
// its "parameters" key has a value, then argument fragments follow, with the
// list's commas and closing braces cut as vLLM's filter_delta_text cuts
// them.
type ForcedStream struct {
	choice   ToolChoice
	newID    func() string
	prev     string // the text before this delta
	nameSent bool   // vLLM's function_name_returned
	called   bool   // a delta carried tool calls
}

// NewForcedStream starts one choice's stream. It panics on a choice that is
// not forced (a programming error: check ToolChoice.Forced).
func NewForcedStream(choice ToolChoice, newID func() string) *ForcedStream {
	if !choice.Forced() {
		panic(errNotForced)
	}
	return &ForcedStream{choice: choice, newID: orNewID(newID)}
}

// Feed takes the next text delta; tokens is ignored (the forced paths do
// not look at token ids).
func (s *ForcedStream) Feed(text string, _ int) *Delta {
	var d *Delta
	if s.choice.Mode == ChoiceNamed {
		d = s.named(text)
	} else {
		d = s.required(text)
	}
	s.prev += text
	if d != nil && len(d.Calls) > 0 {
		s.called = true
	}
	return d
}

// Finish returns the last delta unchanged (vLLM repairs unstreamed
// arguments for "auto" only). toolsCalled is true for "required" once a
// delta carried calls; a named function keeps the engine's finish_reason.
func (s *ForcedStream) Finish(last *Delta) (*Delta, bool) {
	return last, s.choice.Mode == ChoiceRequired && s.called
}

func (s *ForcedStream) named(text string) *Delta {
	c := CallDelta{Index: 0, Args: text, HasArgs: true}
	if !s.nameSent {
		c.ID, c.Type, c.Name = s.newID(), "function", s.choice.Name
		s.nameSent = true
	}
	return &Delta{Calls: []CallDelta{c}}
}

// required is extract_required_tool_call_streaming.
func (s *ForcedStream) required(delta string) *Delta {
	current := s.prev + delta
	if current == "" {
		return nil
	}
	obj, _, ok := partialLoads(current, true)
	if !ok || obj.kind != jArray || len(obj.arr) == 0 {
		s.nameSent = false
		return nil
	}
	_, finishesPrev := filterDeltaText(delta, s.prev)
	cur := obj.arr[len(obj.arr)-1]
	if cur.kind != jObject {
		// vLLM tests membership in a non-dict element, or raises; no call.
		s.nameSent = false
		return nil
	}
	if !finishesPrev && (!cur.has("name") || !cur.has("parameters")) {
		s.nameSent = false
		return nil
	}
	index := len(obj.arr) - 1
	if s.nameSent {
		d, _ := filterDeltaText(delta, s.prev)
		if d == "" {
			return nil
		}
		return argsDelta(index, d)
	}
	args := ""
	if at := strings.LastIndex(current, `"parameters":`); at >= 0 {
		args = pyLStrip(current[at+len(`"parameters":`):])
	}
	args, _ = filterDeltaText(args, s.prev)
	if finishesPrev && !cur.has("parameters") {
		if len(obj.arr) < 2 {
			return nil // vLLM raises IndexError here
		}
		cur = obj.arr[len(obj.arr)-2]
	}
	name, ok := cur.get("name")
	if !ok || name.kind != jString {
		return nil // vLLM fails to build the delta
	}
	s.nameSent = true
	c := nameDelta(index, s.newID(), name.text)
	c.Args, c.HasArgs = args, true
	return &Delta{Calls: []CallDelta{c}}
}

// bracketLevel is vLLM's _bracket_level: braces counted anywhere, strings
// included.
func bracketLevel(s string) int {
	return strings.Count(s, "{") - strings.Count(s, "}")
}

// filterDeltaText is vLLM's filter_delta_text: the delta cut where the
// current list element closes (the closing brace and what follows at depth
// zero are dropped, and a comma there ends it); passedZero reports that the
// delta closed an element.
func filterDeltaText(delta, prev string) (string, bool) {
	level := bracketLevel(prev)
	var b strings.Builder
	passedZero := false
	for i := 0; i < len(delta); i++ {
		c := delta[i]
		switch c {
		case '{':
			level++
			passedZero = level == 0
		case '}':
			level--
			passedZero = level == 0
		}
		if level != 0 {
			b.WriteByte(c)
		} else if c == ',' {
			break
		}
	}
	return b.String(), passedZero
}

// FirstCall applies parallel_tool_calls false to a complete answer: only
// the first call is kept.
func FirstCall(calls []Call) []Call {
	if len(calls) > 1 {
		return calls[:1]
	}
	return calls
}

// FirstCallDelta applies parallel_tool_calls false to a streamed delta: only
// entries of call index 0 are kept. A delta whose entries all go is kept
// with an empty list, as vLLM sends it.
func FirstCallDelta(d *Delta) *Delta {
	if d == nil || d.Calls == nil {
		return d
	}
	out := *d
	out.Calls = make([]CallDelta, 0, len(d.Calls))
	for _, c := range d.Calls {
		if c.Index == 0 {
			out.Calls = append(out.Calls, c)
		}
	}
	return &out
}
