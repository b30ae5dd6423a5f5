package server

// The streaming half of readCompletion: the prompt's token ids, parsed as they
// arrive so a body never costs more than MaxPromptTokens ids, and the table of the
// fields matched by their exact names.

import (
	"fmt"
	"strconv"
)

// prompt parses the prompt value as it streams in: a list of token ids or a list
// of such lists. It stops at the first id past p.maxTokens (MaxPromptTokens, or
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
		return errTextPrompt
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
		return errTextPrompt
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

var (
	errTextPrompt  = badRequest("prompt", "prompt must be token ids (a list of integers or a list of such lists); switchyard does not tokenize text")
	errPromptShape = badRequest("prompt", "prompt must be a list of non-negative integer token ids or a list of such lists")
)

// ids reads a list of token ids whose '[' was consumed; flat says the first
// element was peeked as a non-list.
func (p *jsonReader) ids(where string, flat bool) ([]int64, error) {
	var ids []int64
	var num []byte
	for {
		c, err := p.ws()
		if err != nil {
			return nil, err
		}
		if c == ']' && len(ids) == 0 {
			return nil, badRequest("prompt", "%s must not be empty", where)
		}
		if c != '-' && (c < '0' || c > '9') {
			if c == '"' && flat {
				return nil, errTextPrompt
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
			if p.maxTokens < MaxPromptTokens {
				// No engine could take it: stop here rather than read the rest.
				return nil, badRequest("prompt", "%s has more than %d tokens: longer than the maximum model length of every engine (%d)", where, p.maxTokens, p.maxTokens)
			}
			return nil, badRequest("prompt", "%s has more than %d tokens, the limit", where, MaxPromptTokens)
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
	}
	return nil
}
