package toolcall

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// errUnserializable marks a value json.dumps would reject (bytes,
// complex, sets, Ellipsis, tuple keys): vLLM's parse fails on it.
var errUnserializable = errors.New("toolcall: value json.dumps rejects")

// toolProperties is vLLM's find_tool_properties: the "properties" object
// of the first tool with that name, or an empty object.
func toolProperties(tools []Tool, name string) jval {
	for _, t := range tools {
		if t.Name != name {
			continue
		}
		if len(t.Parameters) == 0 {
			break
		}
		params, err := pyLoads(string(t.Parameters))
		if err != nil {
			break
		}
		if props, ok := params.get("properties"); ok && props.kind == jObject {
			return props
		}
		break
	}
	return jval{kind: jObject}
}

// literalEval is ast.literal_eval followed by what json.dumps makes of
// the result: errPySyntax where literal_eval raises, errUnserializable
// where json.dumps would.
func literalEval(s string) (jval, error) {
	n, err := parsePyExpr(s)
	if err != nil {
		return jval{}, errPySyntax
	}
	return literalValue(n, 0)
}

func literalValue(n pyNode, depth int) (jval, error) {
	if depth > maxDepth {
		return jval{}, errPySyntax
	}
	switch n.kind {
	case pyConst:
		return n.val, nil
	case pyOpaque:
		return jval{}, errUnserializable
	case pyList, pyTuple:
		out := jval{kind: jArray, arr: []jval{}}
		var bad error
		for _, e := range n.elts {
			v, err := literalValue(e, depth+1)
			if err == errPySyntax {
				return jval{}, err
			}
			if err != nil {
				bad = err
			}
			out.arr = append(out.arr, v)
		}
		return out, bad
	case pySet:
		return jval{}, errUnserializable
	case pyDict:
		return literalDict(n, depth)
	case pyUnary:
		x := n.elts[0]
		if !x.numeric {
			return jval{}, errPySyntax
		}
		if x.kind == pyOpaque || n.op == '+' {
			return literalValue(x, depth+1)
		}
		return negate(x.val), nil
	case pyBinary:
		l, r := n.elts[0], n.elts[1]
		if l.kind == pyUnary {
			l = l.elts[0]
		}
		if l.numeric && r.kind == pyOpaque && r.numeric {
			return jval{}, errUnserializable // a complex number
		}
	}
	return jval{}, errPySyntax
}

func literalDict(n pyNode, depth int) (jval, error) {
	out := jval{kind: jObject}
	var bad error
	for i, k := range n.keys {
		kv, err := literalValue(k, depth+1)
		if err == errPySyntax {
			return jval{}, err
		}
		if k.kind == pyList || k.kind == pyDict || k.kind == pySet {
			return jval{}, errPySyntax // unhashable key: TypeError
		}
		v, err2 := literalValue(n.elts[i], depth+1)
		if err2 == errPySyntax {
			return jval{}, err2
		}
		key, ok := jsonKey(kv)
		if err != nil || err2 != nil || !ok || k.kind == pyTuple {
			bad = errUnserializable
			continue
		}
		out.set(key, v)
	}
	return out, bad
}

// jsonKey is how json.dumps writes a dict key.
func jsonKey(v jval) (string, bool) {
	switch v.kind {
	case jString:
		return v.text, true
	case jInt:
		return v.text, true
	case jFloat:
		return pyFloatRepr(v.num), true
	case jBool:
		if v.b {
			return "true", true
		}
		return "false", true
	case jNull:
		return "null", true
	}
	return "", false
}

func negate(v jval) jval {
	switch v.kind {
	case jInt:
		if v.text == "0" {
			return v
		}
		if strings.HasPrefix(v.text, "-") {
			v.text = v.text[1:]
		} else {
			v.text = "-" + v.text
		}
	case jFloat:
		v.num = -v.num
	}
	return v
}

// pyInt is Python's int(str): optional sign and whitespace, underscores
// between digits, leading zeros allowed.
func pyInt(s string) (jval, bool) {
	t := pyStrip(s)
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-'
		t = t[1:]
	}
	if t == "" || t[0] == '_' || t[len(t)-1] == '_' || strings.Contains(t, "__") {
		return jval{}, false
	}
	v, ok := new(big.Int).SetString(strings.ReplaceAll(t, "_", ""), 10)
	if !ok {
		return jval{}, false
	}
	if neg {
		v.Neg(v)
	}
	return jval{kind: jInt, text: v.String()}, true
}

// pyFloat is Python's float(str).
func pyFloat(s string) (float64, bool) {
	t := strings.ToLower(pyStrip(s))
	sign := 1.0
	body := t
	if body != "" && (body[0] == '+' || body[0] == '-') {
		if body[0] == '-' {
			sign = -1
		}
		body = body[1:]
	}
	switch body {
	case "inf", "infinity":
		return sign * math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	if body == "" || strings.ContainsAny(body, "xpn") || strings.HasPrefix(body, "_") ||
		strings.HasSuffix(body, "_") || strings.Contains(body, "__") {
		return 0, false
	}
	for i := 0; i < len(body); i++ {
		if body[i] == '_' && !(isDigitByte(body[i-1]) && isDigitByte(body[i+1])) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true
}

func isDigitByte(c byte) bool { return c >= '0' && c <= '9' }

// floatToIntText is Python's int(f) for a finite float, as decimal text.
func floatToIntText(f float64) string {
	b, _ := new(big.Float).SetFloat64(math.Trunc(f)).Int(nil)
	return b.String()
}
