package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v4"
	"github.com/switchyard-llm/switchyard/wire"
)

// Dispatcher routes requests to data-parallel engine ranks and their outputs back to
// the callers. All methods are safe for concurrent use. The engine-event methods
// (EngineUp, EngineDown, HandleOutputs, ObserveLoad) are fed by an adapter over the
// frontend's handler; calls for one rank come in order from one goroutine.
type Dispatcher struct {
	cfg    Config
	policy Policy
	sender Sender
	log    *slog.Logger
	m      *metrics

	// table holds every live request (and every aborted one whose ABORT has not been
	// handed to its engine yet) by request id; lock-free on the hot path.
	table   *xsync.Map[string, *request]
	engines atomic.Pointer[engineSet]
	engMu   sync.Mutex // serialises engine-set copy-and-swap (cold path)
	refused refusedRanks
	seq     atomic.Uint64
	moveSeq atomic.Uint64 // fresh engine ids of migrated requests
	anon    atomic.Uint64 // client keys of requests submitted without WithClient

	aborts      abortQueue
	abortKick   chan struct{}
	stop        chan struct{}
	aborterDone chan struct{}
	stallDone   chan struct{} // closed when the stall watch has stopped
	// bg holds the goroutines P/D starts to leave a lock before a send that may
	// wait for queue room (a prefill retry, a decode leg); Close joins them.
	bg     sync.WaitGroup
	bgMu   sync.Mutex // orders bg.Go against Close's bg.Wait
	bgDone bool       // under bgMu: Close is joining bg, start nothing more

	util utilityTable

	closed   atomic.Bool
	draining atomic.Bool
	idle     chan struct{}

	grp groupEdge // lockstep group and per-rank drain (survive.go)

	pd *pdEdge // prefill/decode disaggregation (pd.go); nil without EnablePD
}

// New validates cfg, fills its zero fields from DefaultConfig, registers the metrics
// and starts the abort batcher. Close stops it.
func New(cfg Config, s Sender) (*Dispatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("dispatcher: nil Sender")
	}
	cfg = cfg.withDefaults()
	pol, _ := parsePolicy(cfg.Policy)
	d := &Dispatcher{
		cfg:         cfg,
		policy:      pol,
		sender:      s,
		log:         cfg.Logger,
		table:       xsync.NewMap[string, *request](xsync.WithPresize(4096)),
		abortKick:   make(chan struct{}, 1),
		stop:        make(chan struct{}),
		aborterDone: make(chan struct{}),
		idle:        make(chan struct{}, 1),
	}
	d.engines.Store(&engineSet{})
	m, err := newMetrics(cfg.Registerer, d)
	if err != nil {
		return nil, fmt.Errorf("dispatcher: registering metrics: %w", err)
	}
	d.m = m
	if err := d.initSurvival(); err != nil {
		return nil, fmt.Errorf("dispatcher: registering metrics: %w", err)
	}
	d.util.init()
	go d.runAborter()
	d.stallDone = make(chan struct{})
	if cfg.StallTimeout > 0 {
		go d.runStallWatch()
	} else {
		close(d.stallDone)
	}
	return d, nil
}

// Submit validates req, fills ArrivalTime (when zero), ClientIndex and CurrentWave,
// chooses its rank (req.DataParallelRank pins one), encodes the ADD and hands it to
// the Sender. The request id must not be live: a duplicate gets *DuplicateRequestId
// and nothing is sent. Cancelling ctx (unless WithCallerAborts), Stream.Close or
// dropping the Stream aborts the request at its engine. Submit may modify req's
// stamped fields; when migration is on (Config.MaxMigrations) it keeps req until the
// request ends, so the caller must not modify req afterwards (a lost engine's
// request is resubmitted from it, see migrate.go). SubmitFunc and SubmitFuncContext
// keep it the same way.
func (d *Dispatcher) Submit(ctx context.Context, req *wire.EngineCoreRequest) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &request{
		d:        d,
		notify:   make(chan struct{}, 1),
		bufLimit: int32(min(d.cfg.StreamBuffer, math.MaxInt32)),
	}
	// The token log grows a step (often one token) at a time: sized for the answer
	// up front, it is one allocation rather than one per doubling (1, 2, 4, ...).
	if req.Sampling != nil && req.Sampling.MaxTokens.Valid && req.Sampling.MaxTokens.Value > 0 {
		r.tokens = make([]int64, 0, min(req.Sampling.MaxTokens.Value, tokenLogHint))
	}
	if err := d.submit(req, r, ctx); err != nil {
		return nil, err
	}
	s := &Stream{r: r}
	// A Stream dropped while live would otherwise leave its request running at the
	// engine until it finishes on its own, with nobody reading.
	runtime.AddCleanup(s, func(r *request) { r.d.abortOne(r, ErrStreamDropped, outcomeCancelled, true) }, r)
	return s, nil
}

