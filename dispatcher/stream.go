package dispatcher

import (
	"context"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
	"github.com/switchyard-llm/switchyard/wire"
)

// Output is one step of a request's progress, copied out of the engine's message so it
// stays valid after the output loop moves on.
type Output struct {
	// TokenIDs are the tokens generated in this step (a delta). The slice stays valid
	// and unchanged for the life of the program: the stream appends every request's
	// tokens into one growing array and hands out capacity-capped windows of it.
	TokenIDs   []int64
	Finish     wire.FinishReason // wire.FinishNone until the last output
	StopReason wire.StopReason
	// KVTransferParams is the raw msgpack map (P/D disaggregation), nil when absent.
	KVTransferParams wire.Raw
	// NumCachedTokens is prefill_stats.num_cached_tokens of the first output after a
	// prefill, 0 otherwise.
	NumCachedTokens int64
	// PrefillStats is the whole prefill_stats map when the engine sent one.
	PrefillStats *wire.PrefillStats
	// Logprobs and PoolingOutput are deep copies when the engine sent them.
	Logprobs      *wire.LogprobsLists
	PoolingOutput *wire.Tensor
	// PromptLogprobs is a deep copy of the prompt's logprobs (prompt_logprobs),
	// sent with the first output(s) after the prefill.
	PromptLogprobs *wire.LogprobsTensors
	// NumNaNsInLogits > 0 means the engine saw a corrupted output.
	NumNaNsInLogits int64
}

// Finished reports whether this is the request's last output.
func (o *Output) Finished() bool { return o.Finish != wire.FinishNone }

// Stream is the client side of one request submitted with Submit. Recv may be called
// from one goroutine at a time; Close, ID and Rank from any goroutine. Dropping a live
// Stream without Close aborts the request when the garbage collector notices.
type Stream struct {
	r *request
	// The runtime keeps cleanups in a sorted list per memory span, so registering one
	// costs time linear in the Streams already sharing the span; the padding keeps
	// Streams few per span (measured: Submit 3.1 µs -> see bench_test.go).
	_ [streamPad]byte
}

const streamPad = 120

// ID returns the request id given to Submit. The engine knows the request by it
// until the request migrates (then by a fresh id the caller never sees).
func (s *Stream) ID() string { return s.r.id }

// Rank returns the data-parallel rank the request is on (it changes when the
// request migrates).
func (s *Stream) Rank() int { return s.r.rank() }

// rank is the rank r is on now (it changes when r moves).
func (r *request) rank() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.eng.rank
}

// Recv returns the next output. After the output with Finish set it returns io.EOF.
// A request that ends without one returns its buffered outputs first, then the error:
// *RequestFailedError (engine down, dispatcher closed, finished without a final
// output) or *SlowConsumerError. A client abort (Close, Abort, the Submit context
// ending) ends the stream with a final Output whose Finish is wire.FinishAbort, without
// waiting for the engine. If ctx ends first Recv returns ctx.Err() and the request
// stays live.
func (s *Stream) Recv(ctx context.Context) (Output, error) {
	r := s.r
	for {
		r.mu.Lock()
		if r.buf.len() > 0 {
			out := r.buf.pop()
			r.mu.Unlock()
			return out, nil
		}
		if r.done {
			err := r.err
			r.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return Output{}, err
		}
		r.mu.Unlock()
		select {
		case <-r.notify:
		case <-ctx.Done():
			return Output{}, ctx.Err()
		}
	}
}

// Collect is for a caller that answers once, at the finish (a non-streaming HTTP
// completion): from now on Recv is woken only by the final output or the end of the
// request, not by every output, and plain outputs (tokens, no logprobs or other
// extras) that arrive while unread are merged into one, so a long answer neither
// wakes its reader per step nor fills the stream's buffer. What Recv returns is
// unchanged but for the merging: the same tokens, in order, and the same finish.
func (s *Stream) Collect() {
	r := s.r
	r.mu.Lock()
	r.collect = true
	r.mu.Unlock()
}

