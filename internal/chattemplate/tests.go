package chattemplate

import (
	"fmt"
	"strings"
)

// testArity is how many arguments a test takes besides its subject (0 when
// absent): jinja2 raises TypeError for more.
var testArity = map[string]int{
	"divisibleby": 1, "sameas": 1, "in": 1, "eq": 1, "equalto": 1, "==": 1, "ne": 1, "!=": 1,
	"lt": 1, "lessthan": 1, "<": 1, "le": 1, "<=": 1, "gt": 1, "greaterthan": 1, ">": 1, "ge": 1, ">=": 1,
}

// tests are jinja2's tests ("x is defined", "x is string", ...).
func init() {
	tests = map[string]testFn{
		"defined":   func(_ *renderer, v any, _ []any) (bool, error) { return !isUndef(v), nil },
		"undefined": func(_ *renderer, v any, _ []any) (bool, error) { return isUndef(v), nil },
		"none":      func(_ *renderer, v any, _ []any) (bool, error) { return v == nil, nil },
		"boolean":   func(_ *renderer, v any, _ []any) (bool, error) { _, ok := v.(bool); return ok, nil },
		"true":      func(_ *renderer, v any, _ []any) (bool, error) { return v == true, nil },
		"false":     func(_ *renderer, v any, _ []any) (bool, error) { return v == false, nil },
		"integer":   func(_ *renderer, v any, _ []any) (bool, error) { _, ok := normalize(v).(int64); return ok, nil },
		"float":     func(_ *renderer, v any, _ []any) (bool, error) { _, ok := normalize(v).(float64); return ok, nil },
		"number":    func(_ *renderer, v any, _ []any) (bool, error) { _, _, _, ok := num(v); return ok, nil },
		"string":    func(_ *renderer, v any, _ []any) (bool, error) { _, ok := v.(string); return ok, nil },
		"mapping":   func(_ *renderer, v any, _ []any) (bool, error) { _, ok := dictKeys(normalize(v)); return ok, nil },
		"iterable": func(_ *renderer, v any, _ []any) (bool, error) {
			switch normalize(v).(type) {
			case string, []any, tuple, *Object, map[string]any, Undefined:
				return true, nil
			}
			return false, nil
		},
		"sequence": func(_ *renderer, v any, _ []any) (bool, error) {
			if _, ok := v.(*seqView); ok { // no __getitem__
				return false, nil
			}
			switch normalize(v).(type) {
			case string, []any, tuple, *Object, map[string]any, Undefined:
				return true, nil
			}
			return false, nil
		},
		"callable": func(_ *renderer, v any, _ []any) (bool, error) {
			switch v.(type) {
			case *macro, builtin, *method:
				return true, nil
			}
			return false, nil
		},
		"odd":         modTest(int64(1)),
		"even":        modTest(int64(0)),
		"divisibleby": divisibleTest,
		"sameas": func(_ *renderer, v any, args []any) (bool, error) {
			if len(args) != 1 {
				return false, fmt.Errorf("sameas needs one argument")
			}
			switch v.(type) {
			case nil, bool:
				return v == args[0], nil
			}
			return false, fmt.Errorf("unsupported: 'sameas' on %s", typeName(v))
		},
		"lower": func(_ *renderer, v any, _ []any) (bool, error) { s := str(v); return s == strings.ToLower(s), nil },
		"upper": func(_ *renderer, v any, _ []any) (bool, error) { s := str(v); return s == strings.ToUpper(s), nil },
		"in": func(_ *renderer, v any, args []any) (bool, error) {
			if len(args) != 1 {
				return false, fmt.Errorf("in needs one argument")
			}
			return contains(args[0], v)
		},
	}
	for names, op := range map[[3]string]string{
		{"eq", "equalto", "=="}: "==", {"ne", "!=", ""}: "!=", {"lt", "lessthan", "<"}: "<",
		{"le", "<=", ""}: "<=", {"gt", "greaterthan", ">"}: ">", {"ge", ">=", ""}: ">=",
	} {
		fn := cmpTest(op)
		for _, n := range names {
			if n != "" {
				tests[n] = fn
			}
		}
	}
}

func cmpTest(op string) testFn {
	return func(_ *renderer, v any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, fmt.Errorf("test needs one argument")
		}
		return compare(op, v, args[0])
	}
}

// modTest is jinja2's odd/even: value % 2 == want (floats too).
func modTest(want int64) testFn {
	return func(_ *renderer, v any, _ []any) (bool, error) {
		m, err := arith("%", v, int64(2))
		if err != nil {
			return false, err
		}
		return equal(m, want), nil
	}
}

func divisibleTest(_ *renderer, v any, args []any) (bool, error) {
	if len(args) != 1 {
		return false, fmt.Errorf("divisibleby needs one argument")
	}
	m, err := arith("%", v, args[0])
	if err != nil {
		return false, err
	}
	return equal(m, int64(0)), nil
}
