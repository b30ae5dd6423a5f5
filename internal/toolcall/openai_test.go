package toolcall

import (
	"reflect"
	"testing"
)

func TestOpenAIParse(t *testing.T) {
	analysis := `<|channel|>analysis<|message|>User asks: "What is the weather in Tokyo?" We need to use get_current_weather tool.<|end|>`
	call := func(recipient, ctype, args string) string {
		c := ""
		if ctype != "" {
			c = " <|constrain|>" + ctype
		}
		return "<|start|>assistant<|channel|>commentary to=" + recipient + c + "<|message|>" + args + "<|call|>"
	}
	tests := []struct {
		name       string
		in         string
		wNames     []string
		wArgs      []string
		wContent   *string
		wReasoning *string
	}{
		{"no tools", "<|channel|>final<|message|>This is a test<|return|>", nil, nil, sp("This is a test"), nil},
		// vLLM's test renders a whole conversation and parses all of it.
		{"whole conversation", "<|start|>system<|message|>You are ChatGPT.<|end|><|start|>developer<|message|># Instructions\n\nTalk like a pirate!<|end|>" +
			"<|start|>user<|message|>Arrr, how be you?<|end|><|start|>assistant<|channel|>final<|message|>This is a test<|end|><|start|>assistant",
			nil, nil, sp("This is a test"), nil},
		{"recipient before channel", "<|channel|>analysis<|message|>x<|end|><|start|>assistant to=functions.f<|channel|>commentary json<|message|>{\"a\":1}<|call|>",
			[]string{"f"}, []string{`{"a": 1}`}, nil, sp("x")},
		{"single", analysis + call("functions.get_current_weather", "json", `{"location": "Tokyo"}`),
			[]string{"get_current_weather"}, []string{`{"location": "Tokyo"}`}, nil,
			sp(`User asks: "What is the weather in Tokyo?" We need to use get_current_weather tool.`)},
		{"single, newlines in args", analysis + call("functions.get_current_weather", "json", "{\n\"location\": \"Tokyo\"\n}"),
			[]string{"get_current_weather"}, []string{`{"location": "Tokyo"}`}, nil,
			sp(`User asks: "What is the weather in Tokyo?" We need to use get_current_weather tool.`)},
		{"multiple", analysis +
			call("functions.get_current_weather", "json", `{"location": "Tokyo"}`) +
			call("functions.get_user_location", "json", `{"location": "Tokyo"}`) +
			call("functions.no_content_type", "", `{"location": "Tokyo"}`) +
			call("functions.not_json_no_content_type", "", "foo") +
			call("functions.empty_args", "json", "{}") +
			call("functions.no_args", "json", ""),
			[]string{"get_current_weather", "get_user_location", "no_content_type", "not_json_no_content_type", "empty_args", "no_args"},
			[]string{`{"location": "Tokyo"}`, `{"location": "Tokyo"}`, `{"location": "Tokyo"}`, "foo", "{}", ""}, nil,
			sp(`User asks: "What is the weather in Tokyo?" We need to use get_current_weather tool.`)},
		{"bare function name", call("get_current_weather", "json", `{"location": "Tokyo"}`),
			[]string{"get_current_weather"}, []string{`{"location": "Tokyo"}`}, nil, nil},
		{"builtin is not a function", call("browser.search", "json", `{"q": "x"}`), nil, nil, nil, nil},
		{"ensure_ascii", call("functions.f", "json", `{"city":"Zürich"}`), []string{"f"}, []string{`{"city": "Z\u00fcrich"}`}, nil, nil},
		{"preamble and final", "<|channel|>commentary<|message|>Checking.<|end|>" + call("functions.f", "json", "{}") +
			"<|start|>assistant<|channel|>final<|message|>Done", []string{"f"}, []string{"{}"}, sp("Done"), nil},
		{"preamble only", "<|channel|>commentary<|message|>Checking.<|end|>" + call("functions.f", "json", "{}"),
			[]string{"f"}, []string{"{}"}, sp("Checking."), nil},
		{"truncated analysis", "<|channel|>analysis<|message|>thinking", nil, nil, nil, sp("thinking")},
	}
	p, _ := Lookup("openai")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := p.Parse(tt.in, nil, seqIDs())
			if r.Called != (len(tt.wNames) > 0) || !reflect.DeepEqual(callNames(r.Calls), tt.wNames) ||
				!reflect.DeepEqual(callArgs(r.Calls), tt.wArgs) || deref(r.Content) != deref(tt.wContent) ||
				deref(r.Reasoning) != deref(tt.wReasoning) {
				t.Fatalf("got called=%v names=%q args=%q content=%q reasoning=%q", r.Called, callNames(r.Calls),
					callArgs(r.Calls), deref(r.Content), deref(r.Reasoning))
			}
		})
	}
}

