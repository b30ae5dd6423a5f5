package reasoning

import "testing"

func TestGranite(t *testing.T) {
	const rs, re = "Here is my thought process:", "Here is my response:"
	p, _ := Lookup("granite", Options{})
	cases := []splitCase{
		{"simple", false, rs + "This is a reasoning section" + re + "This is the rest", sp("This is a reasoning section"), sp("This is the rest"), false},
		{"complete", false, rs + "This is a reasoning section" + re, sp("This is a reasoning section"), nil, false},
		{"no reasoning", false, "This is content", nil, sp("This is content"), false},
		{"multiple lines", false, rs + "This\nThat" + re + "This is the rest\nThat", sp("This\nThat"), sp("This is the rest\nThat"), false},
	}
	for _, c := range cases[:] {
		c.name += " stream"
		c.stream = true
		cases = append(cases, c)
	}
	runCases(t, p, cases)
	// vLLM's streaming tables: one step from (current, delta).
	steps := []struct {
		name, cur, delta string
		wR, wC           *string
	}{
		{"start", "Here", "Here", nil, nil},
		{"failed start", "Here is my thought failure", " failure", nil, sp("Here is my thought failure")},
		{"after failed start", " words", " Here wrong words", nil, sp(" words")},
		{"only start", "Here is my thought process:", " process:", nil, nil},
		{"reasoning started", "Here is my thought process: foo", " foo", sp(" foo"), nil},
		{"response marker begins", "Here is my thought process: foo Here is", " Here is", sp(" "), nil},
		{"response marker reset", "Here is my thought process: foo Here is Here", " Here", sp("Here is "), nil},
		{"response text", "Here is my thought process: foo Here is my response: bar", " bar", nil, sp(" bar")},
		{"everything", "Here is my thought process: foo Here is my response: bar", "Here is my thought process: foo Here is my response: bar", sp(" foo "), sp(" bar")},
		{"mixed", "Here is my thought process: foo bar Here is my response: baz", " bar Here is my response: baz", sp(" bar "), sp(" baz")},
		{"delta starts marker", "Here is my thought process: This is a reasoning section Here", "Here", nil, nil},
		{"delta ends marker", "Here is my thought process: foo Here is my response:", ":", nil, nil},
		{"delta breaks marker", "Here is my thought process: foo Here was", " was", sp("Here was"), nil},
	}
	for _, tt := range steps {
		d := graniteStep(tt.cur, tt.delta)
		var r, c *string
		if d != nil {
			r, c = d.Reasoning, d.Content
		}
		if show(r) != show(tt.wR) || show(c) != show(tt.wC) {
			t.Errorf("%s: got (%s, %s), want (%s, %s)", tt.name, show(r), show(c), show(tt.wR), show(tt.wC))
		}
	}
}
