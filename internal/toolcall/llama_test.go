package toolcall

import (
	"reflect"
	"testing"
)

func TestLlama3JSONParse(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		wNames []string
		wArgs  []string
	}{
		{"simple with text", `Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} Would you like to know more?`,
			[]string{"getOpenIncidentsTool"}, []string{"{}"}},
		{"arguments", `{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}`,
			[]string{"searchTool"}, []string{`{"query": "test query", "limit": 10}`}},
		{"no json", "This is just some text without any tool calls", nil, nil},
		{"invalid json", `{"name": "invalidTool", "parameters": {invalid json}`, nil, nil},
		{"arguments key", `{"name": "searchTool", "arguments": {"query": "test"}}`, []string{"searchTool"}, []string{`{"query": "test"}`}},
		{"multiple", `{"name": "searchTool", "parameters": {"query": "test1"}}; {"name": "getOpenIncidentsTool", "parameters": {}}; {"name": "searchTool", "parameters": {"query": "test2"}}`,
			[]string{"searchTool", "getOpenIncidentsTool", "searchTool"}, []string{`{"query": "test1"}`, "{}", `{"query": "test2"}`}},
		{"multiple with spaces", `{"name": "searchTool", "parameters": {"query": "test1"}} ; {"name": "getOpenIncidentsTool", "parameters": {}} ; {"name": "searchTool", "parameters": {"query": "test2"}}`,
			[]string{"searchTool", "getOpenIncidentsTool", "searchTool"}, []string{`{"query": "test1"}`, "{}", `{"query": "test2"}`}},
		{"surrounding text", `Here are the results: {"name": "searchTool", "parameters": {"query": "test1"}}; {"name": "getOpenIncidentsTool", "parameters": {}}; {"name": "searchTool", "parameters": {"query": "test2"}} Would you like to know more?`,
			[]string{"searchTool", "getOpenIncidentsTool", "searchTool"}, []string{`{"query": "test1"}`, "{}", `{"query": "test2"}`}},
		{"deep nesting", `{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}}`,
			[]string{"complexTool"}, []string{`{"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}`}},
		{"brackets in strings", `{"name": "searchTool", "parameters": {"query": "test {value} [complex]","nested": {"inner": "more {brackets}"}}}`,
			[]string{"searchTool"}, []string{`{"query": "test {value} [complex]", "nested": {"inner": "more {brackets}"}}`}},
		{"escaped quotes", `{"name": "parserTool", "parameters": {"text": "He said \"Hello {world}\""}}`,
			[]string{"parserTool"}, []string{`{"text": "He said \"Hello {world}\""}`}},
		{"missing name", `{"parameters": {}}`, nil, nil},
		{"missing parameters", `{"name": "toolWithoutParams"}`, nil, nil},
		{"python tag", `<|python_tag|>{"name": "f", "parameters": {"a": "é"}}`, []string{"f"}, []string{`{"a": "é"}`}},
		{"stray brace", `Use { to open. {"name": "f", "parameters": {}}`, nil, nil},
	}
	p, _ := Lookup("llama3_json")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := p.Parse(tt.in, nil, seqIDs())
			if r.Called != (len(tt.wNames) > 0) || !reflect.DeepEqual(callNames(r.Calls), tt.wNames) || !reflect.DeepEqual(callArgs(r.Calls), tt.wArgs) {
				t.Fatalf("got called=%v names=%q args=%q", r.Called, callNames(r.Calls), callArgs(r.Calls))
			}
			if r.Called && r.Content != nil {
				t.Errorf("content %q, want nil", *r.Content)
			}
			if !r.Called && deref(r.Content) != tt.in {
				t.Errorf("content %q", deref(r.Content))
			}
		})
	}
}

func TestLlama3JSONStream(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wContent string
		wNames   []string
		wArgs    []string
	}{
		{"text", "Hello there, no tools {here}.", "Hello there, no tools {here}.", nil, nil},
		{"one", `{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius", "days": 3}}`, "",
			[]string{"get_weather"}, []string{`{"city": "Paris", "unit": "celsius", "days": 3}`}},
		{"python tag", `<|python_tag|>{"name": "search", "arguments": {"q": "Zürich \"old town\"", "n": [1, 2.5]}}`, "",
			[]string{"search"}, []string{`{"q": "Zürich \"old town\"", "n": [1, 2.5]}`}},
		{"two", `{"name": "a", "parameters": {"x": "1"}}; {"name": "b", "parameters": {"y": {"z": true}}}`, "",
			[]string{"a", "b"}, []string{`{"x": "1"}`, `{"y": {"z": true}}`}},
	}
	p, _ := Lookup("llama3_json")
	for _, tt := range tests {
		for _, ch := range chunkings {
			if ch.name == "chars" && tt.name == "python tag" {
				continue // <|python_tag|> is one token: never split
			}
			t.Run(tt.name+"/"+ch.name, func(t *testing.T) {
				r := runStream(t, p, nil, ch.split(tt.in))
				if r.content != tt.wContent {
					t.Errorf("content %q, want %q", r.content, tt.wContent)
				}
				if ch.name == "whole" && len(tt.wNames) > 0 {
					// As in vLLM, the delta holding everything only starts
					// the last tool; the end-of-sequence output sends its
					// name, and its arguments are never sent.
					last := len(tt.wNames) - 1
					if !reflect.DeepEqual(r.names(), tt.wNames[last:]) || r.calls[0] != nil && r.calls[last].args != "" {
						t.Errorf("whole: names %q args %q", r.names(), r.args())
					}
					return
				}
				if !reflect.DeepEqual(r.names(), tt.wNames) || !reflect.DeepEqual(r.args(), tt.wArgs) {
					t.Fatalf("names %q args %q, want %q %q", r.names(), r.args(), tt.wNames, tt.wArgs)
				}
			})
		}
	}
}
