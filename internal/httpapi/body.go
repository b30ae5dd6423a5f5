package httpapi

// The request bodies' decoding, through internal/openaijson (its doc.go: exact
// field names, bounded nesting and field sizes, the prompt streamed and cut at a
// token limit): the completions body, the chat and tokenizer bodies, the table of
// the completions fields, and the decoder's errors as 400s.

import (
	"bytes"
	"errors"
	"io"
	"reflect"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/openaijson"
)

// The JSON shapes the codec owns, under the names this package's API uses.
type (
	CompletionResponse = openaijson.CompletionResponse
	Choice             = openaijson.Choice
	Usage              = openaijson.Usage
	StreamOptions      = openaijson.StreamOptions
)

// bodyDecoder knows the names of every body's fields (the chat body embeds the
// completions one), so a known member's name costs no allocation.
var bodyDecoder = openaijson.NewDecoder(MaxChoices, reflect.TypeFor[ChatRequest]())

// ParseCompletion decodes a request body (see readCompletion): exact field names,
// the field at fault named for a value of the wrong JSON type, trailing garbage
// refused.
func ParseCompletion(body []byte) (*CompletionRequest, error) {
	return readCompletion(bytes.NewReader(body), apicore.MaxPromptTokens)
}

// readCompletion decodes one completions body from r: exactly one JSON object,
// fields matched by their exact names (a repeated name: the last wins, as in
// Python), unknown fields skipped, the prompt parsed as it streams in and cut at
// maxTokens ids (at most apicore.MaxPromptTokens; 0 = apicore.MaxPromptTokens).
func readCompletion(r io.Reader, maxTokens int) (*CompletionRequest, error) {
	req := &CompletionRequest{}
	if err := readObject(r, maxTokens, req, req); err != nil {
		return nil, err
	}
	return req, nil
}

// bodyFields is a request body type: field names where a known member decodes
// to (nil: unknown, skipped).
type bodyFields interface {
	field(key string) any
}

// readObject reads a body that must be one JSON object into fields. With prompt
// set, its "prompt" member is parsed as it streams in, cut at maxTokens ids. A
// client's fault is an *APIError (400); a read error (too large, timed out) is
// returned as is for the handler to map.
func readObject(r io.Reader, maxTokens int, fields bodyFields, prompt *CompletionRequest) error {
	var pr *openaijson.Prompt
	if prompt != nil {
		pr = &openaijson.Prompt{MaxTokens: maxTokens}
	}
	if err := bodyDecoder.Decode(r, fields.field, pr); err != nil {
		var fe *openaijson.Error
		if errors.As(err, &fe) {
			return badRequest(fe.Param, "%s", fe.Message)
		}
		return err
	}
	if prompt != nil {
		prompt.prompts, prompt.textPrompts = pr.IDs, pr.Texts
	}
	return nil
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
