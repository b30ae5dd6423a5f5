package mockengine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// ErrDuplicateRequest: an ADD reused the id of a live request. A real engine's
// scheduler asserts on this in its busy loop and dies with ENGINE_CORE_DEAD.
var ErrDuplicateRequest = errors.New("mockengine: duplicate request id")

// The token stream is a deterministic function of the whole sequence so far: the
// next token follows from the prompt and every token generated before it, never from
// the request id. A request resubmitted elsewhere with prompt = its original prompt
// plus the tokens it already produced (a migration) therefore continues exactly as
// if it had never moved, like greedy decoding on a real model. Values lie in
// [100, 30100), so tests can pick EOS or stop ids that do or do not occur.
//
// The sequence is folded into a running hash, one token at a time (seqHash); the
// next token is drawn from the hash (tokenOf). The scheduler keeps each request's
// hash, so a step costs O(1) per token.

// seqSeed is the hash of the empty sequence.
const seqSeed uint64 = 0x6a09e667f3bcc908

// seqHash folds tok into h.
func seqHash(h uint64, tok int64) uint64 {
	x := h ^ (uint64(tok)+1)*0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	x *= 0x94d049bb133111eb
	return x ^ x>>32
}

// tokenOf draws the next token from a sequence hash.
func tokenOf(h uint64) int64 {
	x := h * 0xd6e8feb86659fd93
	x ^= x >> 32
	return 100 + int64(x%30000)
}

// TokenAfter is the token the mock generates after seq (prompt followed by the
// tokens generated so far), before any min_tokens masking.
func TokenAfter(seq []int64) int64 {
	h := seqSeed
	for _, t := range seq {
		h = seqHash(h, t)
	}
	return tokenOf(h)
}

// TokensFor is the first n tokens the mock generates for prompt, absent stop
// rules: what an uninterrupted request with ignore_eos and max_tokens n produces.
func TokensFor(prompt []int64, n int) []int64 {
	h := seqSeed
	for _, t := range prompt {
		h = seqHash(h, t)
	}
	out := make([]int64, n)
	for i := range out {
		out[i] = tokenOf(h)
		h = seqHash(h, out[i])
	}
	return out
}

// maskedToken replaces a stop/EOS token sampled before min_tokens, as vLLM's
// min_tokens logits processor makes it impossible to sample one: the next value
// that is not a stop token.
func maskedToken(tok int64, stops []int64) int64 {
	for slices.Contains(stops, tok) {
		tok++
	}
	return tok
}

// Output is one request's progress in one step, with the client index whose output
// socket it goes to.
type Output struct {
	ClientIndex int64
	wire.EngineCoreOutput
}

type request struct {
	id         string
	client     int64
	prompt     int
	generated  int
	maxTokens  int64
	minTokens  int64
	eos        wire.OptInt
	ignoreEOS  bool
	stopTokens []int64
	allStops   []int64   // stop tokens plus EOS, masked before min_tokens
	resumable  bool      // a same-id ADD continues it instead of being fatal
	logprobs   int64     // top logprobs per token asked for; -1 = none
	promptLPs  int64     // prompt logprobs asked for; -1 = none
	promptIDs  []int64   // kept only when prompt logprobs are asked for
	words      bool      // answer with Words (the request asked for text)
	script     *scripted // the answer a Script rule gave (script.go); nil = none
	lastPeriod bool
	hash       uint64   // seqHash of the prompt and every token generated so far
	queuedAt   float64  // Clock at Add: the QUEUED event's timestamp
	kv         *reqKV   // prefix cache state (prefill.go); nil when the cache is off
	pool       *poolReq // a pooling request (pooling.go); nil = generation
	lora       string   // the adapter's name (lora.go); "" = the base model
}

