package wire

// PoolingParams: vLLM's pooling_params (vllm/pooling_params.py), an array_like
// msgspec struct whose fields moved in almost every release (normalize, softmax and
// activation merged into use_activation; truncate_prompt_tokens left it; task,
// skip_reading_prefix_cache and late_interaction_params came). switchyard keeps one
// layout-independent form and writes it in the field order of the engine's release
// (the layout's structs.PoolingParams), so a pooling request can go to any engine
// whose release is known, as SamplingParams can.

import (
	"fmt"
	"slices"
	"unicode/utf8"
)

// PoolingParams is what a frontend sets in vLLM's PoolingParams, independent of
// the release. The zero value of every field means "not set" (None), except Task,
// which the engine requires.
type PoolingParams struct {
	// Task is vLLM's pooling task name: "embed", "classify", "score",
	// "token_embed", "token_classify", or the older "encode". The engine's
	// PoolingTask Literal refuses any other value while decoding, so only a task
	// the engine reported (get_supported_tasks) may be sent.
	Task string
	// Dimensions is the matryoshka output size (embed, token_embed).
	Dimensions OptInt
	// Activation is the release's post-processing switch for Task: normalize for
	// embed/token_embed in releases that have normalize, else use_activation; in
	// releases without use_activation, activation (classify, score) or softmax
	// (encode). vLLM's frontend defaults it to true before sending; so must ours.
	Activation OptBool
	// TruncatePromptTokens is written to releases that carry it; the frontend
	// truncates the prompt itself, so a release without the field loses nothing.
	TruncatePromptTokens OptInt
	StepTagID            OptInt
	ReturnedTokenIDs     []int64
	// SkipReadingPrefixCache: true for token_embed/token_classify in vLLM's
	// frontend (their output needs every prompt position computed).
	SkipReadingPrefixCache OptBool
	// CompressedTokenTypeIDs is a cross-encoder pair's type-id split, the index of
	// its first type-1 token, for models with token type embeddings (BERT): vLLM's
	// frontend sends it as extra_kwargs {"compressed_token_type_ids": K}.
	CompressedTokenTypeIDs OptInt
}

// PoolingParams field ids.
const (
	poolUnknown uint8 = iota
	poolTruncate
	poolDimensions
	poolNormalize
	poolSoftmax
	poolActivation
	poolUseActivation
	poolStepTagID
	poolReturnedTokenIDs
	poolTask
	poolRequiresTokenIDs
	poolSkipReadingPrefixCache
	poolExtraKwargs
	poolOutputKind
	poolFieldCount
)

var poolingFieldNames = [poolFieldCount]string{
	"", "truncate_prompt_tokens", "dimensions", "normalize", "softmax", "activation",
	"use_activation", "step_tag_id", "returned_token_ids", "task", "requires_token_ids",
	"skip_reading_prefix_cache", "extra_kwargs", "output_kind",
}

var poolingFieldIDs = idsOf(poolingFieldNames[:])

// outputKindFinalOnly is RequestOutputKind.FINAL_ONLY, the only value PoolingParams'
// __post_init__ accepts (and its default).
const outputKindFinalOnly = 2

// embedTask reports whether task's knob is normalize in releases that have it.
func embedTask(task string) bool { return task == "embed" || task == "token_embed" }

// HasPooling reports whether the layout knows PoolingParams' fields, that is,
// whether pooling requests can be sent to its engines.
func (l *Layout) HasPooling() bool { return l.pooling != nil }

