package json

import (
	"slices"
	"strings"
	"testing"
)

// cases are bodies where decoders may disagree; ok says whether ours must
// accept it (the test fails only if ours changes its mind).
var cases = []struct {
	name, body string
	ok         bool
}{
	{"typical", string(benchBody(32)), true},
	{"field name in upper case", `{"MAX_TOKENS": 5, "Model": "x", "prompt": [1]}`, true},
	{"duplicate key", `{"max_tokens": 1, "max_tokens": 2, "prompt": [1]}`, true},
	{"trailing bytes", `{"prompt": [1]} x`, false},
	{"second value", `{"prompt": [1]} {}`, false},
	{"float for an int", `{"max_tokens": 16.0, "prompt": [1]}`, false},
	{"exponent for an int", `{"max_tokens": 1e1, "prompt": [1]}`, false},
	{"id past int64", `{"prompt": [9223372036854775808]}`, false},
	{"string for a bool", `{"stream": "true", "prompt": [1]}`, false},
	{"escapes in a string", `{"model": "m\u00e9\n\ud83d\ude00", "prompt": [1]}`, true},
	{"invalid UTF-8 in a string", "{\"model\": \"a\xffb\", \"prompt\": [1]}", true},
	{"lone surrogate", `{"model": "\ud800", "prompt": [1]}`, true},
	{"unknown field 100 deep", `{"x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `, "prompt": [1]}`, false},
	{"null max_tokens", `{"max_tokens": null, "prompt": [1]}`, true},
	{"leading BOM", "\ufeff{\"prompt\": [1]}", false},
	{"control character in a string", "{\"model\": \"a\tb\", \"prompt\": [1]}", false},
}

// TestAgreement logs, per decoder, on how many bodies it agrees with ours
// (accepted or refused alike, and the same model, max_tokens, stream and
// prompt) and names the bodies where it does not.
func TestAgreement(t *testing.T) {
	want := make([]result, len(cases))
	for i, c := range cases {
		want[i] = ours([]byte(c.body))
		if want[i].ok != c.ok {
			t.Errorf("%s: ours accepted=%v, expected %v", c.name, want[i].ok, c.ok)
		}
	}
	for _, d := range decoders[1:] {
		agree := 0
		var differ []string
		for i, c := range cases {
			if same(d.decode([]byte(c.body)), want[i]) {
				agree++
			} else {
				differ = append(differ, c.name)
			}
		}
		t.Logf("%-40s agrees with ours on %d/%d bodies; differs on %q", d.name, agree, len(cases), differ)
	}
}

func same(a, b result) bool {
	if a.ok != b.ok || !a.ok {
		return a.ok == b.ok
	}
	mt := (a.maxTokens == nil) == (b.maxTokens == nil) && (a.maxTokens == nil || *a.maxTokens == *b.maxTokens)
	return mt && a.model == b.model && a.stream == b.stream && slices.Equal(a.prompt, b.prompt)
}
