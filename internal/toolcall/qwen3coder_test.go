package toolcall

import (
	"reflect"
	"strings"
	"testing"
)

var qcTools = []Tool{
	{Name: "get_current_weather", Parameters: []byte(`{"type": "object", "properties": {"city": {"type": "string"}, "state": {"type": "string"}, "unit": {"type": "string", "enum": ["fahrenheit", "celsius"]}}, "required": ["city", "state"]}`)},
	{Name: "calculate_area", Parameters: []byte(`{"type": "object", "properties": {"shape": {"type": "string"}, "dimensions": {"type": "object"}, "precision": {"type": "integer"}}}`)},
	{Name: "test_types", Parameters: []byte(`{"type": "object", "properties": {"int_param": {"type": "integer"}, "float_param": {"type": "float"}, "bool_param": {"type": "boolean"}, "str_param": {"type": "string"}, "obj_param": {"type": "object"}, "num": {"type": "number"}, "list_param": {"type": ["array", "null"]}, "any": {"anyOf": [{"type": "object"}, {"type": "null"}]}}}`)},
}

const (
	qcDallas      = "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>"
	qcOrlando     = "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nOrlando\n</parameter>\n<parameter=state>\nFL\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>"
	qcArea        = "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n<parameter=dimensions>\n{\"width\": 10, \n \"height\": 20}\n</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>"
	qcDallasArgs  = `{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}`
	qcOrlandoArgs = `{"city": "Orlando", "state": "FL", "unit": "fahrenheit"}`
	qcAreaArgs    = `{"shape": "rectangle", "dimensions": {"width": 10, "height": 20}, "precision": 2}`
)

func TestQwen3CoderParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wNames   []string
		wArgs    []string
		wContent *string
	}{
		{"no tools", "This is a test response without any tool calls", nil, nil, sp("This is a test response without any tool calls")},
		{"single", qcDallas, []string{"get_current_weather"}, []string{qcDallasArgs}, nil},
		{"with content", "Sure! Let me check the weather for you." + qcDallas, []string{"get_current_weather"}, []string{qcDallasArgs}, sp("Sure! Let me check the weather for you.")},
		{"multiline param", qcArea, []string{"calculate_area"}, []string{qcAreaArgs}, nil},
		{"parallel", qcDallas + "\n" + qcOrlando, []string{"get_current_weather", "get_current_weather"}, []string{qcDallasArgs, qcOrlandoArgs}, nil},
		{"no tags", "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n</function>",
			[]string{"get_current_weather"}, []string{`{"city": "Dallas", "state": "TX"}`}, nil},
		{"types", "<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n<parameter=float_param>\n3.14\n</parameter>\n<parameter=bool_param>\ntrue\n</parameter>\n<parameter=str_param>\nhello world\n</parameter>\n<parameter=obj_param>\n{\"key\": \"value\"}\n</parameter>\n</function>\n</tool_call>",
			[]string{"test_types"}, []string{`{"int_param": 42, "float_param": 3.14, "bool_param": true, "str_param": "hello world", "obj_param": {"key": "value"}}`}, nil},
		{"conversions", "<tool_call><function=test_types><parameter=num>5.0</parameter><parameter=int_param>x</parameter><parameter=bool_param>yes</parameter><parameter=list_param>[1, 'a', (2, 3)]</parameter><parameter=obj_param>{'a': True, 1: None}</parameter><parameter=other>NULL</parameter><parameter=str_param>null</parameter></function></tool_call>",
			[]string{"test_types"}, []string{`{"num": 5, "int_param": "x", "bool_param": false, "list_param": [1, "a", [2, 3]], "obj_param": {"a": true, "1": null}, "other": null, "str_param": null}`}, nil},
		{"anyOf not double encoded", "<tool_call>\n<function=test_types>\n<parameter=any>{\"key\": \"value\", \"count\": 42}</parameter>\n</function>\n</tool_call>",
			[]string{"test_types"}, []string{`{"any": {"key": "value", "count": 42}}`}, nil},
		{"missing closing parameter tag", "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
			[]string{"get_current_weather"}, []string{qcDallasArgs}, sp("Let me check the weather for you:\n")},
		{"no gt drops the call", "<tool_call>\n<function=bad_func_no_gt\n</function>\n</tool_call>\n<tool_call>\n<function=get_current_weather>\n<parameter=city>Dallas</parameter>\n<parameter=state>TX</parameter>\n</function>\n</tool_call>",
			[]string{"get_current_weather"}, []string{`{"city": "Dallas", "state": "TX"}`}, nil},
		{"string not double serialized", "<tool_call>\n<function=greet>\n<parameter=message>hello world</parameter>\n</function>\n</tool_call>",
			[]string{"greet"}, []string{`{"message": "hello world"}`}, nil},
		{"unserializable falls back", "<tool_call><function=test_types><parameter=list_param>{1, 2}</parameter></function></tool_call>",
			nil, nil, sp("<tool_call><function=test_types><parameter=list_param>{1, 2}</parameter></function></tool_call>")},
	}
	p, _ := Lookup("qwen3_coder")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := p.Parse(tt.in, qcTools, seqIDs())
			if r.Called != (len(tt.wNames) > 0) || !reflect.DeepEqual(callNames(r.Calls), tt.wNames) ||
				!reflect.DeepEqual(callArgs(r.Calls), tt.wArgs) || deref(r.Content) != deref(tt.wContent) {
				t.Fatalf("got called=%v names=%q args=%q content=%q", r.Called, callNames(r.Calls), callArgs(r.Calls), deref(r.Content))
			}
		})
	}
}