// tokenLogHint caps the token log a stream starts with (512 bytes): a long answer
// grows it by doubling from there, and a queued request holds no more than that.
const tokenLogHint = 64

// SubmitFunc is Submit for servers that fan outputs into their own per-client batches.
// deliver is called for each output from the engine's receive goroutine (out is
// reused after deliver returns: copy what you keep), never concurrently for one
// request, and nothing follows a finished output (out.Finished()) or a non-nil err
// (*RequestFailedError, ErrAborted after Abort). deliver must not block and must not
// call back into the Dispatcher for the same request: it runs under the request's lock.
func (d *Dispatcher) SubmitFunc(req *wire.EngineCoreRequest,
	deliver func(rank int, out *wire.EngineCoreOutput, err error)) (rank int, err error) {
	if deliver == nil {
		return -1, fmt.Errorf("dispatcher: nil deliver callback")
	}
	r := &request{d: d, deliver: deliver}
	if err := d.submit(req, r, nil); err != nil {
		return -1, err
	}
	return int(r.sentRank), nil
}

// SubmitFuncContext is SubmitFunc whose ADD may wait for room in a full
// engine queue until ctx ends (see ClientSender); ctx also names the client
// (WithClient) for the fair share. Unlike Submit, cancelling ctx after the
// ADD is out does not abort the request: the caller aborts by id.
func (d *Dispatcher) SubmitFuncContext(ctx context.Context, req *wire.EngineCoreRequest,
	deliver func(rank int, out *wire.EngineCoreOutput, err error)) (rank int, err error) {
	if deliver == nil {
		return -1, fmt.Errorf("dispatcher: nil deliver callback")
	}
	r := &request{d: d, deliver: deliver, sendCtx: ctx}
	if err := d.submit(req, r, nil); err != nil {
		return -1, err
	}
	return int(r.sentRank), nil
}

// submit is the dispatch path shared by Submit and SubmitFunc. ctx, when non-nil, is
// watched for cancellation once the ADD is out.
func (d *Dispatcher) submit(req *wire.EngineCoreRequest, r *request, ctx context.Context) error {
	start := d.cfg.Now()
	if d.closed.Load() {
		return ErrClosed
	}
	if d.draining.Load() {
		return ErrDraining
	}
	if err := validateRequest(req); err != nil {
		return err
	}
	r.id, r.engID, r.start = req.RequestID, req.RequestID, start
	if sp := req.Sampling; sp != nil && sp.MaxTokens.Valid && sp.MaxTokens.Value > 0 && sp.MaxTokens.Value <= math.MaxInt32 {
		r.left = int32(sp.MaxTokens.Value)
	}
	if d.cfg.VLLM != nil {
		var maxTokens int64
		if req.Sampling != nil && req.Sampling.MaxTokens.Valid {
			maxTokens = req.Sampling.MaxTokens.Value
		}
		r.vs.Start(start, promptLen(req), maxTokens)
		r.vs.SetParent(parentOf(ctx))
	}
	if d.migrating(req) {
		r.migrating, r.orig = true, &origCopy{req: req}
	}
	if d.pd != nil {
		if handled, err := d.pdSubmit(req, r, ctx, start); handled {
			return err
		}
	}
	// An engine that refuses the ADD (dead or stuck, and not yet reported down) costs
	// an unpinned request nothing: nothing reached it, so try the next best engine.
	var skipStack [8]*engine
	skip := skipStack[:0]
	var refused error
	var refusedBy *engine
	for {
		e, err := d.choose(req, skip, start)
		if err != nil {
			if refused != nil {
				refusedBy.m.outcomes[r.refusal].Inc()
				if errors.Is(err, ErrNoEngines) {
					return refused // every engine refused: report the last refusal
				}
			}
			return err
		}
		// The chosen engine's context bounds max_tokens (the caller's params stay
		// as they are: another engine may be tried with its own bound).
		capped, err := capMaxTokens(req.Sampling, promptLen(req), e.maxModelLen.Load())
		if err != nil {
			return err
		}
		retry, err := d.admit(req, capped, r, e, start, ctx)
		if !retry {
			return err
		}
		// A refusal is counted only when it is the request's end: one refused by a
		// rank and then served by another ended once, by its final output.
		if req.DataParallelRank.Valid {
			e.m.outcomes[r.refusal].Inc()
			return err
		}
		if sctx := r.submitCtx(ctx); sctx.Err() != nil {
			e.m.outcomes[r.refusal].Inc()
			return err // the caller gave up waiting: do not wait on another rank
		}
		refused, refusedBy = err, e
		skip = append(skip, e)
	}
}