func TestOpenAIStream(t *testing.T) {
	in := "<|channel|>analysis<|message|>Need the weather.<|end|>" +
		"<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>" +
		"<|start|>assistant<|channel|>commentary to=functions.get_time<|message|>{}<|call|>"
	p, _ := Lookup("openai")
	for _, ch := range chunkings {
		t.Run(ch.name, func(t *testing.T) {
			st := p.NewStream(nil, seqIDs())
			var r streamRun
			r.lax = ch.name != "chars" && ch.name != "tokens"
			reasoning := ""
			for _, c := range ch.split(in) {
				d := st.Feed(c[0].(string), c[1].(int))
				if d != nil && d.Reasoning != nil {
					reasoning += *d.Reasoning
				}
				r.add(t, d)
			}
			final, called := st.Finish(st.Feed("", 1))
			r.add(t, final)
			if ch.name != "chars" && ch.name != "tokens" {
				// vLLM counts the call an output completes before it
				// indexes that output's argument text, so outputs of
				// several tokens can misplace indexes; not checked.
				return
			}
			if !called || reasoning != "Need the weather." || r.content != "" ||
				!reflect.DeepEqual(r.names(), []string{"get_weather", "get_time"}) ||
				!reflect.DeepEqual(r.args(), []string{`{"location": "Paris"}`, "{}"}) {
				t.Fatalf("called=%v reasoning=%q content=%q names=%q args=%q", called, reasoning, r.content, r.names(), r.args())
			}
		})
	}
}

// TestOpenAIStreamDeltas pins vLLM's harmony deltas for one token per
// output.
func TestOpenAIStreamDeltas(t *testing.T) {
	p, _ := Lookup("openai")
	st := p.NewStream(nil, seqIDs())
	steps := []struct {
		in   string
		want *Delta
	}{
		{"<|channel|>", nil},
		{"analysis", nil},
		{"<|message|>", nil},
		{"Hmm", &Delta{Reasoning: sp("Hmm")}},
		{"<|end|>", nil},
		{"<|start|>", nil},
		{"assistant", nil},
		{"<|channel|>", nil},
		{"commentary to=functions.f", nil},
		{"<|message|>", &Delta{Calls: []CallDelta{{Index: 0, ID: "chatcmpl-tool-0000000000000001", Type: "function", Name: "f", HasArgs: true}}}},
		{`{"a":`, &Delta{Calls: []CallDelta{{Index: 0, Args: `{"a":`, HasArgs: true}}}},
		{` 1}`, &Delta{Calls: []CallDelta{{Index: 0, Args: ` 1}`, HasArgs: true}}}},
		{"<|call|>", nil},
		{"<|start|>assistant<|channel|>final<|message|>", &Delta{Content: sp("")}},
		{"Done", &Delta{Content: sp("Done")}},
	}
	for i, s := range steps {
		if got := st.Feed(s.in, 1); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d %q: got %+v, want %+v", i, s.in, got, s.want)
		}
	}
}

func TestHarmonySplit(t *testing.T) {
	tests := []struct{ in, wR, wC string }{
		{"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>final<|message|>b<|return|>", "a", "b"},
		{"<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b", "a\nb", "<nil>"},
		{"<|channel|>commentary<|message|>pre<|end|><|start|>assistant<|channel|>commentary to=functions.f<|message|>{}<|call|>", "<nil>", "pre"},
		{"<|channel|>final<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y", "<nil>", "x\ny"},
	}
	for _, tt := range tests {
		r, c := HarmonySplit(tt.in)
		if deref(r) != tt.wR || deref(c) != tt.wC {
			t.Errorf("%q: got %q %q", tt.in, deref(r), deref(c))
		}
	}
}
