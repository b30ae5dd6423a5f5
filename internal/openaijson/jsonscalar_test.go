package openaijson

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestScalarFieldAgreesWithEncodingJSON: whatever scalarField decodes, it decodes
// to what encoding/json does, into fresh and into already-set destinations.
func TestScalarFieldAgreesWithEncodingJSON(t *testing.T) {
	raws := []string{`true`, `false`, `null`, `0`, `-0`, `7`, `-7`, `16`, `123456789012345678`, `1234567890123456789`,
		`01`, `1.0`, `1e3`, `-`, `""`, `"abc"`, `"a b/c:d"`, `"é"`, `"a\"b"`, `"\u00e9"`, "\"\xff\"", `[1]`, `{}`, `"16"`,
		`0.7`, `1.`, `.5`, `0x1p3`, `1_0`, `Inf`, `NaN`, `1e`, `1e+`, `-0.0`, `00.5`, `1E2`, `1e-7`, `-1.5e+3`, `1e400`, `-1e400`, `123456789012345678901234567890`,
		`[]`, `[2]`, `[ 1 , 2 ]`, "[\n1,\t2\n]", `[-1]`, `[1.5]`, `[1234567890123456789]`, `["a"]`, `[[1]]`, `[null]`, `[1,]`, `[,1]`}
	for _, raw := range raws {
		for _, mk := range []func() any{
			func() any { return new(bool) }, func() any { b := true; return &b },
			func() any { return new(int64) }, func() any { v := int64(5); return &v },
			func() any { return new(*int64) }, func() any { v := int64(5); p := &v; return &p },
			func() any { return new(string) }, func() any { s := "x"; return &s },
			func() any { return new(*string) }, func() any { s := "x"; p := &s; return &p },
			func() any { return new(*float64) }, func() any { v := 0.5; p := &v; return &p },
			func() any { return new([]int64) }, func() any { v := []int64{9}; return &v },
		} {
			want, got := mk(), mk()
			wantErr := json.Unmarshal([]byte(raw), want)
			if !scalarField([]byte(raw), got) {
				if !cmp.Equal(got, mk()) {
					t.Errorf("%s into %T: refused but changed the destination to %v", raw, got, got)
				}
				continue
			}
			if wantErr != nil || !cmp.Equal(got, want) {
				t.Errorf("%s into %T: got %v, encoding/json %v (err %v)", raw, got, deref(got), deref(want), wantErr)
			}
		}
	}
}

func deref(v any) any {
	switch p := v.(type) {
	case **int64:
		if *p == nil {
			return nil
		}
		return **p
	case **string:
		if *p == nil {
			return nil
		}
		return **p
	case **float64:
		if *p == nil {
			return nil
		}
		return **p
	case *[]int64:
		return *p
	}
	return v
}
