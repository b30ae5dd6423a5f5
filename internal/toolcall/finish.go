package toolcall

import (
	"strings"
	"unicode/utf8"
)

// argState is what vLLM's serving layer reads from a tool parser at the
// end of a stream: prev_tool_call_arr and streamed_args_for_tool.
type argState interface {
	// prevCount is len(prev_tool_call_arr).
	prevCount() int
	// expectedArgs is prev_tool_call_arr[i]["arguments"] as the serving
	// layer sees it: a string kept as is, anything else json.dumps'ed.
	expectedArgs(i int) string
	// streamedArgs is streamed_args_for_tool[i] ("" when out of range).
	streamedArgs(i int) string
}

// finishWith applies vLLM's end-of-stream check to the last delta: when
// it carries argument text for a call and tools were called, the delta is
// replaced by one holding only what the parser expected for the last call
// minus what was streamed before this delta. The replacement keeps the
// id, type and name of that call's entry and drops everything else, as
// vLLM's _create_remaining_args_delta does.
func finishWith(st argState, last *Delta) (*Delta, bool) {
	n := st.prevCount()
	called := n > 0
	if !called || last == nil || len(last.Calls) == 0 || !last.Calls[0].HasArgs {
		return last, called
	}
	index := n - 1
	expected := st.expectedArgs(index)
	actual := pyDropLast(st.streamedArgs(index), utf8.RuneCountInString(last.Calls[0].Args))
	remaining := strings.Replace(expected, actual, "", 1)
	cd := CallDelta{Index: index, Args: remaining, HasArgs: true}
	for _, c := range last.Calls {
		if c.Index == index {
			cd.ID, cd.Type, cd.Name = c.ID, c.Type, c.Name
			break
		}
	}
	return &Delta{Calls: []CallDelta{cd}}, called
}

// pyDropLast is Python's s[:-k] for k > 0 (k counts code points), and s
// itself for k == 0.
func pyDropLast(s string, k int) string {
	if k <= 0 {
		return s
	}
	n := utf8.RuneCountInString(s)
	if k >= n {
		return ""
	}
	return pyHead(s, n-k)
}

// pyHead is Python's s[:k] for 0 <= k (code points).
func pyHead(s string, k int) string {
	if k <= 0 {
		return ""
	}
	for i := range s {
		if k == 0 {
			return s[:i]
		}
		k--
	}
	return s
}

// pyTail is Python's s[k:] for 0 <= k (code points).
func pyTail(s string, k int) string {
	if k <= 0 {
		return s
	}
	for i := range s {
		if k == 0 {
			return s[i:]
		}
		k--
	}
	return ""
}

// pyLen is Python's len of a str.
func pyLen(s string) int { return utf8.RuneCountInString(s) }