// Scheduler is the mock engine's step scheduler: requests in, per-step outputs out.
// It is a plain value, not safe for concurrent use, and does no IO; the engine loop
// owns it.
type Scheduler struct {
	TokensPerStep int
	MaxModelLen   int
	MaxNumSeqs    int
	StepCounter   int64
	CurrentWave   int64
	Continuations int // same-id ADDs taken as streaming-input continuations
	// Clock, when set, is the engine's monotonic clock: each request's first output
	// then carries vLLM's QUEUED and SCHEDULED events and its prefill stats
	// (num_cached_tokens), as an engine run with stats logging does; the frontend's
	// vllm:* metrics are computed from them.
	Clock func() float64
	// Words and Period: see Config.Words.
	Words    []int64
	Capitals []int64
	Period   int64
	// Script: see Config.Script.
	Script *Script
	// Pooling: see Config.Pooling.
	Pooling *PoolingModel

	prompts map[uint64]struct{} // prompt hashes seen: a repeated prompt hits (cache off)
	pd      *pdRole             // P/D role (pd.go); nil = none
	kv      *kvState            // prefix cache and prefill queue (prefill.go); nil = off

	running []*request
	byID    map[string]*request
}

// NewScheduler returns an empty scheduler.
func NewScheduler(tokensPerStep, maxModelLen, maxNumSeqs int) *Scheduler {
	return &Scheduler{TokensPerStep: tokensPerStep, MaxModelLen: maxModelLen, MaxNumSeqs: maxNumSeqs, byID: map[string]*request{}}
}

// Add is AddAt at time 0, for a scheduler without prefill time.
func (s *Scheduler) Add(r *wire.EngineCoreRequest) error { return s.AddAt(0, r) }

// AddAt admits a decoded ADD that arrived at now. A live duplicate id is fatal
// (ErrDuplicateRequest) unless the live request was added resumable; an ADD with
// abort_immediately is admitted and aborted at once, producing nothing.
//
// vLLM's Scheduler.add_request gives a request added with resumable=true a
// streaming queue; a later ADD with the same id is the session's next input chunk
// and joins that queue, and only a duplicate of a request without one trips the
// "duplicate request id" assertion. The mock takes such a continuation without
// dying and counts it (Continuations), but does not model the session's
// chunk-by-chunk generation: the live request's stream carries on unchanged.
func (s *Scheduler) AddAt(now time.Duration, r *wire.EngineCoreRequest) error {
	if q, dup := s.byID[r.RequestID]; dup {
		if q.resumable {
			s.Continuations++
			return nil
		}
		return fmt.Errorf("%w: %q", ErrDuplicateRequest, r.RequestID)
	}
	if r.AbortImmediately {
		return nil
	}
	q := &request{id: r.RequestID, client: r.ClientIndex, prompt: len(r.PromptTokenIDs), maxTokens: 16, resumable: r.Resumable, hash: seqSeed, logprobs: -1, promptLPs: -1}
	for _, t := range r.PromptTokenIDs {
		q.hash = seqHash(q.hash, t)
	}
	if r.LoRA != nil {
		q.lora = r.LoRA.Name
		q.hash = loraSeed(q.hash, q.lora)
	}
	if s.Clock != nil {
		q.queuedAt = s.Clock()
	}
	if sp := r.Sampling; sp != nil {
		if sp.MaxTokens.Valid {
			q.maxTokens = sp.MaxTokens.Value
		}
		q.minTokens = sp.MinTokens
		q.words = len(s.Words) > 0 && sp.Detokenize
		if sp.PromptLogprobs.Valid {
			q.promptLPs = max(sp.PromptLogprobs.Value, 0)
			q.promptIDs = slices.Clone(r.PromptTokenIDs)
		}
		if sp.Logprobs.Valid {
			q.logprobs = max(sp.Logprobs.Value, 0)
		}
		q.eos = sp.EOSTokenID
		q.ignoreEOS = sp.IgnoreEOS
		q.stopTokens = sp.StopTokenIDs
		q.allStops = slices.Clone(sp.AllStopTokenIDs)
		q.allStops = append(q.allStops, sp.StopTokenIDs...)
		if sp.EOSTokenID.Valid && !sp.IgnoreEOS {
			q.allStops = append(q.allStops, sp.EOSTokenID.Value)
		}
	}
	q.script = scriptFor(s.Script, r.PromptTokenIDs, q)
	if r.Pooling != nil {
		q.pool = &poolReq{params: *r.Pooling, prompt: slices.Clone(r.PromptTokenIDs)}
	}
	if s.pd != nil {
		s.pd.onAdd(r)
	}
	s.byID[q.id] = q
	if s.kv != nil {
		s.queuePrefill(now, q, r)
		return nil
	}
	s.running = append(s.running, q)
	return nil
}