// admit sends r's ADD to e, with sampling params capped (req's own are put back
// before r.mu is released: a move reads them under r.mu from the moment r is in the
// table). retry reports a failure that left no trace (e went down or refused the
// frame), so another engine may be tried.
func (d *Dispatcher) admit(req *wire.EngineCoreRequest, capped *wire.SamplingParams, r *request, e *engine, start time.Time,
	ctx context.Context) (retry bool, err error) {
	// r.mu is held until the ADD is handed to the Sender, so no abort of r (by id,
	// EngineDown, Close, a cancelled context) can queue an ABORT ahead of its ADD.
	r.mu.Lock()
	defer r.mu.Unlock()
	origSP := req.Sampling
	if orig := req.Sampling; capped != orig {
		req.Sampling = capped
		defer func() { req.Sampling = orig }() // runs before the unlock
	}
	r.eng, r.done = e, false
	if e.inFlight.Add(1) == 1 {
		// Busy from now: the engine owes outputs from here on, not from the
		// last stall check that found it idle.
		e.idleAt.Store(start.UnixNano())
	}
	if _, dup := d.table.LoadOrStore(r.id, r); dup {
		e.inFlight.Add(-1)
		return false, &DuplicateRequestId{ID: r.id}
	}
	// Re-check after the insert: EngineDown or Close sweep the table only after
	// flipping their flag, so either they see r or r sees the flag.
	if d.closed.Load() {
		d.rollbackLocked(r, outcomeClosed)
		return false, ErrClosed
	}
	if !e.up.Load() {
		d.rollbackLocked(r, noOutcome)
		r.refusal = outcomeEngineDown
		return true, &RequestFailedError{ID: r.id, Rank: e.rank,
			Cause: &EngineDownError{Rank: e.rank, Cause: engineCause(e)}}
	}
	if ge := d.groupRefusal(e.rank); ge != nil {
		d.rollbackLocked(r, noOutcome) // the group broke after choose: nothing sent
		return false, ge
	}
	e.admitted.Add(1)

	lay, body, aux, err := d.encodeAdd(req, e, start)
	if err != nil {
		wire.PutBuffer(body)
		err = fmt.Errorf("dispatcher: encoding request %q for rank %d: %w", r.id, e.rank, err)
		var le *wire.LayoutError
		if errors.As(err, &le) {
			// A field this engine's vLLM release has no place for: nothing was
			// sent, and an engine of another release may take it.
			d.rollbackLocked(r, noOutcome)
			r.refusal = outcomeSendFailed
			return true, err
		}
		d.rollbackLocked(r, outcomeSendFailed)
		return false, err
	}
	if r.orig != nil {
		// Before the send: the body goes back to its pool once written.
		r.orig.compact(req, origSP, lay, body, aux)
	}
	if err := d.sendAdd(r, ctx, e.rank, body, aux); err != nil {
		d.rollbackLocked(r, noOutcome)
		r.refusal = outcomeSendFailed
		return true, &RequestFailedError{ID: r.id, Rank: e.rank, Cause: err}
	}
	r.sentRank = int32(e.rank)
	d.m.dispatch.Observe(d.cfg.Now().Sub(start).Seconds())
	if ctx != nil && ctx.Done() != nil && !callerAborts(ctx) {
		r.stopWatch = context.AfterFunc(ctx, func() { d.abortOne(r, ErrAborted, outcomeCancelled, true) })
	}
	return false, nil
}