// poolingValue returns what p puts in the field with id for layout l, and whether
// it differs from vLLM's default there (so must be written).
func (l *Layout) poolingValue(b []byte, p *PoolingParams, id uint8) ([]byte, bool) {
	switch id {
	case poolTruncate:
		return appendOptInt(b, p.TruncatePromptTokens), p.TruncatePromptTokens.Valid
	case poolDimensions:
		return appendOptInt(b, p.Dimensions), p.Dimensions.Valid
	case poolNormalize, poolUseActivation, poolActivation, poolSoftmax:
		if !p.Activation.Valid || !l.carriesActivation(p.Task, id) {
			return appendNil(b), false
		}
		return appendOptBool(b, p.Activation), true
	case poolStepTagID:
		return appendOptInt(b, p.StepTagID), p.StepTagID.Valid
	case poolReturnedTokenIDs:
		if p.ReturnedTokenIDs == nil {
			return appendNil(b), false
		}
		return appendInts(b, p.ReturnedTokenIDs), true
	case poolTask:
		return appendStr(b, p.Task), true
	case poolRequiresTokenIDs:
		return appendBool(b, false), false // the engine's model runner sets it
	case poolSkipReadingPrefixCache:
		return appendOptBool(b, p.SkipReadingPrefixCache), p.SkipReadingPrefixCache.Valid
	case poolOutputKind:
		return appendInt(b, outputKindFinalOnly), false
	case poolExtraKwargs:
		if !p.CompressedTokenTypeIDs.Valid {
			return appendNil(b), false
		}
		b = appendStr(appendMapHeader(b, 1), compressedTypeIDsKey)
		return appendInt(b, p.CompressedTokenTypeIDs.Value), true
	}
	return b, false
}

// compressedTypeIDsKey is the extra_kwargs key vLLM's model runner reads the split from.
const compressedTypeIDsKey = "compressed_token_type_ids"

// carriesActivation reports whether field id gets Activation for task. The releases
// that have both normalize and use_activation (v0.12, v0.15) saw their embedding heads move
// from reading the first to the second (vLLM's "Replace PoolingParams.normalize with
// use_activation"); an embedding task sets both there, so either reading is right.
func (l *Layout) carriesActivation(task string, id uint8) bool {
	if id == l.activationField(task) {
		return true
	}
	return id == poolUseActivation && embedTask(task) && l.poolHas&(1<<poolUseActivation) != 0
}

// activationField is the field that carries Activation for task in l (0: none).
func (l *Layout) activationField(task string) uint8 {
	has := func(id uint8) bool { return l.poolHas&(1<<id) != 0 }
	switch {
	case embedTask(task) && has(poolNormalize):
		return poolNormalize
	case has(poolUseActivation):
		return poolUseActivation
	case (task == "classify" || task == "score") && has(poolActivation):
		return poolActivation
	case task == "encode" && has(poolSoftmax):
		return poolSoftmax
	}
	return 0
}

// appendPooling writes p in l's PoolingParams order. Trailing fields left at vLLM's
// default are not written (msgspec gives a shorter array its defaults), so only the
// fields up to the last one set must be known exactly. A set field l has no place
// for is a *LayoutError: the engine would run another request than the one asked.
func (l *Layout) appendPooling(dst []byte, p *PoolingParams) ([]byte, error) {
	if l.pooling == nil {
		return dst, &LayoutError{Layout: l.Name, Field: "pooling_params", Msg: "PoolingParams' fields are not known for this vLLM release; load a layout file generated from its classes"}
	}
	if p.Task == "" {
		return dst, &EncodeError{Type: "PoolingParams", Field: "task", Msg: "no task (the engine asserts one is set)"}
	}
	if err := l.poolingFits(p); err != nil {
		return dst, err
	}
	last := -1
	var scratch [16]byte
	for i, s := range l.pooling {
		if _, set := l.poolingValue(scratch[:0], p, s.id); set {
			last = i
		}
	}
	b := appendArrayHeader(dst, last+1)
	for _, s := range l.pooling[:last+1] {
		if s.id == poolUnknown {
			b = append(b, s.def...)
			continue
		}
		b, _ = l.poolingValue(b, p, s.id)
	}
	return b, nil
}

// poolingFits refuses a set field the layout lacks. truncate_prompt_tokens is only
// informative (the frontend truncated already) and skip_reading_prefix_cache false is
// what a release without it does anyway.
func (l *Layout) poolingFits(p *PoolingParams) error {
	miss := func(f string) error {
		return &LayoutError{Layout: l.Name, Field: "pooling_params." + f, Msg: "engines of this vLLM release have no such field"}
	}
	has := func(id uint8) bool { return l.poolHas&(1<<id) != 0 }
	switch {
	case !has(poolTask):
		return miss("task")
	case p.Dimensions.Valid && !has(poolDimensions):
		return miss("dimensions")
	case p.Activation.Valid && l.activationField(p.Task) == 0:
		return miss(fmt.Sprintf("activation for task %q", p.Task))
	case p.StepTagID.Valid && !has(poolStepTagID):
		return miss("step_tag_id")
	case p.ReturnedTokenIDs != nil && !has(poolReturnedTokenIDs):
		return miss("returned_token_ids")
	case p.SkipReadingPrefixCache.Valid && p.SkipReadingPrefixCache.Value && !has(poolSkipReadingPrefixCache):
		return miss("skip_reading_prefix_cache")
	case p.CompressedTokenTypeIDs.Valid && !has(poolExtraKwargs):
		return miss("extra_kwargs")
	}
	return nil
}

