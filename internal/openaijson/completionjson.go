package openaijson

// The token-in, token-out completion answers written by hand: encoding/json's
// reflection was the largest CPU and allocation cost of an SSE chunk and of a JSON
// answer. AppendCompletion writes exactly the bytes encoding/json writes for a
// CompletionResponse, and says when it cannot (a string that needs escaping, a
// choice with logprobs, an unusual stop reason): the caller then lets encoding/json
// do it. completionjson_test.go holds it to encoding/json's output.

import (
	"encoding/json"
	"slices"
	"strconv"
)

// CompletionResponse is the non-streaming answer of /v1/completions and, with one
// choice and no usage, each streaming chunk (object "text_completion" in both, as
// vLLM does).
type CompletionResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

// Choice is one completion choice. Text is empty on the token path: switchyard is
// token-in, token-out there, like vLLM with --skip-tokenizer-init.
type Choice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	TokenIDs     []int64 `json:"token_ids"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
	StopReason   any     `json:"stop_reason"`
}

// Usage counts tokens the vLLM way: each prompt once (not once per n), every
// generated token of every choice.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// AppendCompletion appends the JSON of the response {id, model, created, choices,
// usage} (object "text_completion"), as encoding/json.Marshal writes it (with or
// without HTML escaping: plain strings are the same either way); ok is false, with
// dst unchanged, when a value needs encoding/json.
func AppendCompletion(dst []byte, id, model string, created int64, choices []Choice, usage *Usage) (_ []byte, ok bool) {
	if !plainJSON(id) || !plainJSON(model) {
		return dst, false
	}
	start := len(dst)
	dst = append(dst, `{"id":"`...)
	dst = append(dst, id...)
	dst = append(dst, `","object":"text_completion","created":`...)
	dst = strconv.AppendInt(dst, created, 10)
	dst = append(dst, `,"model":"`...)
	dst = append(dst, model...)
	dst = append(dst, `","choices":`...)
	if choices == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range choices {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendChoice(dst, &choices[i]); !ok {
				return dst[:start], false
			}
		}
		dst = append(dst, ']')
	}
	if usage != nil {
		dst = append(dst, `,"usage":{"prompt_tokens":`...)
		dst = strconv.AppendInt(dst, int64(usage.PromptTokens), 10)
		dst = append(dst, `,"completion_tokens":`...)
		dst = strconv.AppendInt(dst, int64(usage.CompletionTokens), 10)
		dst = append(dst, `,"total_tokens":`...)
		dst = strconv.AppendInt(dst, int64(usage.TotalTokens), 10)
		dst = append(dst, '}')
	}
	return append(dst, '}'), true
}

func appendChoice(dst []byte, c *Choice) ([]byte, bool) {
	if c.Logprobs != nil || !plainJSON(c.Text) {
		return dst, false
	}
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(c.Index), 10)
	dst = append(dst, `,"text":"`...)
	dst = append(dst, c.Text...)
	dst = append(dst, `","token_ids":`...)
	if c.TokenIDs == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, t := range c.TokenIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, t, 10)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if c.FinishReason == nil {
		dst = append(dst, "null"...)
	} else {
		if !plainJSON(*c.FinishReason) {
			return dst, false
		}
		dst = append(append(append(dst, '"'), *c.FinishReason...), '"')
	}
	dst = append(dst, `,"stop_reason":`...)
	switch v := c.StopReason.(type) {
	case nil:
		dst = append(dst, "null"...)
	case int64:
		dst = strconv.AppendInt(dst, v, 10)
	case string:
		if !plainJSON(v) {
			return dst, false
		}
		dst = append(append(append(dst, '"'), v...), '"')
	default:
		return dst, false
	}
	return append(dst, '}'), true
}

// plainJSON reports whether s is written verbatim inside JSON quotes by
// encoding/json, HTML escaping on or off: printable ASCII without quote, backslash
// or <, >, &.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// MarshalCompletion is the fallback: encoding/json of the same response, with
// HTML escaping as json.Marshal does it (SSE chunks) or without (a JSON answer,
// as an Encoder with SetEscapeHTML(false) writes it, minus its newline).
func MarshalCompletion(dst []byte, id, model string, created int64, choices []Choice, usage *Usage, escapeHTML bool) []byte {
	v := &CompletionResponse{ID: id, Object: "text_completion", Created: created, Model: model,
		Choices: slices.Clone(choices), Usage: usage}
	if escapeHTML {
		b, _ := json.Marshal(v)
		return append(dst, b...)
	}
	w := sliceWriter{dst}
	enc := json.NewEncoder(&w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return w.b[:len(w.b)-1] // Encode's newline
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
