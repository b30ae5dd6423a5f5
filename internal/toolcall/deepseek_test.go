package toolcall

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"unicode/utf8"
)

const (
	dsV3Single   = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	dsV3Parallel = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\", \"unit\": \"celsius\"}\n```<｜tool▁call▁end｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>search_hotels\n```json\n{\"location\": \"Tokyo\", \"check_in\": \"2025-01-15\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	dsV3Types    = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>test_function\n```json\n{\"string_field\": \"hello\", \"int_field\": 42, \"float_field\": 3.14, \"bool_field\": true, \"null_field\": null, \"array_field\": [\"a\", \"b\", \"c\"], \"object_field\": {\"nested\": \"value\"}, \"empty_array\": [], \"empty_object\": {}}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	dsV3Empty    = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_current_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	dsV3Text     = "Let me check the weather for you.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
	dsV3Escaped  = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>send_message\n```json\n{\"text\": \"He said \\\"hello\\\"\", \"path\": \"C:\\\\Users\\\\file\", \"newline\": \"line1\\nline2\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
)

func TestDeepSeekParse(t *testing.T) {
	tests := []struct {
		parser, name, in string
		wCalled          bool
		wNames, wArgs    []string
		wContent         *string
	}{
		{"deepseek_v3", "no calls", "How can I help you today? I can check weather for you.", false, nil, nil, sp("How can I help you today? I can check weather for you.")},
		{"deepseek_v3", "single", dsV3Single, true, []string{"get_weather"}, []string{`{"city": "Tokyo", "unit": "celsius"}`}, nil},
		{"deepseek_v3", "parallel", dsV3Parallel, true, []string{"get_weather", "search_hotels"}, []string{`{"city": "Tokyo", "unit": "celsius"}`, `{"location": "Tokyo", "check_in": "2025-01-15"}`}, nil},
		{"deepseek_v3", "empty args", dsV3Empty, true, []string{"get_current_time"}, []string{"{}"}, nil},
		{"deepseek_v3", "surrounding text", dsV3Text, true, []string{"get_weather"}, []string{`{"city": "Paris"}`}, sp("Let me check the weather for you.")},
		{"deepseek_v3", "escaped", dsV3Escaped, true, []string{"send_message"}, []string{`{"text": "He said \"hello\"", "path": "C:\\Users\\file", "newline": "line1\nline2"}`}, nil},
		// vLLM reports tools_called with no calls when its pattern fails.
		{"deepseek_v3", "malformed no call begin", "<｜tool▁calls▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\"}\n```<｜tool▁calls▁end｜>", true, nil, nil, nil},
		{"deepseek_v3", "multi-line args do not match", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{\n\"a\": 1\n}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", true, nil, nil, nil},
		{"deepseek_v3", "type not function", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", false, nil, nil, sp("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>tool<｜tool▁sep｜>f\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")},
		{"deepseek_v31", "with tool", "normal text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", true, []string{"foo"}, []string{`{"x":1}`}, sp("normal text")},
		{"deepseek_v31", "multiple", "some prefix text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜><｜tool▁call▁begin｜>bar<｜tool▁sep｜>{\"y\":2}<｜tool▁call▁end｜><｜tool▁calls▁end｜> some suffix text", true, []string{"foo", "bar"}, []string{`{"x":1}`, `{"y":2}`}, sp("some prefix text")},
	}
	for _, tt := range tests {
		t.Run(tt.parser+"/"+tt.name, func(t *testing.T) {
			p, _ := Lookup(tt.parser)
			r := p.Parse(tt.in, nil, seqIDs())
			if r.Called != tt.wCalled || !reflect.DeepEqual(callNames(r.Calls), tt.wNames) ||
				!reflect.DeepEqual(callArgs(r.Calls), tt.wArgs) || deref(r.Content) != deref(tt.wContent) {
				t.Fatalf("got called=%v names=%q args=%q content=%q", r.Called, callNames(r.Calls), callArgs(r.Calls), deref(r.Content))
			}
		})
	}
}

func TestDeepSeekStream(t *testing.T) {
	tests := []struct {
		parser, name, in string
		wContent         string
		wNames           []string
		wJSON            []string
	}{
		{"deepseek_v3", "no calls", "How can I help you today? I can check weather for you.", "How can I help you today? I can check weather for you.", nil, nil},
		{"deepseek_v3", "single", dsV3Single, "", []string{"get_weather"}, []string{`{"city": "Tokyo", "unit": "celsius"}`}},
		{"deepseek_v3", "parallel", dsV3Parallel, "", []string{"get_weather", "search_hotels"}, []string{`{"city": "Tokyo", "unit": "celsius"}`, `{"location": "Tokyo", "check_in": "2025-01-15"}`}},
		{"deepseek_v3", "types", dsV3Types, "", []string{"test_function"}, []string{`{"string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": true, "null_field": null, "array_field": ["a", "b", "c"], "object_field": {"nested": "value"}, "empty_array": [], "empty_object": {}}`}},
		{"deepseek_v3", "surrounding text", dsV3Text, "Let me check the weather for you.", []string{"get_weather"}, []string{`{"city": "Paris"}`}},
		{"deepseek_v3", "escaped", dsV3Escaped, "", []string{"send_message"}, []string{`{"text": "He said \"hello\"", "path": "C:\\Users\\file", "newline": "line1\nline2"}`}},
		{"deepseek_v31", "single", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Tokyo\", \"unit\": \"celsius\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "", []string{"get_weather"}, []string{`{"city": "Tokyo", "unit": "celsius"}`}},
		{"deepseek_v31", "parallel with text", "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\": \"1\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>bar<｜tool▁sep｜>{\"y\": \"2\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "Sure.", []string{"foo", "bar"}, []string{`{"x": "1"}`, `{"y": "2"}`}},
	}
	for _, tt := range tests {
		p, _ := Lookup(tt.parser)
		t.Run(tt.parser+"/"+tt.name, func(t *testing.T) {
			r := runStream(t, p, nil, chunkings[1].split(tt.in)) // one token per delta
			if r.content != tt.wContent {
				t.Errorf("content %q, want %q", r.content, tt.wContent)
			}
			if !reflect.DeepEqual(r.names(), tt.wNames) {
				t.Fatalf("names %q, want %q", r.names(), tt.wNames)
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
		})
	}
}

// FuzzDeepSeekGroups checks the hand-written matcher against vLLM's
// streaming patterns run by Go's regexp (same leftmost-first semantics).
func FuzzDeepSeekGroups(f *testing.F) {
	for _, s := range []string{"function<｜tool▁sep｜>f\n```json\n{\"a\": 1}``", "f<｜tool▁sep｜>{}", "a<｜tool▁sep｜>b<｜tool▁sep｜>c\nx", "function<｜tool▁sep｜>f\n"} {
		f.Add(s)
	}
	v3Portion := regexp.MustCompile("^(.*)<｜tool▁sep｜>(.*)\n```json\n(.*[^\n`])")
	v3Name := regexp.MustCompile("^(.*)<｜tool▁sep｜>(.*)\n")
	v31Portion := regexp.MustCompile("^(.*)<｜tool▁sep｜>(.*)")
	v3, _ := Lookup("deepseek_v3")
	v31, _ := Lookup("deepseek_v31")
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		var wName, wArgs string
		wOK := true
		if m := v3Portion.FindStringSubmatch(s); m != nil {
			wName, wArgs = m[2], m[3]
		} else if m := v3Name.FindStringSubmatch(s); m != nil {
			wName = m[2]
		} else {
			wOK = false
		}
		name, args, ok := v3.(*deepseek).groups(s)
		if ok != wOK || name != wName || args != wArgs {
			t.Fatalf("v3 %q: got %q %q %v, want %q %q %v", s, name, args, ok, wName, wArgs, wOK)
		}
		wName, wArgs, wOK = "", "", false
		if m := v31Portion.FindStringSubmatch(s); m != nil {
			wName, wArgs, wOK = m[1], m[2], true
		}
		name, args, ok = v31.(*deepseek).groups(s)
		if ok != wOK || name != wName || args != wArgs {
			t.Fatalf("v31 %q: got %q %q %v, want %q %q %v", s, name, args, ok, wName, wArgs, wOK)
		}
	})
}