// Abort drops requests; unknown ids are ignored and no output is produced (a client
// abort finishes the stream on the frontend side).
func (s *Scheduler) Abort(ids []string) {
	for _, id := range ids {
		if q, ok := s.byID[id]; ok {
			if s.pd != nil {
				s.pd.forget(id)
			}
			s.release(q)
			delete(s.byID, id)
			s.running = slices.DeleteFunc(s.running, func(q *request) bool { return q.id == id })
		}
	}
}

// Idle reports whether there is nothing to step.
func (s *Scheduler) Idle() bool { return len(s.byID) == 0 }

// Running is the number of live requests, prefilling or decoding.
func (s *Scheduler) Running() int { return len(s.byID) }

// Step is StepAt at time 0, for a scheduler without prefill time.
func (s *Scheduler) Step(dst []Output) []Output { return s.StepAt(0, dst) }

// StepAt advances every running request by up to TokensPerStep tokens and
// appends one Output per request to dst; with the cache on, the prefills that
// ended by now join the running requests first.
func (s *Scheduler) StepAt(now time.Duration, dst []Output) []Output {
	s.StepCounter++
	if s.kv != nil {
		s.admitPrefills(now)
	}
	keep := s.running[:0]
	for _, q := range s.running {
		o := Output{ClientIndex: q.client, EngineCoreOutput: wire.EngineCoreOutput{RequestID: q.id, FinishReason: wire.FinishNone}}
		if q.generated == 0 && s.Clock != nil {
			s.firstOutput(q, &o.EngineCoreOutput)
		}
		if q.pool != nil {
			s.poolOutput(q, &o.EngineCoreOutput)
			dst = append(dst, o)
			s.release(q)
			delete(s.byID, q.id)
			continue
		}
		if s.pd != nil && q.generated == 0 && s.pd.refused(q.id) {
			o.FinishReason = wire.FinishError // no KV for this prompt: a failed pull
			dst = append(dst, o)
			s.release(q)
			delete(s.byID, q.id)
			continue
		}
		var lp logprobRows
		if q.generated == 0 && q.promptLPs >= 0 {
			o.NewPromptLogprobsTensors = promptLogprobs(q.promptIDs, q.promptLPs)
		}
		for range max(s.TokensPerStep, 1) {
			tok := tokenOf(q.hash)
			switch {
			case q.script != nil:
				tok = q.script.tokens[q.generated]
			case q.words:
				tok = s.word(q, tok)
			}
			if q.script == nil && int64(q.generated) < q.minTokens {
				tok = maskedToken(tok, q.allStops)
			}
			if q.logprobs >= 0 {
				lp.add(tok, q.hash, q.logprobs)
			}
			q.hash = seqHash(q.hash, tok)
			q.generated++
			o.NewTokenIDs = append(o.NewTokenIDs, tok)
			if s.finish(q, tok, &o.EngineCoreOutput) || q.script.end(q.generated, &o.EngineCoreOutput) {
				break
			}
		}
		if q.logprobs >= 0 {
			o.NewLogprobs = lp.lists(q.logprobs)
		}
		s.appendTokens(q, o.NewTokenIDs)
		if s.pd != nil && o.Finished() {
			s.pd.onFinish(q.id, &o.EngineCoreOutput)
		}
		dst = append(dst, o)
		if o.Finished() {
			s.release(q)
			delete(s.byID, q.id)
		} else {
			keep = append(keep, q)
		}
	}
	clear(s.running[len(keep):])
	s.running = keep
	return dst
}

