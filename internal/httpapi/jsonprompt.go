package httpapi

// The streaming half of readCompletion: the prompt's token ids, parsed as they
// arrive so a body never costs more than apicore.MaxPromptTokens ids, and the table of the
// fields matched by their exact names.

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
func (p *jsonReader) prompt(req *CompletionRequest) error {
	req.prompts = nil
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
		req.textPrompts = []string{s}
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
		req.prompts = [][]int64{ids}
		return nil
	}
	for i := 0; ; i++ {
		if c, err := p.ws(); err != nil {
			return err
		} else if c != '[' {
			return errPromptShape
		}
		if len(req.prompts) >= MaxChoices {
			return badRequest("prompt", "more than %d prompts (n times the number of prompts is limited to %d)", MaxChoices, MaxChoices)
		}
		ids, err := p.ids(fmt.Sprintf("prompt[%d]", i), false)
		if err != nil {
			return err
		}
		req.prompts = append(req.prompts, ids)
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
func (p *jsonReader) textList(req *CompletionRequest) error {
	for i := 0; ; i++ {
		where := fmt.Sprintf("prompt[%d]", i)
		if c, err := p.ws(); err != nil {
			return err
		} else if c != '"' {
			return badRequest("prompt", "%s: a list of prompts must be all strings or all lists of token ids", where)
		}
		if len(req.textPrompts) >= MaxChoices {
			return badRequest("prompt", "more than %d prompts (n times the number of prompts is limited to %d)", MaxChoices, MaxChoices)
		}
		s, err := p.text(where)
		if err != nil {
			return err
		}
		req.textPrompts = append(req.textPrompts, s)
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

// field returns a pointer to the field named key (exactly), or nil.
func (r *CompletionRequest) field(key string) any {
	switch key {
	case "model":
		return &r.Model
	case "max_tokens":
		return &r.MaxTokens
	case "temperature":
		return &r.Temperature
	case "top_p":
		return &r.TopP
	case "top_k":
		return &r.TopK
	case "min_p":
		return &r.MinP
	case "seed":
		return &r.Seed
	case "stop_token_ids":
		return &r.StopTokenIDs
	case "ignore_eos":
		return &r.IgnoreEOS
	case "min_tokens":
		return &r.MinTokens
	case "priority":
		return &r.Priority
	case "stream":
		return &r.Stream
	case "stream_options":
		return &r.StreamOptions
	case "n":
		return &r.N
	case "presence_penalty":
		return &r.PresencePenalty
	case "frequency_penalty":
		return &r.FrequencyPenalty
	case "repetition_penalty":
		return &r.RepetitionPenalty
	case "cache_salt":
		return &r.CacheSalt
	case "request_id":
		return &r.RequestID
	case "stop":
		return &r.Stop
	case "echo":
		return &r.Echo
	case "logprobs":
		return &r.Logprobs
	case "best_of":
		return &r.BestOf
	case "suffix":
		return &r.Suffix
	case "include_stop_str_in_output":
		return &r.IncludeStopStrInOutput
	case "skip_special_tokens":
		return &r.SkipSpecialTokens
	case "spaces_between_special_tokens":
		return &r.SpacesBetweenSpecialTokens
	case "return_token_ids":
		return &r.ReturnTokenIDs
	case "add_special_tokens":
		return &r.AddSpecialTokens
	case "prompt_logprobs":
		return &r.PromptLogprobs
	case "response_format":
		return &r.ResponseFormat
	case "structured_outputs":
		return &r.StructuredOutputs
	case "guided_json":
		return &r.GuidedJSON
	case "guided_regex":
		return &r.GuidedRegex
	case "guided_choice":
		return &r.GuidedChoice
	case "guided_grammar":
		return &r.GuidedGrammar
	case "guided_whitespace_pattern":
		return &r.GuidedWhitespacePattern
	}
	return nil
}
