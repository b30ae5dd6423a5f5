package reasoning

import (
	"regexp"
	"strings"
)

// granite is vLLM's GraniteReasoningParser: IBM Granite writes "Here is my
// thought process:" before its reasoning and "Here is my response:"
// before its answer ("Here's" works too). Text that does not start that
// way is all content. vLLM's parser never reports the end of reasoning
// (it has no token to look for), so with a tool parser the hand-off never
// happens; ends is always false here too.
type granite struct{}

func init() { register(func(Options) Parser { return granite{} }, "granite") }

var (
	graniteThinkStarts = []string{"Here's my thought process:", "Here is my thought process:"}
	graniteRespStarts  = []string{"Here's my response:", "Here is my response:"}
	graniteSplit       = regexp.MustCompile(`(?s)(?:Here's|Here is) my thought process:(.*?)(?:Here's|Here is) my response:(.*)`)
)

func (granite) Split(text string) (*string, *string) {
	m := graniteSplit.FindStringSubmatch(text)
	if m == nil {
		return nil, &text
	}
	return &m[1], orNil(m[2])
}

func (granite) PromptEndsReasoning(string) bool { return false }

func (granite) NewStream() Stream { return &graniteStream{} }

type graniteStream struct{ text string }

func (s *graniteStream) Feed(delta string) (*Delta, bool) {
	s.text += delta
	return graniteStep(s.text, delta), false
}

func (s *graniteStream) FeedSplit(delta string) (*string, *string, bool, bool) {
	return feedSplit(s.Feed(delta))
}

// graniteStep is vLLM's extract_reasoning_streaming, which looks only at
// the current text and the delta. Offsets count characters, as Python's.
func graniteStep(current, delta string) *Delta {
	cur, d := []rune(current), []rune(delta)
	reasoning, seqLen, content, hasR, hasC := graniteSections(cur)
	var out Delta
	switch {
	case !hasR || len(reasoning) == 0:
		out = graniteNoReasoning(cur, d)
	case !hasC || len(content) == 0:
		out = graniteNoResponse(cur, reasoning, d)
	default:
		out = graniteBoth(d, reasoning, content, cur, seqLen)
	}
	if (out.Content == nil || *out.Content == "") && (out.Reasoning == nil || *out.Reasoning == "") {
		return nil
	}
	return &out
}

// graniteSections is _get_content_sections: the reasoning (after the
// thought-process marker), the response marker's length and the content.
func graniteSections(cur []rune) (reasoning []rune, seqLen int, content []rune, hasR, hasC bool) {
	chunkStart, start := 0, -1
	for end, r := range cur {
		if r != ':' {
			continue
		}
		chunk := string(cur[chunkStart:end])
		if start < 0 {
			for _, ts := range graniteThinkStarts {
				if chunk == strings.TrimSuffix(ts, ":") {
					start, chunkStart = end+1, end+1
					break
				}
			}
			continue
		}
		for _, rs := range graniteRespStarts {
			n := len([]rune(rs))
			tail := []rune(chunk)
			if len(tail) > n-1 {
				tail = tail[len(tail)-(n-1):]
			}
			if string(tail) == strings.TrimSuffix(rs, ":") {
				return runeSlice(cur, start, end-n), n, cur[end+1:], true, true
			}
		}
	}
	if start > 0 {
		return cur[start:], 0, nil, true, false
	}
	return nil, 0, nil, false, false
}

// runeSlice is Python's s[i:j] for 0 <= i and any j.
func runeSlice(s []rune, i, j int) []rune {
	if j < 0 {
		j += len(s)
	}
	j = min(max(j, 0), len(s))
	i = min(i, len(s))
	if j < i {
		return nil
	}
	return s[i:j]
}

func anyPrefix(starts []string, s string) bool {
	for _, t := range starts {
		if strings.HasPrefix(t, s) {
			return true
		}
	}
	return false
}

func graniteNoReasoning(cur, delta []rune) Delta {
	prev := string(cur[:max(len(cur)-len(delta), 0)])
	is := anyPrefix(graniteThinkStarts, string(cur))
	was := anyPrefix(graniteThinkStarts, prev)
	switch {
	case was && !is:
		return Delta{Content: ptr(string(cur))}
	case is:
		return Delta{}
	}
	return Delta{Content: ptr(string(delta))}
}

func graniteNoResponse(cur, reasoning, delta []rune) Delta {
	for _, rs := range graniteRespStarts {
		if strings.HasSuffix(string(cur), rs) {
			return Delta{}
		}
	}
	// reasoning[:-len(delta)], which is "" for an empty delta (-0 == 0).
	var prev []rune
	if len(delta) > 0 {
		prev = runeSlice(reasoning, 0, -len(delta))
	}
	prevIdx := strings.LastIndex(string(prev), "Here")
	deltaIdx := strings.LastIndex(string(delta), "Here")
	prevS, curS, deltaS := string(prev), string(reasoning), string(delta)
	prevWas := prevIdx >= 0 && anyPrefix(graniteRespStarts, prevS[prevIdx:])
	continues := prevIdx >= 0 && anyPrefix(graniteRespStarts, curS[prevIdx:])
	newSub := deltaIdx >= 0 && anyPrefix(graniteRespStarts, deltaS[deltaIdx:])
	switch {
	case continues:
		return Delta{}
	case !prevWas && newSub:
		return Delta{Reasoning: ptr(deltaS[:deltaIdx])}
	case !prevWas:
		return Delta{Reasoning: ptr(deltaS)}
	case newSub:
		return Delta{Reasoning: ptr(prevS[prevIdx:] + deltaS[:deltaIdx])}
	}
	return Delta{Reasoning: ptr(prevS[prevIdx:] + deltaS)}
}

func graniteBoth(delta, reasoning, content, cur []rune, seqLen int) Delta {
	out := Delta{Content: ptr(string(runeSlice(delta, max(len(delta)-len(content), 0), len(delta))))}
	endIdx := len(delta) - (len(content) + seqLen)
	if endIdx >= 0 {
		startIdx := len(reasoning) + seqLen + len(content) - 1
		offset := max(startIdx-(len(cur)-len(delta)), 0)
		out.Reasoning = ptr(string(runeSlice(delta, offset, endIdx)))
	}
	return out
}