// word draws a readable token: a word, a period now and then, and the EOS after
// a period once the answer has a dozen tokens, so answers are sentences.
func (s *Scheduler) word(q *request, draw int64) int64 {
	switch {
	case q.lastPeriod && q.generated >= 12 && q.eos.Valid && !q.ignoreEOS:
		q.lastPeriod = false
		return q.eos.Value
	case q.generated >= 5 && draw%7 == 0:
		q.lastPeriod = true
		return s.Period
	}
	i := int(draw) % len(s.Words)
	if (q.lastPeriod || q.generated == 0) && i < len(s.Capitals) {
		q.lastPeriod = false
		return s.Capitals[i]
	}
	q.lastPeriod = false
	return s.Words[i]
}

// mockBlockSize is the mock prefix cache's block: a repeated prompt hits in whole
// blocks, and never its last token (vLLM always recomputes it).
const mockBlockSize = 16

// firstOutput adds what vLLM's engine reports with a request's first output: the
// QUEUED and SCHEDULED events and the prefix cache hit of its prompt.
func (s *Scheduler) firstOutput(q *request, o *wire.EngineCoreOutput) {
	now := s.Clock()
	o.Events = []wire.EngineCoreEvent{{Type: wire.EventQueued, Timestamp: q.queuedAt}, {Type: wire.EventScheduled, Timestamp: now}}
	if q.kv != nil {
		s.prefillStats(q, q.kv.cached, o)
		return
	}
	if s.prompts == nil {
		s.prompts = map[uint64]struct{}{}
	}
	cached := 0
	if _, seen := s.prompts[q.hash]; seen && q.prompt > 1 {
		cached = (q.prompt - 1) / mockBlockSize * mockBlockSize
	} else if len(s.prompts) < 1<<16 {
		s.prompts[q.hash] = struct{}{}
	}
	s.prefillStats(q, cached, o)
}

// prefillStats reports a request's prefix cache hit with its first output.
func (s *Scheduler) prefillStats(q *request, cached int, o *wire.EngineCoreOutput) {
	o.NumCachedTokens = int64(cached)
	o.PrefillStats = &wire.PrefillStats{NumPromptTokens: int64(q.prompt), NumComputedTokens: int64(q.prompt - cached),
		NumCachedTokens: int64(cached), NumLocalCachedTokens: int64(cached)}
}

// finish applies vLLM's check_stop (vllm/v1/core/sched/utils.py) to the token just
// generated, in its order: nothing stops a request before min_tokens, not even
// max_model_len; then EOS (unless ignore_eos), stop_token_ids, and the length cap
// (max_model_len or max_tokens).
func (s *Scheduler) finish(q *request, tok int64, o *wire.EngineCoreOutput) bool {
	if int64(q.generated) < q.minTokens {
		return false
	}
	switch {
	case !q.ignoreEOS && q.eos.Valid && tok == q.eos.Value:
		o.FinishReason = wire.FinishStop
	case slices.Contains(q.stopTokens, tok):
		o.FinishReason = wire.FinishStop
		o.StopReason = wire.StopReason{Kind: wire.StopReasonToken, Token: tok}
	case s.MaxModelLen > 0 && q.prompt+q.generated >= s.MaxModelLen, int64(q.generated) >= q.maxTokens:
		o.FinishReason = wire.FinishLength
	default:
		return false
	}
	return true
}

// Stats is the scheduler_stats the engine attaches to each step's output.
func (s *Scheduler) Stats() wire.SchedulerStats {
	usage := 0.0
	if s.MaxNumSeqs > 0 {
		usage = float64(len(s.running)) / float64(s.MaxNumSeqs)
	}
	st := wire.SchedulerStats{
		NumRunningReqs: int64(len(s.running)),
		StepCounter:    s.StepCounter,
		CurrentWave:    s.CurrentWave,
		KVCacheUsage:   min(usage, 1),
	}
	if k := s.kv; k != nil {
		// A prefill in progress is scheduled (running); the rest wait.
		st.NumWaitingReqs = int64(len(k.waiting))
		if len(k.waiting) > 0 && k.waiting[0].kv.started {
			st.NumWaitingReqs--
			st.NumRunningReqs++
		}
		st.KVCacheUsage = k.cache.Usage()
	}
	return st
}
