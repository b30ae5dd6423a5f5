package toolcall

import (
	"reflect"
	"testing"
)

// fakeReasoner splits at </think> like the qwen3 parser does for deltas
// holding whole markers (package reasoning has the real ones; this
// package does not import it).
type fakeReasoner struct{ ended bool }

func (f *fakeReasoner) FeedSplit(d string) (*string, *string, bool, bool) {
	if f.ended {
		return nil, &d, true, false
	}
	if i := indexOf(d, "</think>"); i >= 0 {
		f.ended = true
		r, c := d[:i], d[i+len("</think>"):]
		var rp, cp *string
		if r != "" {
			rp = &r
		}
		if c != "" {
			cp = &c
		}
		if rp == nil && cp == nil {
			return nil, nil, false, true
		}
		return rp, cp, true, true
	}
	return &d, nil, true, false
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestChatStream(t *testing.T) {
	p, _ := Lookup("hermes")
	feed := func(cs *ChatStream, parts ...string) []*Delta {
		var out []*Delta
		for _, s := range parts {
			if d := cs.Feed(s, 1); d != nil {
				out = append(out, d)
			}
		}
		return out
	}
	// Reasoning, then a call: the tool parser sees only what follows
	// </think>.
	cs := NewChatStream(&fakeReasoner{}, false, p.NewStream(nil, seqIDs()))
	got := feed(cs, "Let me", " think", "</think>", "Sure", `<tool_call>{"name": "f", "arguments": {}}</tool_call>`)
	want := []*Delta{
		{Reasoning: sp("Let me")},
		{Reasoning: sp(" think")},
		{Content: sp("Sure")},
		{Calls: []CallDelta{{Index: 0, ID: "chatcmpl-tool-0000000000000001", Type: "function", Name: "f"}, {Index: 0, Args: "{}", HasArgs: true}}},
	}
	if !reflect.DeepEqual(got, want) {
		for _, d := range got {
			t.Logf("%+v", *d)
		}
		t.Fatal("deltas differ")
	}
	// As in vLLM, reasoning text in the delta that ends reasoning is
	// replaced by the tool parser's result.
	cs = NewChatStream(&fakeReasoner{}, false, p.NewStream(nil, seqIDs()))
	got = feed(cs, "abc</think>Hi")
	if !reflect.DeepEqual(got, []*Delta{{Content: sp("Hi")}}) {
		t.Fatalf("got %+v", *got[0])
	}
	// Without a tool parser the reasoning parser sees everything.
	cs = NewChatStream(&fakeReasoner{}, false, nil)
	got = feed(cs, "abc</think>Hi", " there")
	if !reflect.DeepEqual(got, []*Delta{{Reasoning: sp("abc"), Content: sp("Hi")}, {Content: sp(" there")}}) {
		t.Fatalf("got %d deltas", len(got))
	}
	// Thinking off in the prompt: plain content.
	cs = NewChatStream(&fakeReasoner{}, true, nil)
	if got = feed(cs, "x"); !reflect.DeepEqual(got, []*Delta{{Content: sp("x")}}) {
		t.Fatalf("got %+v", got)
	}
}

func TestParseContent(t *testing.T) {
	h, _ := Lookup("hermes")
	calls, c := ParseContent(h, sp("\n\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"), nil, seqIDs())
	if len(calls) != 1 || c != nil {
		t.Fatalf("whitespace content: %v %q", calls, deref(c))
	}
	calls, c = ParseContent(h, sp("Hi<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>"), nil, seqIDs())
	if len(calls) != 1 || deref(c) != "Hi" {
		t.Fatalf("content: %v %q", calls, deref(c))
	}
	calls, c = ParseContent(h, nil, nil, seqIDs())
	if calls != nil || c != nil {
		t.Fatalf("nil content: %v %q", calls, deref(c))
	}
	d, _ := Lookup("deepseek_v3")
	calls, c = ParseContent(d, sp("x<｜tool▁calls▁begin｜>junk"), nil, seqIDs())
	if calls == nil || len(calls) != 0 || deref(c) != "x" {
		t.Fatalf("called without calls: %v %q", calls, deref(c))
	}
}
