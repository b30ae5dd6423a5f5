package httpapi

// The request fields that need text (stop strings, echo, logprobs, structured
// outputs...), checked and translated as vLLM's protocol.py does when serve has a
// tokenizer.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/textgen"
	"github.com/switchyard-llm/switchyard/wire"
)

// validateText is Validate for serve with a tokenizer: the sampling rules, then
// the text fields parsed (stop) or refused where switchyard does not do them.
func (r *CompletionRequest) validateText() error {
	if err := r.validateSampling(); err != nil {
		return err
	}
	stop, err := parseStop(r.Stop)
	if err != nil {
		return err
	}
	r.stop = stop
	if r.Logprobs != nil && *r.Logprobs < 0 && *r.Logprobs != -1 {
		return badRequest("logprobs", "logprobs must be a non-negative integer or -1, got %d", *r.Logprobs)
	}
	if r.PromptLogprobs != nil && *r.PromptLogprobs < 0 && *r.PromptLogprobs != -1 {
		return badRequest("prompt_logprobs", "prompt_logprobs must be a non-negative integer or -1, got %d", *r.PromptLogprobs)
	}
	if r.Echo && r.Logprobs != nil && r.PromptLogprobs == nil {
		// vLLM answers echo with logprobs from the prompt's logprobs.
		n := *r.Logprobs
		r.PromptLogprobs = &n
	}
	if r.BestOf != nil && *r.BestOf != r.Choices() {
		return badRequest("best_of", "best_of is not supported (it must equal n)")
	}
	if r.Suffix != nil && *r.Suffix != "" {
		return badRequest("suffix", "suffix is not supported")
	}
	r.structured, err = r.structuredOutputs()
	return err
}

// parseStop reads stop: null, a string or a list of strings. An empty stop string
// would match at once, and vLLM's SamplingParams refuses it; so do we.
func parseStop(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var list []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("stop", "stop: expected a string or a list of strings")
	}
	if len(list) > MaxStopStrings {
		return nil, badRequest("stop", "stop has %d strings, more than the limit of %d", len(list), MaxStopStrings)
	}
	total := 0
	for _, s := range list {
		if s == "" {
			return nil, badRequest("stop", "stop cannot contain an empty string.")
		}
		total += len(s)
	}
	if total > MaxStopBytes {
		return nil, badRequest("stop", "stop strings total %d bytes, more than the limit of %d", total, MaxStopBytes)
	}
	return list, nil
}

// Bounds on a request's stop strings. vLLM has none, but every stop string is
// searched for after every step of every choice, and the longest one sets how much
// streamed text is held back: without a bound one body could buy seconds of CPU.
const (
	MaxStopStrings = 256
	MaxStopBytes   = 16 << 10
)

// structuredOutputs builds the engine's structured_outputs map as vLLM's
// protocol fills SamplingParams.structured_outputs: response_format
// (json_schema, json_object, structural_tag), the structured_outputs object, or
// the older guided_* fields. The backend is vLLM's auto choice made up front
// (xgrammar), because the engine reads _backend and does not choose one itself.
func (r *CompletionRequest) structuredOutputs() ([]byte, error) {
	type kv struct {
		k string
		v any // a Go value or json.RawMessage (encoded in key order)
	}
	var fields []kv
	if so := bytes.TrimSpace(r.StructuredOutputs); len(so) > 0 && !bytes.Equal(so, []byte("null")) {
		var keys []string
		m := map[string]json.RawMessage{}
		if err := json.Unmarshal(so, &m); err != nil {
			return nil, badRequest("structured_outputs", "structured_outputs: expected an object")
		}
		keys, _ = objectKeys(so)
		for _, k := range keys {
			fields = append(fields, kv{k, m[k]})
		}
	}
	if len(fields) == 0 {
		switch {
		case len(bytes.TrimSpace(r.GuidedJSON)) > 0 && !bytes.Equal(bytes.TrimSpace(r.GuidedJSON), []byte("null")):
			fields = append(fields, kv{"json", r.GuidedJSON})
		case r.GuidedRegex != nil:
			fields = append(fields, kv{"regex", *r.GuidedRegex})
		case r.GuidedChoice != nil:
			fields = append(fields, kv{"choice", r.GuidedChoice})
		case r.GuidedGrammar != nil:
			fields = append(fields, kv{"grammar", *r.GuidedGrammar})
		}
		if len(fields) > 0 && r.GuidedWhitespacePattern != nil {
			fields = append(fields, kv{"whitespace_pattern", *r.GuidedWhitespacePattern})
		}
	}
	if rf := bytes.TrimSpace(r.ResponseFormat); len(fields) == 0 && len(rf) > 0 && !bytes.Equal(rf, []byte("null")) {
		var f struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(rf, &f); err != nil {
			return nil, badRequest("response_format", "response_format: %v", err)
		}
		switch f.Type {
		case "text":
		case "json_object":
			fields = append(fields, kv{"json_object", true})
		case "json_schema":
			if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
				return nil, badRequest("response_format", "response_format: json_schema must be provided when type is json_schema")
			}
			fields = append(fields, kv{"json", f.JSONSchema.Schema})
		case "structural_tag":
			fields = append(fields, kv{"structural_tag", string(rf)})
		default:
			return nil, badRequest("response_format", "response_format.type must be text, json_object, json_schema or structural_tag, got %q", f.Type)
		}
	}
	if len(fields) == 0 {
		return nil, nil
	}
	hasBackend := false
	for _, f := range fields {
		hasBackend = hasBackend || f.k == "_backend"
	}
	if !hasBackend {
		fields = append(fields, kv{"_backend", "xgrammar"}, kv{"_backend_was_auto", true})
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(len(fields)); err != nil {
		return nil, err
	}
	for _, f := range fields {
		if err := enc.EncodeString(f.k); err != nil {
			return nil, err
		}
		var err error
		if raw, ok := f.v.(json.RawMessage); ok {
			err = jsonToMsgpack(enc, json.NewDecoder(bytes.NewReader(raw)))
		} else {
			err = enc.Encode(f.v)
		}
		if err != nil {
			return nil, badRequest("structured_outputs", "structured_outputs.%s: %v", f.k, err)
		}
	}
	return buf.Bytes(), nil
}