// sendAdd hands an ADD to the Sender; one that can wait for room in a full
// queue (ClientSender) gets the submitter's context and client key.
func (d *Dispatcher) sendAdd(r *request, ctx context.Context, rank int, body []byte, aux [][]byte) error {
	cs, ok := d.sender.(ClientSender)
	if !ok {
		return d.sender.Send(rank, wire.RequestAdd, body, aux)
	}
	sctx := r.submitCtx(ctx)
	client, ok := clientOf(sctx)
	if !ok {
		// No client named: the request is a client of its own, so it competes
		// with a burst on equal terms. The top bit keeps these apart from keys
		// given with WithClient.
		client = 1<<63 | d.anon.Add(1)
	}
	return cs.SendFrom(sctx, client, rank, wire.RequestAdd, body, aux)
}

// choose picks the engine for req: its pinned rank, or the policy's choice among
// the engines not in skip.
func (d *Dispatcher) choose(req *wire.EngineCoreRequest, skip []*engine, now time.Time) (*engine, error) {
	if err := d.refuseForSurvival(req); err != nil {
		return nil, err
	}
	engs := d.engines.Load().list
	if len(engs) <= 32 {
		var stack [32]Load
		return d.chooseAmong(req, skip, now, engs, stack[:0])
	}
	// More engines than the stack array holds: a pooled slice, as a fresh one
	// per request is kilobytes of new heap each time (bench --scale engines
	// measured 2.4 KB per request at 32 engines and 7.4 KB at 64 before).
	p := bigLoads.Get().(*[]Load)
	if cap(*p) < len(engs) {
		*p = make([]Load, 0, len(engs))
	}
	e, err := d.chooseAmong(req, skip, now, engs, (*p)[:0])
	bigLoads.Put(p)
	return e, err
}

// bigLoads holds the loads of more than 32 engines for choose.
var bigLoads = sync.Pool{New: func() any { return new([]Load) }}

// chooseAmong is choose over engs, with loads an empty slice with room for
// their loads.
func (d *Dispatcher) chooseAmong(req *wire.EngineCoreRequest, skip []*engine, now time.Time, engs []*engine, loads []Load) (*engine, error) {
	ns, maxAge := now.UnixNano(), int64(d.cfg.StatsMaxAge)
	for _, e := range engs {
		l := e.load(ns, maxAge)
		if l.Ready && slices.Contains(skip, e) {
			l.Ready = false
		}
		loads = append(loads, l)
	}
	if req.LoRA != nil && !req.DataParallelRank.Valid {
		// An engine whose release's LoRARequest fields are unknown cannot be
		// sent the adapter; a pinned request is refused at its encoding.
		for i, e := range engs {
			if l := e.layout.Load(); l != nil && !l.HasLoRA() {
				loads[i].Ready = false
			}
		}
	}
	n := promptLen(req)
	// A pooling request generates nothing: a prompt as long as the context fits.
	need := n
	if req.IsPooling() {
		need--
	}
	if req.DataParallelRank.Valid {
		i, err := pinRank(loads, req.DataParallelRank.Value)
		if err != nil {
			return nil, d.explainPin(err)
		}
		if limit := engs[i].maxModelLen.Load(); !fits(need, limit) {
			return nil, &PromptTooLongError{ID: req.RequestID, Rank: engs[i].rank, PromptLen: n, MaxModelLen: limit}
		}
		return engs[i], nil
	}
	// An engine whose context the prompt does not fit is not a candidate; when that
	// leaves none, say so rather than "no engines".
	var longest *engine
	for i, e := range engs {
		if limit := e.maxModelLen.Load(); loads[i].Ready && !fits(need, limit) {
			loads[i].Ready = false
			if longest == nil || limit > longest.maxModelLen.Load() {
				longest = e
			}
		}
	}
	seq := d.seq.Add(1)
	if lr := d.cfg.LoRARouter; lr != nil && req.LoRA != nil {
		if i := routeByCache(lr, req, loads, seq); i >= 0 {
			return engs[i], nil
		}
	}
	if cr := d.cfg.CacheRouter; cr != nil {
		if i := routeByCache(cr, req, loads, seq); i >= 0 {
			return engs[i], nil
		}
	}
	i := d.policy.Choose(loads, seq, splitmix64(d.cfg.Seed+seq))
	if i < 0 {
		if longest != nil {
			return nil, &PromptTooLongError{ID: req.RequestID, Rank: longest.rank, PromptLen: n, MaxModelLen: longest.maxModelLen.Load()}
		}
		return nil, ErrNoEngines
	}
	return engs[i], nil
}

// cacheLoads lends routeByCache a copy of the loads: handing the caller's own
// slice to an interface method would move its stack array to the heap on every
// request, under every policy.
var cacheLoads = sync.Pool{New: func() any { return new([]Load) }}

