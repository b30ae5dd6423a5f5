package toolcall

import (
	"encoding/json"
	"strings"
)

// This file is vLLM's tool_choice handling before generation: the request
// validator (ChatCompletionRequest.check_tool_usage) and the structured-outputs
// schema that forces a named function or "required" (get_json_schema_from_tools,
// applied by ToolParser.adjust_request as structured_outputs.json).

// Tool choice modes. ChoiceDefault is an absent or null tool_choice: vLLM
// treats it as "auto" when tools are given and "none" otherwise.
const (
	ChoiceDefault  = ""
	ChoiceNone     = "none"
	ChoiceAuto     = "auto"
	ChoiceRequired = "required"
	ChoiceNamed    = "function" // {"type": "function", "function": {"name": NAME}}
)

// ToolChoice is a request's tool_choice as ParseToolChoice read it.
type ToolChoice struct {
	Mode string // one of the Choice constants
	Name string // the function of ChoiceNamed
	// bad is the validator's message for a malformed tool_choice; vLLM checks
	// the tools first, so SchemaForChoice reports it in that order.
	bad string
}

// Forced reports whether the choice forces calls through a JSON schema
// (named or "required"), whose answers ParseForced reads.
func (c ToolChoice) Forced() bool { return c.Mode == ChoiceNamed || c.Mode == ChoiceRequired }

// Effective is the mode vLLM acts on: an absent tool_choice is "auto" with
// tools and "none" without.
func (c ToolChoice) Effective(tools []Tool) string {
	if c.Mode != ChoiceDefault {
		return c.Mode
	}
	if len(tools) > 0 {
		return ChoiceAuto
	}
	return ChoiceNone
}

// ChoiceError is one of vLLM's request validation errors (a 400, param
// "tool_choice" or "tools"); Message is vLLM's text.
type ChoiceError struct {
	Param   string
	Message string
}

func (e *ChoiceError) Error() string { return e.Message }

