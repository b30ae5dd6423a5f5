package toolcall

import (
	"regexp"
	"strings"
)

// pythonic is vLLM's PythonicToolParser ("pythonic"): Llama 3.2, Llama 4
// and ToolACE write a Python list of calls, [f(a=1, b="x"), g()].
// Keyword arguments become the JSON arguments; values must be literals
// (strings, numbers, True/False/None or null/true/false, lists, dicts).
// As in vLLM, negative numbers and tuples are not literals here and turn
// the whole answer into content.
type pythonic struct{}

func init() { register(pythonic{}, "pythonic") }

// pythonicShape is vLLM's TOOL_CALL_REGEX, which the answer must match
// from its first character before it is parsed.
var pythonicShape = regexp.MustCompile(`^(?s)\[([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s)?\),\s*)*([a-zA-Z]+\w*\(([a-zA-Z]+\w*=.*,\s*)*([a-zA-Z]+\w*=.*\s*)?\)\s*)+\]`)

func (pythonic) Name() string { return "pythonic" }

func (pythonic) Parse(text string, _ []Tool, newID func() string) Result {
	if !pythonicShape.MatchString(text) {
		return noCalls(text)
	}
	calls, err := pythonicCalls(text, orNewID(newID))
	if err != nil {
		return noCalls(text)
	}
	return Result{Called: true, Calls: calls}
}

// pythonicCalls parses a list of calls.
func pythonicCalls(text string, newID func() string) ([]Call, error) {
	n, err := parsePyExpr(text)
	if err != nil {
		return nil, err
	}
	if n.kind != pyList {
		return nil, errPySyntax
	}
	calls := make([]Call, 0, len(n.elts))
	for _, e := range n.elts {
		if e.kind != pyCall || e.name == "" {
			return nil, errPySyntax
		}
		args := jval{kind: jObject}
		for i, k := range e.kwNames {
			v, err := pyParamValue(e.elts[i], 0)
			if err != nil {
				return nil, err
			}
			args.set(k, v)
		}
		calls = append(calls, Call{ID: newID(), Name: e.name, Arguments: pyDumps(args, false)})
	}
	return calls, nil
}

// pyParamValue is vLLM's get_parameter_value followed by json.dumps.
func pyParamValue(n pyNode, depth int) (jval, error) {
	if depth > maxDepth {
		return jval{}, errPySyntax
	}
	switch n.kind {
	case pyConst:
		return n.val, nil
	case pyName:
		switch n.name {
		case "null":
			return jval{kind: jNull}, nil
		case "true":
			return jval{kind: jBool, b: true}, nil
		case "false":
			return jval{kind: jBool}, nil
		}
	case pyList:
		out := jval{kind: jArray, arr: []jval{}}
		for _, e := range n.elts {
			v, err := pyParamValue(e, depth+1)
			if err != nil {
				return jval{}, err
			}
			out.arr = append(out.arr, v)
		}
		return out, nil
	case pyDict:
		out := jval{kind: jObject}
		for i, k := range n.keys {
			if k.kind != pyConst {
				return jval{}, errPySyntax
			}
			key, ok := jsonKey(k.val)
			if !ok {
				return jval{}, errUnserializable
			}
			v, err := pyParamValue(n.elts[i], depth+1)
			if err != nil {
				return jval{}, err
			}
			out.set(key, v)
		}
		return out, nil
	}
	return jval{}, errPySyntax
}

func (pythonic) NewStream(_ []Tool, newID func() string) Stream {
	return &pyStream{newID: orNewID(newID), current: -1}
}

type pyStream struct {
	newID    func() string
	text     string
	buf      textBuf
	current  int // current_tool_index
	streamed []string
	called   bool // vLLM's placeholder prev_tool_call_arr entry
}

