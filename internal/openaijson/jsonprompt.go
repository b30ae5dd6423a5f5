package openaijson

// The streaming half of Decode: the prompt's token ids, parsed as they arrive so
// a body never costs more than apicore.MaxPromptTokens ids.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"math"
	"strconv"
)

// prompt parses the prompt value as it streams in: a list of token ids or a list
// of such lists. It stops at the first id past p.maxTokens (apicore.MaxPromptTokens, or
// the largest context an engine registered), so a body never costs more memory
// than the limit allows.
func (p *jsonReader) prompt(req *Prompt) error {
	req.IDs = nil
	c, err := p.ws()
	if err != nil {
		return err
	}
	switch c {
	case 'n':
		return p.literal(c) // null: absent (Prompts says it is required)
	case '"':
		s, err := p.text("prompt")
		if err != nil {
			return err
		}
		req.Texts = []string{s}
		return nil
	case '[':
	default:
		return errPromptShape
	}
	first, err := p.peekWS()
	if err != nil {
		return err
	}
	switch {
	case first == ']':
		_, _ = p.next()
		return badRequest("prompt", "prompt must not be empty")
	case first == '"':
		return p.textList(req)
	case first != '[':
		ids, err := p.ids("prompt", true)
		if err != nil {
			return err
		}
		req.IDs = [][]int64{ids}
		return nil
	}
	for i := 0; ; i++ {
		if c, err := p.ws(); err != nil {
			return err
		} else if c != '[' {
			return errPromptShape
		}
		if len(req.IDs) >= p.maxPrompts {
			return badRequest("prompt", "more than %d prompts (n times the number of prompts is limited to %d)", p.maxPrompts, p.maxPrompts)
		}
		ids, err := p.ids(fmt.Sprintf("prompt[%d]", i), false)
		if err != nil {
			return err
		}
		req.IDs = append(req.IDs, ids)
		if c, err = p.ws(); err != nil {
			return err
		} else if c == ']' {
			return nil
		} else if c != ',' {
			return p.syntax("expected , or ] in array")
		}
	}
}

// text reads the rest of a string whose opening quote was consumed, decoded. A
// text prompt is kept whole (tokenized later), within the body limit.
func (p *jsonReader) text(where string) (string, error) {
	raw, _, err := p.str(nil, true, math.MaxInt) // the body's own limit bounds it
	if err != nil {
		return "", err
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return "", badRequest(where, "%s: %v", where, err)
	}
	return s, nil
}

// textList reads a list of strings whose '[' was consumed.
func (p *jsonReader) textList(req *Prompt) error {
	for i := 0; ; i++ {
		where := fmt.Sprintf("prompt[%d]", i)
		if c, err := p.ws(); err != nil {
			return err
		} else if c != '"' {
			return badRequest("prompt", "%s: a list of prompts must be all strings or all lists of token ids", where)
		}
		if len(req.Texts) >= p.maxPrompts {
			return badRequest("prompt", "more than %d prompts (n times the number of prompts is limited to %d)", p.maxPrompts, p.maxPrompts)
		}
		s, err := p.text(where)
		if err != nil {
			return err
		}
		req.Texts = append(req.Texts, s)
		if c, err := p.ws(); err != nil {
			return err
		} else if c == ']' {
			return nil
		} else if c != ',' {
			return p.syntax("expected , or ] in array")
		}
	}
}

var (
	errPromptShape = badRequest("prompt", "prompt must be a list of non-negative integer token ids or a list of such lists")
)

// ids reads a list of token ids whose '[' was consumed; flat says the first
// element was peeked as a non-list.
func (p *jsonReader) ids(where string, flat bool) ([]int64, error) {
	var ids []int64
	var num []byte
	for {
		if id, sep, ok := p.fastID(); ok {
			// The common element, a small integer and its separator, read straight
			// from the buffered bytes (the byte-at-a-time path below was 13% of a
			// request's CPU for a 100-token prompt); the checks are the same.
			if len(ids) == p.maxTokens {
				return nil, p.tooManyIDs(where)
			}
			if ids == nil {
				ids = make([]int64, 0, p.idsHint())
			}
			ids = append(ids, id)
			if sep == ']' {
				return ids, nil
			}
			continue
		}
		c, err := p.ws()
		if err != nil {
			return nil, err
		}
		if c == ']' && len(ids) == 0 {
			return nil, badRequest("prompt", "%s must not be empty", where)
		}
		if c != '-' && (c < '0' || c > '9') {
			if c == '"' && flat {
				return nil, badRequest("prompt", "%s: a list of prompts must be all strings or all lists of token ids", where)
			}
			return nil, errPromptShape
		}
		var integer bool
		if num, integer, err = p.number(c, num[:0]); err != nil {
			return nil, err
		}
		if !integer {
			return nil, errPromptShape
		}
		id, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil {
			return nil, badRequest("prompt", "%s[%d]: token id %s is out of range", where, len(ids), num)
		}
		if id < 0 {
			return nil, badRequest("prompt", "%s[%d]: token id %d is negative", where, len(ids), id)
		}
		if len(ids) == p.maxTokens {
			return nil, p.tooManyIDs(where)
		}
		ids = append(ids, id)
		if c, err = p.ws(); err != nil {
			return nil, err
		}
		if c == ']' {
			return ids, nil
		}
		if c != ',' {
			return nil, p.syntax("expected , or ] in array")
		}
	}
}

// idsHint sizes a prompt's id slice once: the elements up to the first ']' in the
// buffered bytes (exact for a flat prompt that is buffered whole), at least 16.
func (p *jsonReader) idsHint() int {
	b, _ := p.r.Peek(p.r.Buffered())
	if i := bytes.IndexByte(b, ']'); i >= 0 {
		b = b[:i]
	}
	return min(max(bytes.Count(b, []byte{','})+2, 16), p.maxTokens+1)
}

// slowIDsOnly turns fastID off (tests compare the two paths).
var slowIDsOnly bool

func (p *jsonReader) tooManyIDs(where string) error {
	if p.maxTokens < apicore.MaxPromptTokens {
		// No engine could take it: stop here rather than read the rest.
		return badRequest("prompt", "%s has more than %d tokens: longer than the maximum model length of every engine (%d)", where, p.maxTokens, p.maxTokens)
	}
	return badRequest("prompt", "%s has more than %d tokens, the limit", where, apicore.MaxPromptTokens)
}

// fastID reads one array element that is a plain non-negative integer of at most
// 18 digits (no sign, fraction, exponent or leading zero), with the whitespace
// around it and the ',' or ']' after it, when all of it is already buffered and
// nothing is being captured; ok false consumes nothing and leaves it to the
// general path, which also produces every error.
func (p *jsonReader) fastID() (id int64, sep byte, ok bool) {
	if p.buf != nil || slowIDsOnly {
		return 0, 0, false
	}
	b, _ := p.r.Peek(p.r.Buffered())
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		id = id*10 + int64(b[i]-'0')
		i++
	}
	if n := i - start; n == 0 || n > 18 || (n > 1 && b[start] == '0') {
		return 0, 0, false
	}
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	if i >= len(b) || (b[i] != ',' && b[i] != ']') {
		return 0, 0, false
	}
	sep = b[i]
	i++
	if _, err := p.r.Discard(i); err != nil {
		return 0, 0, false
	}
	p.off += int64(i)
	return id, sep, true
}
