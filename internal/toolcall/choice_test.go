package toolcall

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// exampleTools are vLLM's EXAMPLE_TOOLS (tests/tool_use/test_tool_choice_required.py).
var exampleTools = []Tool{
	{Name: "get_current_weather", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city to find the weather for, e.g. 'San Francisco'"}}, "required": ["city"], "additionalProperties": false}`)},
	{Name: "get_forecast", Parameters: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string", "description": "The city to get the forecast for, e.g. 'New York'"}, "days": {"type": "integer", "description": "Number of days to get the forecast for (1-7)"}}, "required": ["city", "days"], "additionalProperties": false}`)},
}

func TestToolChoiceValidation(t *testing.T) {
	cases := []struct {
		name, choice string
		tools        []Tool
		param, msg   string
	}{
		{"empty tools", `"auto"`, []Tool{}, "tools", "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."},
		{"empty tools, no choice", ``, []Tool{}, "tools", "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely."},
		{"required without tools", `"required"`, nil, "tool_choice", "When using `tool_choice`, `tools` must be set."},
		{"auto without tools", `"auto"`, nil, "tool_choice", "When using `tool_choice`, `tools` must be set."},
		{"named without tools", `{"type": "function", "function": {"name": "f"}}`, nil, "tool_choice", "When using `tool_choice`, `tools` must be set."},
		{"bad string before tools check", `"sometimes"`, nil, "tool_choice", "When using `tool_choice`, `tools` must be set."},
		{"bad string", `"sometimes"`, exampleTools, "tool_choice", `Invalid value for ` + "`tool_choice`" + `: sometimes! Only named tools, "none", "auto" or "required" are supported.`},
		{"number", `5`, exampleTools, "tool_choice", `Invalid value for ` + "`tool_choice`" + `: 5! Only named tools, "none", "auto" or "required" are supported.`},
		{"function missing", `{"type": "function"}`, exampleTools, "tool_choice", "Invalid value for `function`: `None` in `tool_choice`! " + correctUsage},
		{"function a string", `{"type": "function", "function": "f"}`, exampleTools, "tool_choice", "Invalid value for `function`: `f` in `tool_choice`! " + correctUsage},
		{"name missing", `{"type": "function", "function": {}}`, exampleTools, "tool_choice", "Expected field `name` in `function` in `tool_choice`! " + correctUsage},
		{"name empty", `{"type": "function", "function": {"name": ""}}`, exampleTools, "tool_choice", "Invalid `name` in `function`: `` in `tool_choice`! " + correctUsage},
		{"name a list", `{"type": "function", "function": {"name": ["a", 1]}}`, exampleTools, "tool_choice", "Invalid `name` in `function`: `['a', 1]` in `tool_choice`! " + correctUsage},
		{"unknown name", `{"type": "function", "function": {"name": "get_time"}}`, exampleTools, "tool_choice", "The tool specified in `tool_choice` does not match any of the specified `tools`"},
	}
	for _, c := range cases {
		_, _, err := SchemaForChoice(ParseToolChoice(json.RawMessage(c.choice)), c.tools)
		ce, ok := err.(*ChoiceError)
		if !ok || ce.Param != c.param || ce.Message != c.msg {
			t.Errorf("%s: got %v, want %s: %s", c.name, err, c.param, c.msg)
		}
	}
	for _, c := range []string{``, `null`, `"none"`} {
		if _, ok, err := SchemaForChoice(ParseToolChoice(json.RawMessage(c)), nil); ok || err != nil {
			t.Errorf("%q without tools: ok %v err %v", c, ok, err)
		}
	}
	if _, ok, err := SchemaForChoice(ParseToolChoice(json.RawMessage(`"auto"`)), exampleTools); ok || err != nil {
		t.Errorf("auto: ok %v err %v", ok, err)
	}
	if got := ParseToolChoice(nil).Effective(exampleTools); got != ChoiceAuto {
		t.Errorf("absent with tools acts as %q", got)
	}
	if got := ParseToolChoice(json.RawMessage("null")).Effective(nil); got != ChoiceNone {
		t.Errorf("null without tools acts as %q", got)
	}
}

func TestSchemaForNamedChoice(t *testing.T) {
	choice := ParseToolChoice(json.RawMessage(`{"type": "function", "function": {"name": "get_forecast"}}`))
	s, ok, err := SchemaForChoice(choice, exampleTools)
	if err != nil || !ok || string(s) != string(exampleTools[1].Parameters) {
		t.Fatalf("got %s %v %v", s, ok, err)
	}
	// The last tool of the name wins (vLLM maps tools by name); no
	// parameters force nothing.
	tools := []Tool{{Name: "f", Parameters: json.RawMessage(`{"type": "object"}`)}, {Name: "f"}}
	if _, ok, err := SchemaForChoice(ParseToolChoice(json.RawMessage(`{"function": {"name": "f"}}`)), tools); ok || err != nil {
		t.Errorf("parameterless named tool: ok %v err %v", ok, err)
	}
}

func TestSchemaForRequiredChoice(t *testing.T) {
	s, ok, err := SchemaForChoice(ToolChoice{Mode: ChoiceRequired}, []Tool{
		{Name: "a", Parameters: json.RawMessage(`{"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}`)},
		{Name: "b"},
		{Name: "c", Parameters: json.RawMessage(`{}`)},
		{Name: "d", Parameters: json.RawMessage(`{"$defs": {"P": {"type": "string"}, "Q": {"type": "integer"}}, "type": "object"}`)},
	})
	if err != nil || !ok {
		t.Fatal(err)
	}
	empty := `{"type": "object", "properties": {}}`
	want := `{"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [` +
		`{"properties": {"name": {"type": "string", "enum": ["a"]}, "parameters": {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}}, "required": ["name", "parameters"]}, ` +
		`{"properties": {"name": {"type": "string", "enum": ["b"]}, "parameters": ` + empty + `}, "required": ["name", "parameters"]}, ` +
		`{"properties": {"name": {"type": "string", "enum": ["c"]}, "parameters": ` + empty + `}, "required": ["name", "parameters"]}, ` +
		`{"properties": {"name": {"type": "string", "enum": ["d"]}, "parameters": {"type": "object"}}, "required": ["name", "parameters"]}]}, ` +
		`"$defs": {"P": {"type": "string"}, "Q": {"type": "integer"}}}`
	if string(s) != want {
		t.Errorf("schema\n got %s\nwant %s", s, want)
	}
	if !json.Valid(s) {
		t.Error("not JSON")
	}
	_, _, err = SchemaForChoice(ToolChoice{Mode: ChoiceRequired}, []Tool{
		{Name: "a", Parameters: json.RawMessage(`{"$defs": {"P": {"type": "string"}}}`)},
		{Name: "b", Parameters: json.RawMessage(`{"$defs": {"P": {"type": "integer"}}}`)},
	})
	if err == nil || err.Error() != "Tool definition 'P' has multiple schemas, which is not supported." {
		t.Errorf("conflicting $defs: %v", err)
	}
	// Equal in Python's sense: key order and 1 == 1.0 do not matter.
	_, _, err = SchemaForChoice(ToolChoice{Mode: ChoiceRequired}, []Tool{
		{Name: "a", Parameters: json.RawMessage(`{"$defs": {"P": {"type": "integer", "maximum": 1}}}`)},
		{Name: "b", Parameters: json.RawMessage(`{"$defs": {"P": {"maximum": 1.0, "type": "integer"}}}`)},
	})
	if err != nil {
		t.Errorf("equal $defs refused: %v", err)
	}
}

func TestParseForced(t *testing.T) {
	str := func(s string) *string { return &s }
	named := ToolChoice{Mode: ChoiceNamed, Name: "get_weather"}
	calls, err := ParseForced(named, str(`{"city": "Paris"}`), seqIDs())
	want := []Call{{ID: "chatcmpl-tool-0000000000000001", Name: "get_weather", Arguments: `{"city": "Paris"}`}}
	if err != nil || !reflect.DeepEqual(calls, want) {
		t.Errorf("named: %+v %v", calls, err)
	}
	if calls, _ := ParseForced(named, nil, seqIDs()); calls == nil || len(calls) != 0 {
		t.Errorf("named, no content: %+v", calls)
	}
	req := ToolChoice{Mode: ChoiceRequired}
	cases := []struct {
		text string
		want []Call
	}{
		{`[{"name": "get_current_weather", "parameters": {"city": "Vienna"}}]`,
			[]Call{{Name: "get_current_weather", Arguments: `{"city": "Vienna"}`}}},
		{` [{"name":"get_forecast","parameters":{"city":"Wien","days":7.50}},{"name":"get_current_weather","parameters":{"city":"東京"}, "x": 1}] `,
			[]Call{{Name: "get_forecast", Arguments: `{"city": "Wien", "days": 7.5}`}, {Name: "get_current_weather", Arguments: `{"city": "東京"}`}}},
		{`[{"name": "f"}]`, []Call{{Name: "f", Arguments: "null"}}},
		{`[{"name": "f", "parameters": null, "description": null, "defer_loading": "yes"}]`, []Call{{Name: "f", Arguments: "null"}}},
		{`[]`, nil},
		{`{"name": "f", "parameters": {}}`, nil},
		{`[{"name": "f", "parameters": {}}, {}]`, nil},
		{`[{"name": 1, "parameters": {}}]`, nil},
		{`[{"name": "f", "parameters": []}]`, nil},
		{`[{"name": "f", "parameters": {}, "description": 2}]`, nil},
		{`[{"name": "f", "parameters": {}}] trailing`, nil},
		{`[{"name": "f", "parameters": {}`, nil},
		{``, nil},
	}
	for _, c := range cases {
		calls, err := ParseForced(req, str(c.text), func() string { return "" })
		if err != nil || calls == nil || len(calls) != len(c.want) || (len(c.want) > 0 && !reflect.DeepEqual(calls, c.want)) {
			t.Errorf("required %q: got %+v %v, want %+v", c.text, calls, err, c.want)
		}
	}
	if _, err := ParseForced(ToolChoice{Mode: ChoiceAuto}, str(""), nil); err == nil {
		t.Error("auto is not forced")
	}
}

// feedChunks streams text through a ForcedStream in chunks of n bytes and
// then the end-of-sequence output; it returns the non-nil deltas.
func feedChunks(s Stream, text string, n int) []*Delta {
	var out []*Delta
	for i := 0; i < len(text); i += n {
		if d := s.Feed(text[i:min(i+n, len(text))], 1); d != nil {
			out = append(out, d)
		}
	}
	if d := s.Feed("", 1); d != nil {
		out = append(out, d)
	}
	return out
}

// validOutputs are VALID_TOOL_OUTPUTS of vLLM's test, as json.dumps writes them.
var validOutputs = []string{
	`[{"name": "get_current_weather", "parameters": {"city": "Vienna"}}]`,
	`[{"name": "get_current_weather", "parameters": {"city": "Vienna"}}, {"name": "get_current_weather", "parameters": {"city": "Berlin"}}]`,
	`[{"name": "get_forecast", "parameters": {"city": "Vienna", "days": 7}}]`,
	`[{"name": "get_forecast", "parameters": {"city": "Vienna", "days": 7}}, {"name": "get_current_weather", "parameters": {"city": "Vienna"}}]`,
	`[{"name": "get_forecast", "parameters": {"city": "Vienna", "days": 7}}, {"name": "get_current_weather", "parameters": {"city": "Vienna"}}, {"name": "get_forecast", "parameters": {"city": "Berlin", "days": 7}}, {"name": "get_current_weather", "parameters": {"city": "Berlin"}}]`,
	`[{"name": "get_current_weather", "parameters": {}}, {"name": "get_forecast", "parameters": {}}]`,
}

// TestRequiredStreamValid is vLLM's test_streaming_output_valid: the deltas,
// put back together, give the list again, for every chunk size 1..10.
func TestRequiredStreamValid(t *testing.T) {
	for _, out := range validOutputs {
		for n := 1; n <= 10; n++ {
			s := NewForcedStream(ToolChoice{Mode: ChoiceRequired}, seqIDs())
			deltas := feedChunks(s, out, n)
			if len(deltas) == 0 {
				t.Fatalf("%d: no deltas for %s", n, out)
			}
			var b strings.Builder
			b.WriteString("[")
			// Indexes are not checked: as in vLLM, the fragment that closes
			// a call can carry the next call's index when the chunk reaches
			// into it (vLLM's test does not check them either).
			for _, d := range deltas {
				c := d.Calls[0]
				if c.Name != "" {
					if b.Len() > 1 {
						b.WriteString("},")
					}
					if c.ID == "" || c.Type != "function" {
						t.Errorf("%d: first entry %+v", n, c)
					}
					b.WriteString(`{"name": "` + c.Name + `", "parameters": ` + c.Args)
				} else {
					b.WriteString(c.Args)
				}
			}
			b.WriteString("}]")
			var got, want any
			if err := json.Unmarshal([]byte(b.String()), &got); err != nil {
				t.Fatalf("%d: %v in %s", n, err, b.String())
			}
			_ = json.Unmarshal([]byte(out), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%d: got %s want %s", n, b.String(), out)
			}
			if _, called := s.Finish(nil); !called {
				t.Errorf("%d: required calls must finish with tool_calls", n)
			}
		}
	}
}

// TestRequiredStreamTrailingData is test_streaming_output_valid_with_trailing_extra_data.
func TestRequiredStreamTrailingData(t *testing.T) {
	s := NewForcedStream(ToolChoice{Mode: ChoiceRequired}, seqIDs())
	deltas := feedChunks(s, validOutputs[0]+"\nDONE", 3)
	var args strings.Builder
	for _, d := range deltas {
		if d.Calls[0].Name != "" && d.Calls[0].Name != "get_current_weather" {
			t.Errorf("name %q", d.Calls[0].Name)
		}
		args.WriteString(d.Calls[0].Args)
	}
	if args.String() != `{"city": "Vienna"}` {
		t.Errorf("arguments %q", args.String())
	}
}

func TestNamedStream(t *testing.T) {
	s := NewForcedStream(ToolChoice{Mode: ChoiceNamed, Name: "get_weather"}, seqIDs())
	deltas := feedChunks(s, `{"city": "Paris"}`, 5)
	first := deltas[0].Calls[0]
	if first != (CallDelta{Index: 0, ID: "chatcmpl-tool-0000000000000001", Type: "function", Name: "get_weather", Args: `{"cit`, HasArgs: true}) {
		t.Errorf("first %+v", first)
	}
	var args strings.Builder
	for _, d := range deltas {
		if len(d.Calls) != 1 || d.Calls[0].Index != 0 || (d != deltas[0] && d.Calls[0].ID != "") {
			t.Errorf("delta %+v", d.Calls)
		}
		args.WriteString(d.Calls[0].Args)
	}
	// The end-of-sequence output's empty text is still an arguments entry.
	if last := deltas[len(deltas)-1].Calls[0]; last.Args != "" || !last.HasArgs || args.String() != `{"city": "Paris"}` {
		t.Errorf("last %+v, arguments %q", last, args.String())
	}
	if _, called := s.Finish(nil); called {
		t.Error("a named function keeps the engine's finish_reason")
	}
}

// TestNamedStreamAfterReasoning chains a reasoning split in front, as
// vLLM's parse_delta does: the delta ending reasoning gives the call's first
// entry instead of its reasoning.
func TestNamedStreamAfterReasoning(t *testing.T) {
	cs := NewChatStream(&thinkSplit{}, false, NewForcedStream(ToolChoice{Mode: ChoiceNamed, Name: "f"}, seqIDs()))
	if d := cs.Feed("hmm", 1); d == nil || d.Reasoning == nil || *d.Reasoning != "hmm" || d.Calls != nil {
		t.Fatalf("reasoning delta %+v", d)
	}
	d := cs.Feed("</think>{}", 2)
	if d == nil || d.Reasoning != nil || len(d.Calls) != 1 || d.Calls[0].Name != "f" || d.Calls[0].Args != "{}" {
		t.Fatalf("end of reasoning %+v", d)
	}
}

// thinkSplit is a minimal reasoning split: everything before </think> is
// reasoning.
type thinkSplit struct{ done bool }

func (r *thinkSplit) FeedSplit(delta string) (reasoning, content *string, ok, ends bool) {
	if r.done {
		return nil, &delta, true, false
	}
	if i := strings.Index(delta, "</think>"); i >= 0 {
		r.done = true
		re, c := delta[:i], delta[i+len("</think>"):]
		return &re, &c, true, true
	}
	return &delta, nil, true, false
}

func TestFirstCall(t *testing.T) {
	calls := []Call{{Name: "a"}, {Name: "b"}}
	if got := FirstCall(calls); len(got) != 1 || got[0].Name != "a" {
		t.Errorf("%+v", got)
	}
	if got := FirstCall(nil); got != nil {
		t.Errorf("%+v", got)
	}
	d := &Delta{Calls: []CallDelta{{Index: 0, Args: "x"}, {Index: 1, Name: "b"}}}
	if got := FirstCallDelta(d); len(got.Calls) != 1 || got.Calls[0].Args != "x" || len(d.Calls) != 2 {
		t.Errorf("%+v", got)
	}
	if got := FirstCallDelta(&Delta{Calls: []CallDelta{{Index: 1}}}); got.Calls == nil || len(got.Calls) != 0 {
		t.Errorf("%+v", got)
	}
	if got := FirstCallDelta(nil); got != nil {
		t.Errorf("%+v", got)
	}
}

// TestRequiredStreamDeltas pins the delta shapes for token-sized chunks,
// traced by hand through vLLM's extract_required_tool_call_streaming.
func TestRequiredStreamDeltas(t *testing.T) {
	s := NewForcedStream(ToolChoice{Mode: ChoiceRequired}, seqIDs())
	chunks := []string{`[{"`, `name`, `": "`, `f`, `", "`, `parameters`, `": {"`, `a`, `": `, `1`, `}}`, `]`, ``}
	want := []*Delta{nil, nil, nil, nil, nil, nil,
		{Calls: []CallDelta{{Index: 0, ID: "chatcmpl-tool-0000000000000001", Type: "function", Name: "f", Args: `{"`, HasArgs: true}}},
		argsDelta(0, "a"), argsDelta(0, `": `), argsDelta(0, "1"), argsDelta(0, "}"), nil, nil}
	for i, c := range chunks {
		if got := s.Feed(c, 1); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("chunk %d %q: got %+v, want %+v", i, c, got, want[i])
		}
	}
}