func (s *pyStream) Feed(delta string, _ int) *Delta {
	s.text = s.buf.add(delta)
	if !strings.HasPrefix(s.text, "[") {
		return contentDelta(delta)
	}
	valid, added, ok := makeValidPython(s.text)
	if !ok {
		return nil
	}
	calls, err := pythonicCalls(valid, func() string { return "" })
	if err != nil {
		return nil
	}
	var out []CallDelta
	for i, c := range calls {
		if i < s.current {
			continue
		}
		s.current = i
		if len(s.streamed) == i {
			s.streamed = append(s.streamed, "")
		}
		complete := i < len(calls)-1 || !strings.Contains(added, ")]")
		if complete {
			s.current++
		}
		withheld := ""
		if !complete {
			withheld = added[:len(added)-2]
			if added[len(added)-2] == ')' {
				withheld += "}"
			}
		}
		withheld = strings.ReplaceAll(withheld, "'", `"`)
		args := c.Arguments
		if withheld != "" {
			if !strings.HasSuffix(args, withheld) {
				return nil // vLLM raises and skips the chunk
			}
			args = args[:len(args)-len(withheld)]
		}
		switch {
		case s.streamed[i] == "":
			cd := nameDelta(i, s.newID(), c.Name)
			cd.Args, cd.HasArgs = args, true
			out = append(out, cd)
			s.streamed[i] += args
		default:
			if diff := pyTail(args, pyLen(s.streamed[i])); diff != "" {
				out = append(out, CallDelta{Index: i, Args: diff, HasArgs: true})
				s.streamed[i] += diff
			}
		}
	}
	if len(out) > 0 {
		s.called = true
		return &Delta{Calls: out}
	}
	if added == "" && s.current > 0 {
		return contentDelta("")
	}
	return nil
}

// makeValidPython is vLLM's make_valid_python: close what is open so the
// partial list parses, or report that it is too early to try.
func makeValidPython(text string) (valid, added string, ok bool) {
	var stack []byte
	for i := 0; i < len(text); i++ {
		c := text[i]
		top := byte(0)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch c {
		case '[', '(', '{':
			stack = append(stack, c)
		case ']', ')', '}':
			open := map[byte]byte{']': '[', ')': '(', '}': '{'}[c]
			if top != open {
				return "", "", false // vLLM raises: mismatched brackets
			}
			stack = stack[:len(stack)-1]
		case '\'', '"':
			switch {
			case top == c:
				if i == 0 || text[i-1] != '\\' {
					stack = stack[:len(stack)-1]
				}
			case top == '\'' || top == '"':
			default:
				stack = append(stack, c)
			}
		}
	}
	text = pyRStrip(text)
	if strings.HasSuffix(text, "=") || strings.HasSuffix(text, ":") {
		return "", "", false
	}
	top := byte(0)
	if len(stack) > 0 {
		top = stack[len(stack)-1]
	}
	if top == '{' {
		before := text[:strings.LastIndexByte(text, '{')]
		if strings.Count(before, ":") <= strings.Count(before, ",") {
			return "", "", false
		}
	}
	if top == '(' {
		before := text[:strings.LastIndexByte(text, '(')]
		if strings.Count(before, "=") <= strings.Count(before, ",") {
			return "", "", false
		}
	}
	text = strings.TrimSuffix(text, ",")
	if top == '[' && !strings.HasSuffix(text, "[") && !strings.HasSuffix(text, ")") {
		return "", "", false
	}
	closing := map[byte]byte{'[': ']', '(': ')', '{': '}', '\'': '\'', '"': '"'}
	b := make([]byte, 0, len(stack))
	for i := len(stack) - 1; i >= 0; i-- {
		b = append(b, closing[stack[i]])
	}
	candidate := text + string(b)
	n, err := parsePyExpr(candidate)
	if err != nil || hasSet(n) {
		return "", "", false
	}
	return candidate, string(b), true
}

func hasSet(n pyNode) bool {
	if n.kind == pySet {
		return true
	}
	for _, e := range n.elts {
		if hasSet(e) {
			return true
		}
	}
	for _, k := range n.keys {
		if hasSet(k) {
			return true
		}
	}
	return false
}

func (s *pyStream) Finish(last *Delta) (*Delta, bool) { return finishWith(s, last) }

// prevCount: vLLM's pythonic parser keeps one placeholder entry with
// empty arguments once it has streamed a call.
func (s *pyStream) prevCount() int {
	if s.called {
		return 1
	}
	return 0
}

func (s *pyStream) expectedArgs(int) string { return "{}" }

func (s *pyStream) streamedArgs(i int) string {
	if i < len(s.streamed) {
		return s.streamed[i]
	}
	return ""
}