// Close aborts the request at its engine if it is still live; buffered outputs can
// still be read. Close is idempotent.
func (s *Stream) Close() {
	s.r.d.abortOne(s.r, ErrAborted, outcomeCancelled, true)
}

// request is one live request: its table entry, its delivery target and its timing.
// mu orders every delivery and the single terminal transition, whichever goroutine
// (engine receive loop, aborting client, EngineDown, Close) gets there first.
type request struct {
	id  string // the caller's id
	d   *Dispatcher
	eng *engine
	// engID is the id r's engine knows it by: id, or a fresh one after a move
	// (migrate.go). The table holds r under both.
	engID string

	// deliver is SubmitFunc's callback; nil for a Stream.
	deliver func(rank int, out *wire.EngineCoreOutput, err error)
	// stopWatch unregisters the Submit context watch; nil when there is none.
	stopWatch func() bool
	// sendCtx bounds SubmitFuncContext's wait for queue room; nil otherwise.
	sendCtx context.Context

	start time.Time // Submit entry, for dispatch latency and TTFT
	// refusal is how the last engine that refused the ADD would count it; submit
	// counts it only when no other engine takes the request.
	refusal outcome

	mu       sync.Mutex
	done     bool  // terminal state reached; no more deliveries
	aborting bool  // ABORT not yet handed to the engine: the id stays reserved
	err      error // Stream: terminal error (nil = io.EOF after the final output)
	buf      outRing
	tokens   []int64 // Stream: every token so far; Output.TokenIDs are windows of it
	last     time.Time
	got1st   bool
	// collect (Stream.Collect): wake only at the end, and merge plain outputs into
	// the last buffered one, whose tokens start at r.tokens[mergeAt] (-1: the last
	// buffered output is not plain). Packed into got1st's padding: a request is 416
	// bytes, exactly a size class, and a byte more would cost 32 per request.
	collect  bool
	mergeAt  int32
	notify   chan struct{} // Stream: cap 1, poked after each delivery
	bufLimit int32
	// sentRank is the rank the ADD went to, for SubmitFunc's result. Only the
	// submitting goroutine writes and reads it, so reading it takes no lock:
	// r.rank() would take r.mu, and the first output (whose callback may hold a
	// lock the submitter holds, e.g. a P/D leg's parent) can hold r.mu by then.
	// Beside bufLimit, both int32, to stay in the size class.
	sentRank int32

	// Migration (migrate.go). migrating: a lost engine's request moves rather than
	// fails; orig is the request as submitted (the caller's own: it does not
	// touch it afterwards; compacted to its encoding once sent, origcopy.go) and
	// tokens (for a callback too) every delivered token.
	//
	// left is how many tokens r may still deliver: max_tokens less every token
	// delivered (on any engine; a move's continuation asks for as many); 0 = no
	// limit. An engine that runs past it is cut off there (cutLocked). It sits in
	// migrating's padding, so the request stays in its size class.
	migrating bool
	left      int32
	orig      *origCopy
	moves     int
	movedAt   time.Time // the last move, until its first output: the delay it added

	vs vllmmetrics.Request // the vllm:* series' timing state (under mu)

	pd *pdState // a request split into prefill and decode legs (pd.go); nil otherwise
}

// submitCtx is the context an ADD may wait under: Submit's, or
// SubmitFuncContext's, or none.
func (r *request) submitCtx(ctx context.Context) context.Context {
	switch {
	case ctx != nil:
		return ctx
	case r.sendCtx != nil:
		return r.sendCtx
	}
	return context.Background()
}

// wake pokes a waiting Recv without ever blocking the producer.
func (r *request) wake() {
	if r.notify != nil {
		select {
		case r.notify <- struct{}{}:
		default:
		}
	}
}

