package apicore

// What vLLM's Python frontend reads from the model's configuration before it sends a
// request, given to serve as flags because switchyard has no model config: the EOS
// ids (update_from_generation_config), the vocabulary size (the input processor's
// and SamplingParams.verify's token-id bounds) and max_logprobs. Both protocols
// apply the same rules, so a value refused on one is refused on the other.

import (
	"fmt"
	"slices"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

// DefaultMaxLogprobs is vLLM's ModelConfig.max_logprobs default.
const DefaultMaxLogprobs = 20

// ModelRules holds what serve knows of the model. The zero value checks nothing
// beyond wire's rules and sends every request with ignore_eos.
type ModelRules struct {
	// EOSTokenIDs are the model's EOS ids: the first is the primary
	// (_eos_token_id), the others are the generation config's further EOS ids,
	// which join stop_token_ids (unless ignore_eos) and _all_stop_token_ids. Empty:
	// requests go out with ignore_eos.
	EOSTokenIDs []int64
	// VocabSize bounds every token id a request carries (prompt, stop_token_ids,
	// allowed_token_ids, logit_bias keys, bad words ids): an id >= VocabSize would
	// index the engine's logits past their end. 0 = unchecked.
	VocabSize int64
	// MaxLogprobs caps logprobs and prompt_logprobs (-1 in a request means the
	// whole vocabulary). -1 = no cap.
	MaxLogprobs int64
}

// DefaultModelRules: no EOS, no vocabulary bound, vLLM's max_logprobs.
func DefaultModelRules() ModelRules { return ModelRules{MaxLogprobs: DefaultMaxLogprobs} }

// primaryEOS is the EOS sent as _eos_token_id, if any.
func (m ModelRules) PrimaryEOS() wire.OptInt {
	if len(m.EOSTokenIDs) == 0 {
		return wire.OptInt{}
	}
	return wire.SomeInt(m.EOSTokenIDs[0])
}

// setEOS does update_from_generation_config for a request we complete: the primary
// EOS and the further ones through SetEOS, or ignore_eos when no EOS is known (the
// engine needs one or the other, and without an EOS there is none to stop on).
func (m ModelRules) SetEOS(sp *wire.SamplingParams) {
	if len(m.EOSTokenIDs) == 0 {
		sp.IgnoreEOS = true
		return
	}
	sp.SetEOS(m.PrimaryEOS(), m.EOSTokenIDs[1:]...)
}

// validate checks the configuration; flag names the flags in the error.
func (m ModelRules) Validate() error {
	for _, id := range m.EOSTokenIDs {
		if id < 0 {
			return fmt.Errorf("--eos-token-id: ids must not be negative, got %d", id)
		}
		if m.VocabSize > 0 && id >= m.VocabSize {
			return fmt.Errorf("--eos-token-id: id %d is outside --vocab-size %d", id, m.VocabSize)
		}
	}
	if m.VocabSize < 0 {
		return fmt.Errorf("--vocab-size: must not be negative, got %d", m.VocabSize)
	}
	if m.MaxLogprobs < -1 {
		return fmt.Errorf("--max-logprobs: must be -1 (no cap) or >= 0, got %d", m.MaxLogprobs)
	}
	return nil
}

// check refuses what the model's configuration rules out, as vLLM's frontend does
// before sending: token ids outside the vocabulary (the input processor and
// SamplingParams.verify; out of range, an id indexes the logits tensor on the GPU)
// and more logprobs than max_logprobs. The error is a *wire.ValidationError naming
// the field, so both protocols report it like their other validation errors.
func (m ModelRules) Check(q *wire.EngineCoreRequest) error {
	if m.VocabSize > 0 {
		if err := m.CheckVocab(q); err != nil {
			return err
		}
	}
	p := q.Sampling
	if p == nil || m.MaxLogprobs < 0 {
		return nil
	}
	for _, f := range [...]struct {
		name string
		v    wire.OptInt
	}{{"logprobs", p.Logprobs}, {"prompt_logprobs", p.PromptLogprobs}} {
		if !f.v.Valid {
			continue
		}
		n := f.v.Value
		if n == -1 { // the whole vocabulary
			if m.VocabSize == 0 {
				return &wire.ValidationError{Field: "sampling_params." + f.name, Msg: fmt.Sprintf(
					"-1 (the whole vocabulary) is greater than max allowed: %d", m.MaxLogprobs)}
			}
			n = m.VocabSize
		}
		if n > m.MaxLogprobs {
			return &wire.ValidationError{Field: "sampling_params." + f.name, Msg: fmt.Sprintf(
				"requested %d, which is greater than max allowed: %d", n, m.MaxLogprobs)}
		}
	}
	return nil
}

func (m ModelRules) CheckVocab(q *wire.EngineCoreRequest) error {
	out := func(id int64) bool { return id >= m.VocabSize }
	bad := func(field string, id int64) error {
		return &wire.ValidationError{Field: field, Msg: fmt.Sprintf("token id %d is out of vocabulary (vocab size %d)", id, m.VocabSize)}
	}
	if i := slices.IndexFunc(q.PromptTokenIDs, out); i >= 0 {
		return bad("prompt_token_ids", q.PromptTokenIDs[i])
	}
	p := q.Sampling
	if p == nil {
		return nil
	}
	for _, f := range [...]struct {
		name string
		ids  []int64
	}{
		{"stop_token_ids", p.StopTokenIDs}, {"allowed_token_ids", p.AllowedTokenIDs},
		{"logprob_token_ids", p.LogprobTokenIDs}, {"prompt_logprob_token_ids", p.PromptLogprobTokenIDs},
		{"trace_decode_token_ids", p.TraceDecodeTokenIDs},
	} {
		if i := slices.IndexFunc(f.ids, out); i >= 0 {
			return bad("sampling_params."+f.name, f.ids[i])
		}
	}
	if len(p.LogitBias) > 0 {
		var bias map[int64]float64
		if err := msgpack.Unmarshal(p.LogitBias, &bias); err != nil {
			return &wire.ValidationError{Field: "sampling_params.logit_bias", Msg: "must map token ids to floats: " + err.Error()}
		}
		for id := range bias {
			if id < 0 || out(id) {
				return bad("sampling_params.logit_bias", id)
			}
		}
	}
	if len(p.BadWordsTokenIDs) > 0 {
		var words [][]int64
		if err := msgpack.Unmarshal(p.BadWordsTokenIDs, &words); err != nil {
			return &wire.ValidationError{Field: "sampling_params._bad_words_token_ids", Msg: "must be lists of token ids: " + err.Error()}
		}
		for _, w := range words {
			if i := slices.IndexFunc(w, out); i >= 0 {
				return bad("sampling_params._bad_words_token_ids", w[i])
			}
		}
	}
	return nil
}
