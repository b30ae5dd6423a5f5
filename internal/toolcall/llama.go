package toolcall

import (
	"strings"
	"unicode/utf8"
)

// llama3JSON is vLLM's Llama3JsonToolParser ("llama3_json", also
// "llama4_json"): Llama 3.1-3.3 write an optional <|python_tag|> and
// then JSON objects {"name": ..., "parameters"|"arguments": ...},
// separated by "; ".
type llama3JSON struct{}

func init() { register(llama3JSON{}, "llama3_json", "llama4_json") }

const llamaBOT = "<|python_tag|>"

func (llama3JSON) Name() string { return "llama3_json" }

func (llama3JSON) Parse(text string, _ []Tool, newID func() string) Result {
	if !strings.Contains(text, llamaBOT) && !strings.Contains(text, "{") {
		return noCalls(text)
	}
	newID = orNewID(newID)
	var calls []Call
	end := -1
	for start := 0; start < len(text); start++ {
		k := strings.IndexByte(text[start:], '{')
		if k < 0 {
			break
		}
		start += k
		if start <= end {
			continue
		}
		obj, n, err := pyRawDecode(text, start)
		if err != nil {
			return noCalls(text)
		}
		end = n
		name, ok := obj.get("name")
		args, okArgs := obj.get("arguments")
		if !okArgs {
			args, okArgs = obj.get("parameters")
		}
		if !ok || !okArgs || name.kind != jString {
			return noCalls(text)
		}
		calls = append(calls, Call{ID: newID(), Name: name.text, Arguments: pyDumps(args, false)})
	}
	if len(calls) == 0 {
		return noCalls(text)
	}
	return Result{Called: true, Calls: calls}
}

func (llama3JSON) NewStream(_ []Tool, newID func() string) Stream {
	return &llamaStream{newID: orNewID(newID), current: -1, prevJSONFor: -1}
}

type llamaObj struct {
	v        jval
	complete bool
}

type llamaStream struct {
	newID    func() string
	text     string
	buf      textBuf
	prev     []jval // prev_tool_call_arr
	current  int    // current_tool_id
	nameSent bool
	streamed []string
	// done holds leading objects that are complete and followed by more
	// text; they cannot change, so parsing resumes at doneAt.
	done   []llamaObj
	doneAt int
	// prevJSON is json.dumps of prev[prevJSONFor]'s arguments, kept from
	// the last delta so that each delta serializes the arguments once.
	prevJSON    string
	prevJSONFor int
}

func (s *llamaStream) Feed(delta string, _ int) *Delta {
	s.text = s.buf.add(delta)
	if !strings.HasPrefix(s.text, llamaBOT) && !strings.HasPrefix(s.text, "{") {
		return contentDelta(delta)
	}
	arr, ok := s.parse()
	if !ok || len(arr) == 0 {
		return nil
	}
	cur := arr[pyIndex(len(arr), s.current)].v
	if len(arr) > s.current+1 {
		return s.startTool(arr)
	}
	if !s.nameSent {
		name, _ := cur.get("name")
		if !name.truthy() {
			s.setPrev(arr)
			return nil
		}
		if name.kind != jString {
			return nil // vLLM's delta model rejects it and skips the chunk
		}
		s.nameSent = true
		s.setPrev(arr)
		return &Delta{Calls: []CallDelta{nameDelta(s.current, s.newID(), name.text)}}
	}
	var out *Delta
	args, _ := cur.get("arguments")
	if !args.truthy() {
		s.setPrev(arr)
		return nil
	}
	if s.current >= len(s.prev) {
		return nil // IndexError in vLLM: the chunk is skipped
	}
	sent := pyLen(s.streamed[s.current])
	curJSON := pyDumps(args, false)
	var diff string
	has := false
	if arr[s.current].complete {
		diff, has = pyTail(curJSON, sent), true
	} else if prevArgs, _ := s.prev[s.current].get("arguments"); prevArgs.truthy() {
		prevJSON := s.prevJSON
		if s.prevJSONFor != s.current {
			prevJSON = pyDumps(prevArgs, false)
		}
		if prevJSON != curJSON {
			diff, has = pyTail(commonPrefix(prevJSON, curJSON), sent), true
		}
	}
	if has {
		out = argsDelta(s.current, diff)
		s.streamed[s.current] += diff
	}
	s.setPrev(arr)
	s.prevJSON, s.prevJSONFor = curJSON, s.current
	return out
}

// startTool moves to a new object, first sending what the previous one's
// arguments have that was not streamed.
func (s *llamaStream) startTool(arr []llamaObj) *Delta {
	var out *Delta
	if s.current >= 0 {
		cur := arr[s.current].v
		if args, _ := cur.get("arguments"); args.truthy() {
			diff := pyTail(pyDumps(args, false), pyLen(s.streamed[s.current]))
			out = argsDelta(s.current, diff)
			s.streamed[s.current] += diff
		}
	}
	s.current = len(arr) - 1
	s.nameSent = false
	s.streamed = append(s.streamed, "")
	return out
}

func (s *llamaStream) setPrev(arr []llamaObj) {
	s.prevJSONFor = -1
	s.prev = s.prev[:0]
	for _, o := range arr {
		s.prev = append(s.prev, o.v)
	}
}

// parse reads every object of the text as vLLM's loop does: partial JSON
// from the start (after <|python_tag|>), then two characters skipped
// ("; ") before each next object. ok is false where vLLM gives up on the
// chunk.
func (s *llamaStream) parse() ([]llamaObj, bool) {
	start := s.doneAt
	if start == 0 && strings.HasPrefix(s.text, llamaBOT) {
		start = len(llamaBOT)
	}
	arr := append([]llamaObj(nil), s.done...)
	for start < len(s.text) {
		rest := s.text[start:]
		v, end, ok := partialLoads(rest, s.nameSent)
		if !ok || v.kind != jObject {
			return nil, false
		}
		o := llamaObj{v: v, complete: isCompleteJSON(rest[:end])}
		if params, ok := v.get("parameters"); ok {
			if v.has("arguments") {
				return nil, false // vLLM asserts against both keys
			}
			o.v.set("arguments", params)
		}
		arr = append(arr, o)
		if o.complete && end < len(rest) {
			s.done = append(s.done, o)
			s.doneAt = start + end + 2
		}
		start += end + 2
	}
	return arr, true
}

// pyIndex maps a Python index (negative from the end) into [0, n).
func pyIndex(n, i int) int {
	if i < 0 {
		i += n
	}
	return min(max(i, 0), n-1)
}

// commonPrefix is vLLM's find_common_prefix, by character.
func commonPrefix(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) {
		ra, na := utf8.DecodeRuneInString(a[i:])
		rb, nb := utf8.DecodeRuneInString(b[i:])
		if ra != rb || na != nb {
			break
		}
		i += na
	}
	return a[:i]
}

func (s *llamaStream) Finish(last *Delta) (*Delta, bool) { return finishWith(s, last) }

func (s *llamaStream) prevCount() int { return len(s.prev) }

func (s *llamaStream) expectedArgs(i int) string {
	args, ok := s.prev[i].get("arguments")
	if !ok {
		return "{}"
	}
	if args.kind == jString {
		return args.text
	}
	return pyDumps(args, false)
}

func (s *llamaStream) streamedArgs(i int) string {
	if i < len(s.streamed) {
		return s.streamed[i]
	}
	return ""
}
