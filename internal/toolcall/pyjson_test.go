package toolcall

import (
	"math"
	"testing"
)

func TestPyFloatRepr(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{1.5, "1.5"}, {1, "1.0"}, {0, "0.0"}, {math.Copysign(0, -1), "-0.0"},
		{1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {0.0001, "0.0001"}, {0.00001, "1e-05"},
		{123456789012345680, "1.2345678901234568e+17"}, {3.14, "3.14"}, {1e300, "1e+300"},
		{2.5e-300, "2.5e-300"}, {math.Inf(1), "Infinity"}, {math.NaN(), "NaN"}, {100000, "100000.0"},
	}
	for _, tt := range tests {
		if got := pyFloatRepr(tt.f); got != tt.want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}

func TestPyLoadsDumps(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {" 5 ", "5"}, {"1.0", "1.0"}, {"1E2", "100.0"},
		{"123456789012345678901234567890", "123456789012345678901234567890"},
		{"NaN", "NaN"}, {"-Infinity", "-Infinity"}, {`"\ud83d\ude00\u00e9"`, `"😀é"`},
		{`{"b":1,"a":{"c":[]}}`, `{"b": 1, "a": {"c": []}}`}, {`"\u0001\t"`, `"\u0001\t"`},
	}
	for _, tt := range tests {
		v, err := pyLoads(tt.in)
		if err != nil {
			t.Errorf("pyLoads(%q): %v", tt.in, err)
			continue
		}
		if got := pyDumps(v, false); got != tt.want {
			t.Errorf("dumps(loads(%q)) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"", "01", "1.", "[1,]", `{"a" 1}`, "\"\x01\"", "tru", `"\x"`, "1 2"} {
		if _, err := pyLoads(bad); err == nil {
			t.Errorf("pyLoads(%q) accepted", bad)
		}
	}
	if got := pyDumps(jval{kind: jString, text: "é😀"}, true); got != `"\u00e9\ud83d\ude00"` {
		t.Errorf("ensure_ascii: %q", got)
	}
}

func TestPartialLoads(t *testing.T) {
	tests := []struct {
		in       string
		allowStr bool
		want     string
		end      int // -1: the whole input
		ok       bool
	}{
		{`{"name": "get_wea`, false, `{}`, -1, true},
		{`{"name": "get_wea`, true, `{"name": "get_wea"}`, -1, true},
		{`{"name": "f", "arguments": {"a": 12`, true, `{"name": "f", "arguments": {"a": 12}}`, -1, true},
		{`{"a": [1, 2`, true, `{"a": [1, 2]}`, -1, true},
		{`{"a": tr`, true, `{"a": true}`, -1, true},
		{`{"a": 1.`, true, `{"a": 1}`, -1, true},
		{`{"a": "x\u00`, true, `{"a": "x"}`, -1, true},
		{`{"a": "test `, true, `{"a": "test"}`, -1, true},
		{`{"a"`, true, `{}`, -1, true},
		{`{"a": 1}; {"b": 2}`, true, `{"a": 1}`, 8, true},
		{`{"a": 1} `, true, `{"a": 1}`, -1, true},
		{`{"a" 1`, true, ``, 0, false},
		{``, true, ``, 0, false},
		{`"abc`, false, ``, 0, false},
	}
	for _, tt := range tests {
		v, end, ok := partialLoads(tt.in, tt.allowStr)
		if ok != tt.ok {
			t.Errorf("%q: ok %v", tt.in, ok)
			continue
		}
		if !ok {
			continue
		}
		wEnd := tt.end
		if wEnd < 0 {
			wEnd = len(tt.in)
		}
		if got := pyDumps(v, false); got != tt.want || end != wEnd {
			t.Errorf("%q: got %q end %d, want %q end %d", tt.in, got, end, tt.want, wEnd)
		}
	}
}