const correctUsage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`"

// ParseToolChoice reads tool_choice as the request carried it (nil or null:
// ChoiceDefault). It never fails: a malformed value is reported by
// SchemaForChoice, after the checks vLLM makes first.
func ParseToolChoice(raw json.RawMessage) ToolChoice {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return ToolChoice{}
	}
	v, err := pyLoads(s)
	if err != nil {
		return ToolChoice{Mode: ChoiceNamed, bad: "Invalid value for `tool_choice`"}
	}
	switch v.kind {
	case jString:
		switch v.text {
		case ChoiceNone, ChoiceAuto, ChoiceRequired:
			return ToolChoice{Mode: v.text}
		}
	case jObject:
		return namedChoice(v)
	}
	return ToolChoice{Mode: ChoiceNamed, bad: "Invalid value for `tool_choice`: " + pyStr(v) +
		"! Only named tools, \"none\", \"auto\" or \"required\" are supported."}
}

// namedChoice checks the object form as check_tool_usage does. The "type"
// key is not checked there (pydantic's later check would want "function").
func namedChoice(v jval) ToolChoice {
	fn, ok := v.get("function")
	if !ok || fn.kind != jObject {
		if !ok {
			fn = jval{kind: jNull}
		}
		return ToolChoice{Mode: ChoiceNamed, bad: "Invalid value for `function`: `" + pyStr(fn) + "` in `tool_choice`! " + correctUsage}
	}
	name, ok := fn.get("name")
	if !ok {
		return ToolChoice{Mode: ChoiceNamed, bad: "Expected field `name` in `function` in `tool_choice`! " + correctUsage}
	}
	if name.kind != jString || name.text == "" {
		return ToolChoice{Mode: ChoiceNamed, bad: "Invalid `name` in `function`: `" + pyStr(name) + "` in `tool_choice`! " + correctUsage}
	}
	return ToolChoice{Mode: ChoiceNamed, Name: name.text}
}

// SchemaForChoice validates tool_choice against tools as vLLM's request
// validator does and returns the JSON schema vLLM puts in
// structured_outputs.json for it: the named tool's parameters, or for
// "required" an array of {"name", "parameters"} objects (minItems 1, anyOf
// over the tools, every tool's "$defs" hoisted to the root). ok is false
// when nothing is forced ("none", "auto", absent, or a named tool without
// parameters). tools nil means the request had no tools; a non-nil empty
// slice is the refused "tools": [].
func SchemaForChoice(choice ToolChoice, tools []Tool) (schema json.RawMessage, ok bool, err error) {
	if tools != nil && len(tools) == 0 {
		return nil, false, &ChoiceError{"tools", "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."}
	}
	if choice.Mode == ChoiceDefault || choice.Mode == ChoiceNone {
		return nil, false, nil
	}
	if tools == nil {
		return nil, false, &ChoiceError{"tool_choice", "When using `tool_choice`, `tools` must be set."}
	}
	if choice.bad != "" {
		return nil, false, &ChoiceError{"tool_choice", choice.bad}
	}
	switch choice.Mode {
	case ChoiceNamed:
		return namedSchema(choice.Name, tools)
	case ChoiceRequired:
		return requiredSchema(tools)
	}
	return nil, false, nil
}

// namedSchema is the named tool's parameters. vLLM maps tools by name, so
// the last tool of that name wins; parameters that are absent or null
// force nothing.
func namedSchema(name string, tools []Tool) (json.RawMessage, bool, error) {
	found := -1
	for i, t := range tools {
		if t.Name == name {
			found = i
		}
	}
	if found < 0 {
		return nil, false, &ChoiceError{"tool_choice", "The tool specified in `tool_choice` does not match any of the specified `tools`"}
	}
	p := strings.TrimSpace(string(tools[found].Parameters))
	if p == "" || p == "null" {
		return nil, false, nil
	}
	return json.RawMessage(p), true, nil
}

// requiredSchema is _get_json_schema_from_tools.
func requiredSchema(tools []Tool) (json.RawMessage, bool, error) {
	var b strings.Builder
	b.WriteString(`{"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [`)
	defs := jval{kind: jObject}
	for i, t := range tools {
		params, err := toolParams(t)
		if err != nil {
			return nil, false, err
		}
		if err := hoistDefs(&params, &defs); err != nil {
			return nil, false, err
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(`{"properties": {"name": {"type": "string", "enum": [`)
		writeJSONString(&b, t.Name, false)
		b.WriteString(`]}, "parameters": `)
		if params.truthy() {
			writeJSON(&b, params, false)
		} else {
			b.WriteString(`{"type": "object", "properties": {}}`)
		}
		b.WriteString(`}, "required": ["name", "parameters"]}`)
	}
	b.WriteString("]}")
	if len(defs.keys) > 0 {
		b.WriteString(`, "$defs": `)
		writeJSON(&b, defs, false)
	}
	b.WriteString("}")
	return json.RawMessage(b.String()), true, nil
}

// toolParams decodes a tool's parameters (absent: null).
func toolParams(t Tool) (jval, error) {
	p := strings.TrimSpace(string(t.Parameters))
	if p == "" {
		return jval{kind: jNull}, nil
	}
	v, err := pyLoads(p)
	if err != nil {
		return jval{}, &ChoiceError{"tools", "tool " + t.Name + ": parameters are not valid JSON"}
	}
	return v, nil
}

// hoistDefs is _get_tool_schema_defs for one tool: its "$defs" leave the
// parameters (vLLM pops them, so the anyOf entry has none) and join the
// root's; one name with two different schemas is refused.
func hoistDefs(params, defs *jval) error {
	if params.kind != jObject {
		return nil
	}
	at := -1
	for i, k := range params.keys {
		if k == "$defs" {
			at = i
		}
	}
	if at < 0 {
		return nil
	}
	d := params.vals[at]
	params.keys = append(params.keys[:at:at], params.keys[at+1:]...)
	params.vals = append(params.vals[:at:at], params.vals[at+1:]...)
	if d.kind != jObject {
		return &ChoiceError{"tools", "`$defs` of a tool's parameters must be an object"}
	}
	for i, name := range d.keys {
		if old, ok := defs.get(name); ok && !pyEqual(old, d.vals[i]) {
			return &ChoiceError{"tools", "Tool definition '" + name + "' has multiple schemas, which is not supported."}
		}
		defs.set(name, d.vals[i])
	}
	return nil
}

// pyEqual is Python's == on decoded JSON: key order does not count, and
// numbers compare by value (1 == 1.0, True == 1).
func pyEqual(a, b jval) bool {
	if an, ok := pyNum(a); ok {
		bn, ok := pyNum(b)
		return ok && an == bn
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case jNull:
		return true
	case jString:
		return a.text == b.text
	case jArray:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !pyEqual(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	}
	if len(a.keys) != len(b.keys) {
		return false
	}
	for i, k := range a.keys {
		bv, ok := b.get(k)
		if !ok || !pyEqual(a.vals[i], bv) {
			return false
		}
	}
	return true
}

// pyNum is a number's value for comparison (ints beyond float precision
// compare approximately; schemas rarely hold such).
func pyNum(v jval) (float64, bool) {
	switch v.kind {
	case jBool:
		if v.b {
			return 1, true
		}
		return 0, true
	case jFloat:
		return v.num, true
	case jInt:
		f, ok := pyFloat(v.text)
		return f, ok
	}
	return 0, false
}

// pyStr is Python's str() of a decoded value, as vLLM's f-strings print it.
func pyStr(v jval) string {
	if v.kind == jString {
		return v.text
	}
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

func writeRepr(b *strings.Builder, v jval) {
	switch v.kind {
	case jNull:
		b.WriteString("None")
	case jBool:
		if v.b {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case jString:
		writeStrRepr(b, v.text)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, v.vals[i])
		}
		b.WriteByte('}')
	default:
		writeJSON(b, v, false)
	}
}

// writeStrRepr is repr(str) for printable text: single quotes unless the
// text holds one and no double quote.
func writeStrRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}