// routeByCache asks cr for an index into loads; -1 when it leaves the choice to
// the policy or answers an engine that is not ready.
func routeByCache(cr CacheRouter, req *wire.EngineCoreRequest, loads []Load, seq uint64) int {
	buf := cacheLoads.Get().(*[]Load)
	*buf = append((*buf)[:0], loads...)
	i := cr.Route(req, *buf, seq)
	cacheLoads.Put(buf)
	if i < 0 || i >= len(loads) || !loads[i].Ready {
		return -1
	}
	return i
}

// rollbackLocked undoes an admission whose ADD never reached the engine: nothing to
// abort, so the id is free at once. oc is counted unless it is noOutcome (a
// refusal another engine may still make good; submit counts it if none does).
// Caller holds r.mu.
func (d *Dispatcher) rollbackLocked(r *request, oc outcome) {
	r.done = true
	d.unlist(r)
	r.eng.inFlight.Add(-1)
	if oc != noOutcome {
		r.eng.m.outcomes[oc].Inc()
	}
	d.noteIdle()
}

// splitmix64 turns a counter into a well-mixed random word without shared state.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func engineCause(e *engine) error {
	if c := e.cause.Load(); c != nil {
		return fmt.Errorf("%s", *c)
	}
	return fmt.Errorf("not connected")
}

// Engines reports every engine seen so far, in rank order.
func (d *Dispatcher) Engines() []EngineStatus {
	engs := d.engines.Load().list
	out := make([]EngineStatus, len(engs))
	for i, e := range engs {
		out[i] = e.status()
		d.decorateStatus(&out[i], e)
	}
	return out
}

// InFlight is the number of live requests over all engines.
func (d *Dispatcher) InFlight() int {
	var n int64
	for _, e := range d.engines.Load().list {
		n += e.inFlight.Load()
	}
	if d.pd != nil {
		n += d.pd.hold.inFlight.Load() // in their prefill part
	}
	return int(n)
}

// Drain refuses new requests with ErrDraining and waits until none is in flight or
// ctx ends. Call Close afterwards.
func (d *Dispatcher) Drain(ctx context.Context) error {
	d.draining.Store(true)
	for d.InFlight() > 0 {
		select {
		case <-d.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// noteIdle wakes Drain when the last in-flight request ends.
func (d *Dispatcher) noteIdle() {
	if d.draining.Load() && d.InFlight() == 0 {
		select {
		case d.idle <- struct{}{}:
		default:
		}
	}
}

// Close aborts every live request at its engine (each ends with a *RequestFailedError
// whose Cause is ErrClosed), fails waiting utility calls and stops the abort batcher.
// Later calls fail with ErrClosed. Close is idempotent.
func (d *Dispatcher) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	for _, r := range d.table.All() {
		d.abortOne(r, ErrClosed, outcomeClosed, false)
	}
	d.flushAborts()
	close(d.stop)
	<-d.aborterDone
	<-d.stallDone
	d.bgMu.Lock()
	d.bgDone = true
	d.bgMu.Unlock()
	// Bounded: a send waits for queue room no longer than the sender's own stall
	// bound, and every request was failed above, so each ends at its next check.
	d.bg.Wait()
	d.util.closeAll(ErrClosed)
	return nil
}

// goBG runs f on its own goroutine, joined by Close; once Close has begun it runs
// nothing (every request has been failed by then).
func (d *Dispatcher) goBG(f func()) {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	if !d.bgDone {
		d.bg.Go(f)
	}
}

// encodeAdd stamps what the frontend owns on an ADD (client index, arrival time,
// wave) and encodes it in e's wire layout into a pooled buffer, which the caller
// hands to the Sender or returns with wire.PutBuffer.
// It also returns the layout it encoded in.
func (d *Dispatcher) encodeAdd(req *wire.EngineCoreRequest, e *engine, start time.Time) (*wire.Layout, []byte, [][]byte, error) {
	req.ClientIndex = d.cfg.ClientIndex
	if req.ArrivalTime == 0 {
		req.ArrivalTime = float64(start.UnixNano()) / 1e9
	}
	if d.cfg.Waves != nil {
		req.CurrentWave = d.cfg.Waves.OnAdd(e.rank)
	}
	lay := e.layout.Load()
	if lay == nil {
		lay = wire.Native()
	}
	body, aux, err := lay.AppendAdd(wire.GetBuffer(), req)
	return lay, body, aux, err
}
