package toolcall

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestHermesParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wCalled  bool
		wNames   []string
		wArgs    []string
		wContent *string
	}{
		{"no tool call", "This is not a tool call.", false, nil, nil, sp("This is not a tool call.")},
		{"between tags", "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}\n</tool_call>",
			true, []string{"final_answer"}, []string{`{"trigger": true}`}, nil},
		{"until eos", "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}",
			true, []string{"final_answer"}, []string{`{"trigger": true}`}, nil},
		{"invalid json", "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}",
			false, nil, nil, sp("<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}")},
		{"content before", `Hi!<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>`,
			true, []string{"f"}, []string{`{"x": 1}`}, sp("Hi!")},
		{"two calls", `<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call><tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>`,
			true, []string{"search", "search"}, []string{`{"q": "cats"}`, `{"q": "dogs"}`}, nil},
		{"json.dumps spacing", `<tool_call>{"name":"f","arguments":{"a":1,"b":[1,2.50,1e5,-0],"c":{"d":null}}}</tool_call>`,
			true, []string{"f"}, []string{`{"a": 1, "b": [1, 2.5, 100000.0, 0], "c": {"d": null}}`}, nil},
		{"ensure_ascii false", `<tool_call>{"name":"f","arguments":{"city":"Z\u00fcrich","emoji":"😀","q":"a\"b\n"}}</tool_call>`,
			true, []string{"f"}, []string{`{"city": "Zürich", "emoji": "😀", "q": "a\"b\n"}`}, nil},
		{"duplicate keys keep first place", `<tool_call>{"name":"f","arguments":{"a":1,"b":2,"a":3}}</tool_call>`,
			true, []string{"f"}, []string{`{"a": 3, "b": 2}`}, nil},
		{"missing arguments", `<tool_call>{"name":"f"}</tool_call>`,
			false, nil, nil, sp(`<tool_call>{"name":"f"}</tool_call>`)},
		{"name not a string", `<tool_call>{"name":1,"arguments":{}}</tool_call>`,
			false, nil, nil, sp(`<tool_call>{"name":1,"arguments":{}}</tool_call>`)},
		{"string arguments", `<tool_call>{"name":"f","arguments":"{\"x\": 1}"}</tool_call>`,
			true, []string{"f"}, []string{`"{\"x\": 1}"`}, nil},
	}
	p, _ := Lookup("hermes")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := p.Parse(tt.in, nil, seqIDs())
			if r.Called != tt.wCalled || !reflect.DeepEqual(callNames(r.Calls), tt.wNames) ||
				!reflect.DeepEqual(callArgs(r.Calls), tt.wArgs) || deref(r.Content) != deref(tt.wContent) {
				t.Fatalf("got called=%v names=%q args=%q content=%q", r.Called, callNames(r.Calls), callArgs(r.Calls), deref(r.Content))
			}
			for i, c := range r.Calls {
				if c.ID == "" {
					t.Errorf("call %d has no id", i)
				}
			}
		})
	}
}

func TestHermesStream(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wContent string
		wNames   []string
		wArgs    []string // exact concatenations; nil entries compare as JSON below
		wJSON    []string
	}{
		{"just text", "This is some prior text that has nothing to do with tool calling.",
			"This is some prior text that has nothing to do with tool calling.", nil, nil, nil},
		{"bug 19056", "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}}\n</tool_call>",
			"", []string{"final_answer"}, []string{`{"trigger": true}`}, nil},
		{"odd spacing", `<tool_call>{"name": "get_current_temperature","arguments": {"location":"San Francisco, California, United States", "unit": "celsius"}}</tool_call>`,
			"", []string{"get_current_temperature"}, nil, []string{`{"location": "San Francisco, California, United States", "unit": "celsius"}`}},
		{"content then call", `Sure, let me check the weather.<tool_call>{"name": "get_weather", "arguments": {"city": "NYC"}}</tool_call>`,
			"Sure, let me check the weather.", []string{"get_weather"}, []string{`{"city": "NYC"}`}, nil},
		{"two calls", `<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call><tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>`,
			"", []string{"search", "search"}, []string{`{"q": "cats"}`, `{"q": "dogs"}`}, nil},
		{"content with partial tag", `a < b <tool_call>{"name": "f", "arguments": {"x": "ü"}}</tool_call>`,
			"a < b ", []string{"f"}, []string{`{"x": "ü"}`}, nil},
	}
	p, _ := Lookup("hermes")
	for _, tt := range tests {
		for _, ch := range chunkings {
			t.Run(tt.name+"/"+ch.name, func(t *testing.T) {
				r := runStream(t, p, nil, ch.split(tt.in))
				if r.content != tt.wContent {
					t.Errorf("content %q, want %q", r.content, tt.wContent)
				}
				if !reflect.DeepEqual(r.names(), tt.wNames) {
					t.Fatalf("names %q, want %q", r.names(), tt.wNames)
				}
				if tt.wArgs != nil && !reflect.DeepEqual(r.args(), tt.wArgs) {
					t.Errorf("args %q, want %q", r.args(), tt.wArgs)
				}
				for i, w := range tt.wJSON {
					var got, want any
					if err := json.Unmarshal([]byte(r.args()[i]), &got); err != nil {
						t.Fatalf("args %q: %v", r.args()[i], err)
					}
					_ = json.Unmarshal([]byte(w), &want)
					if !reflect.DeepEqual(got, want) {
						t.Errorf("args %q, want %s", r.args()[i], w)
					}
				}
				if r.toolsCalled != (len(tt.wNames) > 0) {
					t.Errorf("toolsCalled %v", r.toolsCalled)
				}
			})
		}
	}
}

// TestHermesStreamDeltas pins the exact delta sequence for one answer.
func TestHermesStreamDeltas(t *testing.T) {
	p, _ := Lookup("hermes")
	st := p.NewStream(nil, seqIDs())
	steps := []struct {
		in   string
		want *Delta
	}{
		{"Hi", &Delta{Content: sp("Hi")}},
		{"<tool_", nil},
		{"call>", nil},
		{`{"name": "f", `, &Delta{Calls: []CallDelta{{Index: 0, ID: "chatcmpl-tool-0000000000000001", Type: "function", Name: "f"}}}},
		// The body is stripped, so the trailing space waits for what follows.
		{`"arguments": {"x": `, &Delta{Calls: []CallDelta{{Index: 0, Args: `{"x":`, HasArgs: true}}}},
		{`1}}`, &Delta{Calls: []CallDelta{{Index: 0, Args: ` 1}`, HasArgs: true}}}},
		{"</tool_call>", nil},
	}
	for i, s := range steps {
		if got := st.Feed(s.in, 1); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: got %+v, want %+v", i, got, s.want)
		}
	}
	final, called := st.Finish(nil)
	if final != nil || !called {
		t.Fatalf("finish: %+v %v", final, called)
	}
}

// TestHermesFinishRepair: the last output carries argument text; vLLM
// replaces that delta with expected-minus-streamed for the last call.
func TestHermesFinishRepair(t *testing.T) {
	p, _ := Lookup("hermes")
	st := p.NewStream(nil, seqIDs())
	st.Feed(`Hi<tool_call>{"name": "f", "arguments": {"x": `, 3)
	last := st.Feed(`1}}</tool_call>`, 2)
	final, called := st.Finish(last)
	want := &Delta{Calls: []CallDelta{{Index: 0, Args: ` 1}`, HasArgs: true}}}
	if !called || !reflect.DeepEqual(final, want) {
		t.Fatalf("got %+v %v", final, called)
	}
}