// DecodePooling reads a pooling_params array written in l's order (the mock
// engine's side, and tests). Unknown fields are skipped; Activation is read from the
// field that carries it for the decoded task.
func (l *Layout) DecodePooling(raw Raw) (*PoolingParams, error) {
	const typ = "PoolingParams"
	if l.pooling == nil {
		return nil, &DecodeError{Type: typ, Msg: "layout " + l.Name + " does not know PoolingParams"}
	}
	r := &reader{b: raw}
	n, err := r.arrayHeader()
	if err != nil {
		return nil, fieldErr(err, typ, "")
	}
	p := new(PoolingParams)
	acts := make(map[uint8]OptBool, 2)
	for i := 0; i < n; i++ {
		if i >= len(l.pooling) {
			if err := r.skip(); err != nil {
				return nil, fieldErr(err, typ, "")
			}
			continue
		}
		id := l.pooling[i].id
		switch id {
		case poolTruncate:
			p.TruncatePromptTokens, err = r.optInt()
		case poolDimensions:
			p.Dimensions, err = r.optInt()
		case poolNormalize, poolSoftmax, poolActivation, poolUseActivation:
			var v OptBool
			v, err = r.optBool()
			acts[id] = v
		case poolStepTagID:
			p.StepTagID, err = r.optInt()
		case poolReturnedTokenIDs:
			p.ReturnedTokenIDs, err = r.optInts()
		case poolTask:
			var s OptString
			s, err = r.optStr()
			p.Task = s.Value
		case poolSkipReadingPrefixCache:
			p.SkipReadingPrefixCache, err = r.optBool()
		case poolExtraKwargs:
			p.CompressedTokenTypeIDs, err = r.extraKwargsSplit()
		case poolOutputKind:
			var k int64
			if k, err = r.int(); err == nil && k != outputKindFinalOnly {
				err = r.errorf("output_kind must be FINAL_ONLY for pooling")
			}
		default:
			err = r.skip()
		}
		if err != nil {
			return nil, fieldErr(err, typ, poolingFieldNames[id])
		}
	}
	if !r.done() {
		return nil, &DecodeError{Type: typ, Offset: r.off, Msg: "trailing bytes"}
	}
	p.Activation = acts[l.activationField(p.Task)]
	return p, nil
}

// engineAccepts is what the engine's decode refuses: a task that is not a str
// (the Literal itself is checked against the engine's reported tasks by the
// frontend), truncate_prompt_tokens below -1 (msgspec.Meta(ge=-1)), and negative
// ids where list[int] holds token ids the pooler indexes with.
func (p *PoolingParams) engineAccepts() error {
	switch {
	case p.Task == "" || !utf8.ValidString(p.Task):
		return invalid("task", "must be a pooling task name")
	case p.TruncatePromptTokens.Valid && p.TruncatePromptTokens.Value < -1:
		return invalid("truncate_prompt_tokens", "must be >= -1")
	case p.Dimensions.Valid && p.Dimensions.Value < 1:
		return invalid("dimensions", "must be greater than 0")
	case slices.ContainsFunc(p.ReturnedTokenIDs, func(id int64) bool { return id < 0 }):
		return invalid("returned_token_ids", "token ids must be non-negative")
	}
	return nil
}

// extraKwargsSplit reads extra_kwargs (a map or nil) for compressed_token_type_ids,
// skipping any other key.
func (r *reader) extraKwargsSplit() (OptInt, error) {
	var v OptInt
	if r.nextNil() {
		return v, nil
	}
	n, err := r.mapHeader()
	for i := 0; err == nil && i < n; i++ {
		var k string
		if k, err = r.str(); err != nil {
			break
		}
		if k == compressedTypeIDsKey {
			v, err = r.optInt()
		} else {
			err = r.skip()
		}
	}
	return v, err
}
