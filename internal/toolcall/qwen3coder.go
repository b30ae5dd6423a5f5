package toolcall

import (
	"math"
	"strings"
)

// qwen3Coder is vLLM's Qwen3CoderToolParser ("qwen3_coder"): Qwen3-Coder
// and Qwen3.5 write
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
//
// and each VALUE is converted by the type its tool schema gives P.
type qwen3Coder struct{}

func init() { register(qwen3Coder{}, "qwen3_coder") }

const (
	qcCallStart  = "<tool_call>"
	qcCallEnd    = "</tool_call>"
	qcFuncPrefix = "<function="
	qcFuncEnd    = "</function>"
	qcParamPre   = "<parameter="
	qcParamEnd   = "</parameter>"
)

func (qwen3Coder) Name() string { return "qwen3_coder" }

func (qwen3Coder) Parse(text string, tools []Tool, newID func() string) Result {
	if !strings.Contains(text, qcFuncPrefix) {
		return noCalls(text)
	}
	newID = orNewID(newID)
	var calls []Call
	for _, body := range qcFunctionBodies(text) {
		c, ok, err := qcParseFunction(body, tools)
		if err != nil {
			return noCalls(text)
		}
		if ok {
			c.ID = newID()
			calls = append(calls, c)
		}
	}
	if len(calls) == 0 {
		return noCalls(text)
	}
	at := strings.Index(text, qcCallStart)
	if at < 0 {
		at = strings.Index(text, qcFuncPrefix)
	}
	return Result{Called: true, Calls: calls, Content: contentOrNil(text[:at])}
}

// pyDollarEnd is where a Python regex `$` (no MULTILINE) first matches
// at or after i: before a final newline, or at the end.
func pyDollarEnd(s string, i int) int {
	if strings.HasSuffix(s, "\n") && len(s)-1 >= i {
		return len(s) - 1
	}
	return len(s)
}

// qcFunctionBodies is vLLM's _get_function_calls: the <tool_call>
// regions (or the whole text when there is none), then the <function=
// bodies inside each.
func qcFunctionBodies(text string) []string {
	var regions []string
	for rest := text; ; {
		i := strings.Index(rest, qcCallStart)
		if i < 0 {
			break
		}
		body := rest[i+len(qcCallStart):]
		if j := strings.Index(body, qcCallEnd); j >= 0 {
			regions = append(regions, body[:j])
			rest = body[j+len(qcCallEnd):]
			continue
		}
		regions = append(regions, body[:pyDollarEnd(body, 0)])
		break
	}
	if len(regions) == 0 {
		regions = []string{text}
	}
	var out []string
	for _, r := range regions {
		for {
			i := strings.Index(r, qcFuncPrefix)
			if i < 0 {
				break
			}
			body := r[i+len(qcFuncPrefix):]
			if j := strings.Index(body, qcFuncEnd); j >= 0 {
				out = append(out, body[:j])
				r = body[j+len(qcFuncEnd):]
				continue
			}
			out = append(out, body)
			break
		}
	}
	return out
}

// qcParseFunction is vLLM's _parse_xml_function_call on "NAME>params".
// ok is false where vLLM returns None; err where it raises.
func qcParseFunction(body string, tools []Tool) (Call, bool, error) {
	gt := strings.IndexByte(body, '>')
	if gt < 0 {
		return Call{}, false, nil
	}
	name := body[:gt]
	props := toolProperties(tools, name)
	params := body[gt+1:]
	args := jval{kind: jObject}
	for _, m := range qcParamMatches(params) {
		gt := strings.IndexByte(m, '>')
		if gt < 0 {
			return Call{}, false, errPySyntax
		}
		pname, value := m[:gt], m[gt+1:]
		value = strings.TrimPrefix(value, "\n")
		value = strings.TrimSuffix(value, "\n")
		v, err := qcConvert(value, pname, props)
		if err != nil {
			return Call{}, false, err
		}
		args.set(pname, v)
	}
	return Call{Name: name, Arguments: pyDumps(args, false)}, true, nil
}

// qcParamMatches is findall of
// <parameter=(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|$):
// each body ends at the first of those places.
func qcParamMatches(s string) []string {
	var out []string
	pos := 0
	for {
		i := strings.Index(s[pos:], qcParamPre)
		if i < 0 {
			return out
		}
		start := pos + i + len(qcParamPre)
		end, next := pyDollarEnd(s, start), -1
		next = end
		rest := s[start:]
		if k := strings.Index(rest, qcParamEnd); k >= 0 && start+k < end {
			end, next = start+k, start+k+len(qcParamEnd)
		}
		for _, look := range []string{qcParamPre, qcFuncEnd} {
			if k := strings.Index(rest, look); k >= 0 && start+k < end {
				end, next = start+k, start+k
			}
		}
		out = append(out, s[start:end])
		if next <= pos {
			next = pos + 1
		}
		pos = next
		if pos > len(s) {
			return out
		}
	}
}

// qcConvert is vLLM's _convert_param_value.
func qcConvert(value, name string, props jval) (jval, error) {
	str := jval{kind: jString, text: value}
	if strings.ToLower(value) == "null" {
		return jval{kind: jNull}, nil
	}
	conf, ok := props.get(name)
	if !ok {
		return str, nil
	}
	typ := "string"
	if t, ok := conf.get("type"); ok {
		typ = "\x00" // str() of a non-string type matches no name below
		if t.kind == jString {
			typ = strings.ToLower(pyStrip(t.text))
		}
	} else if conf.has("anyOf") {
		typ = "object"
	}
	switch {
	case typ == "string" || typ == "str" || typ == "text" || typ == "varchar" || typ == "char" || typ == "enum":
		return str, nil
	case hasAnyPrefix(typ, "int", "uint", "long", "short", "unsigned"):
		if v, ok := pyInt(value); ok {
			return v, nil
		}
		return str, nil
	case hasAnyPrefix(typ, "num", "float"):
		f, ok := pyFloat(value)
		switch {
		case !ok || math.IsNaN(f):
			return str, nil
		case math.IsInf(f, 0):
			return jval{}, errUnserializable // int(inf) raises OverflowError
		case f != math.Trunc(f):
			return jval{kind: jFloat, num: f}, nil
		}
		return jval{kind: jInt, text: floatToIntText(f)}, nil
	case typ == "boolean" || typ == "bool" || typ == "binary":
		return jval{kind: jBool, b: strings.ToLower(value) == "true"}, nil
	}
	if typ == "object" || typ == "array" || typ == "arr" || hasAnyPrefix(typ, "dict", "list") {
		if v, err := pyLoads(value); err == nil {
			return v, nil
		}
	}
	v, err := literalEval(value)
	if err == errPySyntax {
		return str, nil
	}
	return v, err
}

func hasAnyPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