func TestQwen3CoderStream(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wContent string
		wNames   []string
		wArgs    []string
	}{
		{"plain", "This is a test response without any tool calls", "This is a test response without any tool calls", nil, nil},
		{"single", qcDallas, "", []string{"get_current_weather"}, []string{qcDallasArgs}},
		{"with content", "I'll check the weather." + qcDallas, "I'll check the weather.", []string{"get_current_weather"}, []string{qcDallasArgs}},
		{"multiline param", qcArea, "", []string{"calculate_area"}, []string{qcAreaArgs}},
		{"parallel", qcDallas + "\n" + qcOrlando, "", []string{"get_current_weather", "get_current_weather"}, []string{qcDallasArgs, qcOrlandoArgs}},
		{"missing closing parameter tag", "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
			"Let me check the weather for you:\n", []string{"get_current_weather"}, []string{qcDallasArgs}},
	}
	p, _ := Lookup("qwen3_coder")
	for _, tt := range tests {
		for _, ch := range chunkings {
			if ch.name != "tokens" && ch.name != "tokens3" {
				// <tool_call> is one token, so it never arrives split
				// (chars); vLLM's parser takes at most one step per delta,
				// so big deltas lose parts (see TestQwen3CoderBigDelta).
				continue
			}
			t.Run(tt.name+"/"+ch.name, func(t *testing.T) {
				r := runStream(t, p, qcTools, ch.split(tt.in))
				if r.content != tt.wContent {
					t.Errorf("content %q, want %q", r.content, tt.wContent)
				}
				if !reflect.DeepEqual(r.names(), tt.wNames) || (tt.wArgs != nil && !reflect.DeepEqual(r.args(), tt.wArgs)) {
					t.Fatalf("names %q args %q, want %q %q", r.names(), r.args(), tt.wNames, tt.wArgs)
				}
				// The complete parse agrees with what was streamed.
				full := p.Parse(tt.in, qcTools, nil)
				if len(tt.wNames) > 0 && !reflect.DeepEqual(callArgs(full.Calls), r.args()) {
					t.Errorf("Parse args %q differ from streamed %q", callArgs(full.Calls), r.args())
				}
			})
		}
	}
}

// TestQwen3CoderMultiParamChunk: a speculative-decoding delta carrying
// several parameters at once.
func TestQwen3CoderMultiParamChunk(t *testing.T) {
	p, _ := Lookup("qwen3_coder")
	deltas := []string{"<tool_call>", "\n<function=get_current_weather>", "\n",
		"<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>",
		"\n</function>", "\n</tool_call>"}
	var chunks [][2]any
	for _, d := range deltas {
		chunks = append(chunks, [2]any{d, 1})
	}
	r := runStream(t, p, qcTools, chunks)
	if !reflect.DeepEqual(r.args(), []string{qcDallasArgs}) {
		t.Fatalf("args %q", r.args())
	}
	want := []*Delta{
		{Calls: []CallDelta{{Index: 0, ID: "chatcmpl-tool-0000000000000001", Type: "function", Name: "get_current_weather", HasArgs: true}}},
		{Calls: []CallDelta{{Index: 0, Args: "{", HasArgs: true}}},
		{Calls: []CallDelta{{Index: 0, Args: `"city": "Dallas", "state": "TX", "unit": "fahrenheit"`, HasArgs: true}}},
		{Calls: []CallDelta{{Index: 0, Args: "}", HasArgs: true}}},
		{Content: sp("")}, // the end-of-sequence output
	}
	if !reflect.DeepEqual(r.deltas, want) {
		for _, d := range r.deltas {
			t.Logf("%+v", *d)
		}
		t.Fatal("delta sequence differs")
	}
}

// TestQwen3CoderBigDelta pins vLLM's behaviour when one delta holds the
// whole answer: the content before <tool_call> is sent and the call is
// lost, as vLLM's parser returns after starting the call.
func TestQwen3CoderBigDelta(t *testing.T) {
	p, _ := Lookup("qwen3_coder")
	r := runStream(t, p, qcTools, [][2]any{{"I'll check the weather." + qcDallas, 40}})
	if r.content != "I'll check the weather." || len(r.calls) != 0 || r.toolsCalled {
		t.Fatalf("got %+v", r)
	}
}

// TestQwen3CoderEmptyDelta: an end-of-sequence token with no text after
// the calls closes the stream with an empty content delta.
func TestQwen3CoderEmptyDelta(t *testing.T) {
	p, _ := Lookup("qwen3_coder")
	st := p.NewStream(qcTools, seqIDs())
	for _, tok := range tokenize(qcDallas) {
		st.Feed(tok, 1)
	}
	if d := st.Feed("", 1); d == nil || d.Content == nil || *d.Content != "" || len(d.Calls) != 0 {
		t.Fatalf("got %+v", d)
	}
	st2 := p.NewStream(qcTools, seqIDs())
	st2.Feed("hello", 1)
	if d := st2.Feed("", 1); d == nil || d.Content == nil || *d.Content != "" {
		t.Fatalf("got %+v", d)
	}
	if d := st2.Feed("", 0); d != nil {
		t.Fatalf("no tokens: got %+v", d)
	}
	_ = strings.TrimSpace
}