// pushLocked copies out into the stream buffer. It reports false when the buffer is
// full (slow consumer); a final output is always accepted so a stream can end.
// Caller holds r.mu.
func (r *request) pushLocked(out *wire.EngineCoreOutput) bool {
	plain := out.NewLogprobs == nil && out.NewPromptLogprobsTensors == nil && out.PoolingOutput == nil &&
		out.KVTransferParams == nil && out.PrefillStats == nil && out.NumNaNsInLogits == 0
	if r.collect && plain && r.buf.len() > 0 && r.mergeAt >= 0 {
		last := r.buf.last()
		r.tokens = append(r.tokens, out.NewTokenIDs...)
		if end := len(r.tokens); end > int(r.mergeAt) {
			last.TokenIDs = r.tokens[int(r.mergeAt):end:end]
		}
		last.Finish, last.StopReason = out.FinishReason, out.StopReason
		if last.StopReason.Kind == wire.StopReasonText {
			last.StopReason.Text = strings.Clone(last.StopReason.Text)
		}
		return true
	}
	if r.buf.len() >= int(r.bufLimit) && !out.Finished() {
		return false
	}
	r.mergeAt = -1
	if plain && len(r.tokens) <= math.MaxInt32 {
		r.mergeAt = int32(len(r.tokens))
	}
	o := Output{
		Finish:          out.FinishReason,
		StopReason:      out.StopReason,
		NumNaNsInLogits: out.NumNaNsInLogits,
	}
	if n := len(out.NewTokenIDs); n > 0 {
		at := len(r.tokens)
		r.tokens = append(r.tokens, out.NewTokenIDs...)
		o.TokenIDs = r.tokens[at : at+n : at+n]
	}
	if o.StopReason.Kind == wire.StopReasonText {
		o.StopReason.Text = strings.Clone(o.StopReason.Text)
	}
	if out.KVTransferParams != nil {
		o.KVTransferParams = append(wire.Raw(nil), out.KVTransferParams...)
	}
	if ps := out.PrefillStats; ps != nil {
		c := *ps
		o.PrefillStats = &c
		o.NumCachedTokens = ps.NumCachedTokens
	}
	if lp := out.NewLogprobs; lp != nil {
		o.Logprobs = &wire.LogprobsLists{
			LogprobTokenIDs:      cloneTensor(lp.LogprobTokenIDs),
			Logprobs:             cloneTensor(lp.Logprobs),
			SampledTokenRanks:    cloneTensor(lp.SampledTokenRanks),
			CuNumGeneratedTokens: append([]int64(nil), lp.CuNumGeneratedTokens...),
		}
	}
	if t := out.PoolingOutput; t != nil {
		c := cloneTensor(*t)
		o.PoolingOutput = &c
	}
	if p := out.NewPromptLogprobsTensors; p != nil {
		o.PromptLogprobs = &wire.LogprobsTensors{
			LogprobTokenIDs:    cloneTensor(p.LogprobTokenIDs),
			Logprobs:           cloneTensor(p.Logprobs),
			SelectedTokenRanks: cloneTensor(p.SelectedTokenRanks),
		}
	}
	r.buf.push(o)
	return true
}

func cloneTensor(t wire.Tensor) wire.Tensor {
	return wire.Tensor{
		DType:    strings.Clone(t.DType),
		Shape:    append([]int64(nil), t.Shape...),
		Data:     append([]byte(nil), t.Data...),
		AuxIndex: t.AuxIndex,
	}
}

// outRing is a FIFO of outputs that grows on demand up to the stream's limit, so a
// request that is read promptly never allocates more than a few slots.
type outRing struct {
	slots []Output
	head  int
	n     int
}

func (q *outRing) len() int { return q.n }

func (q *outRing) push(o Output) {
	if q.n == len(q.slots) {
		grown := make([]Output, max(4, 2*len(q.slots)))
		for i := range q.n {
			grown[i] = q.slots[(q.head+i)%len(q.slots)]
		}
		q.slots, q.head = grown, 0
	}
	q.slots[(q.head+q.n)%len(q.slots)] = o
	q.n++
}

// last is the most recently pushed output; the ring must not be empty.
func (q *outRing) last() *Output {
	return &q.slots[(q.head+q.n-1)%len(q.slots)]
}

func (q *outRing) pop() Output {
	o := q.slots[q.head]
	q.slots[q.head] = Output{} // drop references for the GC
	q.head = (q.head + 1) % len(q.slots)
	q.n--
	return o
}
