package toolcall

import (
	"reflect"
	"testing"
)

const (
	pySimple     = "get_weather(city='San Francisco', metric='celsius')"
	pySimpleArgs = `{"city": "San Francisco", "metric": "celsius"}`
	pyMore       = "register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, aliases=['John', 'Johnny'])"
	pyMoreArgs   = `{"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, "role": null, "passed_test": true, "aliases": ["John", "Johnny"]}`
	pyEscaped    = `get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')`
	pyEscArgs    = `{"city": "Martha's Vineyard", "metric": "\"cool units\""}`
)

var pythonicCases = []struct {
	name   string
	in     string
	wNames []string
	wArgs  []string
}{
	{"no call", "How can I help you today?", nil, nil},
	{"simple", "[" + pySimple + "]", []string{"get_weather"}, []string{pySimpleArgs}},
	{"more types", "[" + pyMore + "]", []string{"register_user"}, []string{pyMoreArgs}},
	{"parameterless", "[get_weather()]", []string{"get_weather"}, []string{"{}"}},
	{"empty dict", "[do_something_cool(additional_data={})]", []string{"do_something_cool"}, []string{`{"additional_data": {}}`}},
	{"empty list", "[do_something_cool(steps=[])]", []string{"do_something_cool"}, []string{`{"steps": []}`}},
	{"escaped string", "[" + pyEscaped + "]", []string{"get_weather"}, []string{pyEscArgs}},
	{"parallel", "[" + pySimple + ", " + pyMore + "]", []string{"get_weather", "register_user"}, []string{pySimpleArgs, pyMoreArgs}},
	{"json literals and floats", `[f(a=null, b=true, c=1.50, d=1e3, e="ü")]`, []string{"f"}, []string{`{"a": null, "b": true, "c": 1.5, "d": 1000.0, "e": "ü"}`}},
}

func TestPythonicParse(t *testing.T) {
	p, _ := Lookup("pythonic")
	for _, tt := range pythonicCases {
		t.Run(tt.name, func(t *testing.T) {
			r := p.Parse(tt.in, nil, seqIDs())
			if r.Called != (len(tt.wNames) > 0) || !reflect.DeepEqual(callNames(r.Calls), tt.wNames) || !reflect.DeepEqual(callArgs(r.Calls), tt.wArgs) {
				t.Fatalf("got called=%v names=%q args=%q", r.Called, callNames(r.Calls), callArgs(r.Calls))
			}
			if r.Called && r.Content != nil || !r.Called && deref(r.Content) != tt.in {
				t.Errorf("content %q", deref(r.Content))
			}
		})
	}
	// Inputs vLLM leaves as content.
	for _, in := range []string{
		"[f(a=-1)]",          // a negative number is a UnaryOp
		"[f(a=(1, 2))]",      // tuples are not accepted
		"[f(a=x)]",           // a bare name
		"[f(a=b'x')]",        // bytes cannot be dumped
		" [f()]",             // must start with [
		"[f(a=1)] trailing",  // not Python
		"[f(a={'k'})]",       // a set
		"[a.b(x=1)]",         // the shape check wants a plain name
		"[f(a=1, a=2) oops]", // syntax error
	} {
		if r := p.Parse(in, nil, nil); r.Called || deref(r.Content) != in {
			t.Errorf("%q: got %+v", in, r)
		}
	}
}

func TestPythonicStream(t *testing.T) {
	p, _ := Lookup("pythonic")
	for _, tt := range pythonicCases {
		for _, ch := range chunkings {
			t.Run(tt.name+"/"+ch.name, func(t *testing.T) {
				r := runStream(t, p, nil, ch.split(tt.in))
				wContent := ""
				if tt.wNames == nil {
					wContent = tt.in
				}
				if r.content != wContent {
					t.Errorf("content %q, want %q", r.content, wContent)
				}
				if !reflect.DeepEqual(r.names(), tt.wNames) || !reflect.DeepEqual(r.args(), tt.wArgs) {
					t.Fatalf("names %q args %q, want %q %q", r.names(), r.args(), tt.wNames, tt.wArgs)
				}
				if r.toolsCalled != (tt.wNames != nil) {
					t.Errorf("toolsCalled %v", r.toolsCalled)
				}
			})
		}
	}
}

func TestPythonicLargeSteps(t *testing.T) {
	p, _ := Lookup("pythonic")
	r := runStream(t, p, nil, [][2]any{
		{"[get_weather(city='San", 5},
		{" Francisco', metric='celsius'), get_weather(), do_something_cool(steps=[])]", 20},
		{"", 1}, // end of sequence
	})
	if !reflect.DeepEqual(r.names(), []string{"get_weather", "get_weather", "do_something_cool"}) ||
		!reflect.DeepEqual(r.args(), []string{pySimpleArgs, "{}", `{"steps": []}`}) {
		t.Fatalf("names %q args %q", r.names(), r.args())
	}
}

// TestPythonicFinishQuirk pins vLLM's serving-layer repair for this
// parser: it keeps a placeholder with empty arguments, so when the output
// that carries the finish reason also carries argument text, the final
// delta's arguments become "{}".
func TestPythonicFinishQuirk(t *testing.T) {
	p, _ := Lookup("pythonic")
	st := p.NewStream(nil, seqIDs())
	st.Feed("[f(a='x", 3)
	last := st.Feed("')]", 1)
	if !reflect.DeepEqual(last, &Delta{Calls: []CallDelta{{Index: 0, Args: `"}`, HasArgs: true}}}) {
		t.Fatalf("last %+v", last)
	}
	final, called := st.Finish(last)
	if !called || !reflect.DeepEqual(final, &Delta{Calls: []CallDelta{{Index: 0, Args: "{}", HasArgs: true}}}) {
		t.Fatalf("final %+v %v", final, called)
	}
}