// objectKeys lists an object's keys in order (Python dicts keep it; for a JSON
// schema the order of properties is the order the model writes them in).
func objectKeys(raw []byte) ([]string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	var keys []string
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// jsonToMsgpack re-encodes one JSON value in order, integers as integers (as
// Python's json module reads them).
func jsonToMsgpack(enc *msgpack.Encoder, d *json.Decoder) error {
	d.UseNumber()
	t, err := d.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty value")
		}
		return err
	}
	switch v := t.(type) {
	case json.Delim:
		var items []json.RawMessage
		var keys []string
		obj := v == '{'
		for d.More() {
			if obj {
				k, err := d.Token()
				if err != nil {
					return err
				}
				keys = append(keys, k.(string))
			}
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return err
			}
			items = append(items, raw)
		}
		if _, err := d.Token(); err != nil {
			return err
		}
		if obj {
			if err := enc.EncodeMapLen(len(items)); err != nil {
				return err
			}
		} else if err := enc.EncodeArrayLen(len(items)); err != nil {
			return err
		}
		for i, raw := range items {
			if obj {
				if err := enc.EncodeString(keys[i]); err != nil {
					return err
				}
			}
			if err := jsonToMsgpack(enc, json.NewDecoder(bytes.NewReader(raw))); err != nil {
				return err
			}
		}
		return nil
	case json.Number:
		if i, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
			return enc.EncodeInt(i)
		}
		f, err := v.Float64()
		if err != nil {
			return err
		}
		return enc.EncodeFloat64(f)
	case string:
		return enc.EncodeString(v)
	case bool:
		return enc.EncodeBool(v)
	case nil:
		return enc.EncodeNil()
	}
	return fmt.Errorf("unexpected JSON token %v", t)
}

// textParams are the text core's parameters of a request.
func (r *CompletionRequest) textParams() textgen.Params {
	p := textgen.Params{Stop: r.stop, IncludeStopStrInOutput: r.IncludeStopStrInOutput, MinTokens: r.MinTokens,
		SkipSpecialTokens: true, SpacesBetweenSpecialTokens: true}
	if r.SkipSpecialTokens != nil {
		p.SkipSpecialTokens = *r.SkipSpecialTokens
	}
	if r.SpacesBetweenSpecialTokens != nil {
		p.SpacesBetweenSpecialTokens = *r.SpacesBetweenSpecialTokens
	}
	return p
}

// setText fills the text fields of the engine's sampling parameters as vLLM's
// frontend sends them: the engine ignores stop strings and detokenization (the
// frontend does both) but gets logprobs and structured outputs.
func (r *CompletionRequest) setText(sp *wire.SamplingParams) {
	p := r.textParams()
	sp.Detokenize = true
	sp.Stop = append([]string(nil), r.stop...)
	sp.IncludeStopStrInOutput = p.IncludeStopStrInOutput
	sp.SkipSpecialTokens = p.SkipSpecialTokens
	sp.SpacesBetweenSpecialTokens = p.SpacesBetweenSpecialTokens
	if r.Logprobs != nil {
		sp.Logprobs = wire.SomeInt(*r.Logprobs)
	}
	if r.PromptLogprobs != nil {
		sp.PromptLogprobs = wire.SomeInt(*r.PromptLogprobs)
	}
	if r.structured != nil {
		sp.StructuredOutputs = wire.Raw(r.structured)
	}
}

// applyDefaults fills the sampling fields a request left out from the model's
// generation config, as vLLM's default --generation-config auto does.
func (r *CompletionRequest) applyDefaults(d map[string]float64) {
	setF := func(dst **float64, k string) {
		if v, ok := d[k]; ok && *dst == nil {
			*dst = &v
		}
	}
	setF(&r.Temperature, "temperature")
	setF(&r.TopP, "top_p")
	setF(&r.MinP, "min_p")
	setF(&r.RepetitionPenalty, "repetition_penalty")
	if v, ok := d["top_k"]; ok && r.TopK == nil {
		k := int64(v)
		r.TopK = &k
	}
}
