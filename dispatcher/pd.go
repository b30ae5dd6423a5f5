package dispatcher

// Prefill/decode disaggregation, the edge (pdcore.go is the pure half). A decode
// dispatcher with EnablePD splits each request it takes: a prefill leg (the prompt,
// max_tokens 1, kv_transfer_params do_remote_decode) goes to the least-loaded engine
// of the prefill dispatcher; the prefill's final output hands its kv_transfer_params
// over, and the request as submitted goes to a decode engine with them in
// sampling_params.extra_args. The caller's Stream or callback sees only the decode
// leg's outputs. Both legs carry ids switchyard makes (the decode leg the request's
// own id, the prefill leg ID#pN, also its transfer_id), so no frontend suffix can
// break the pairing.
//
// While the prefill leg runs, the request sits in this dispatcher's table on a
// holding engine (rank -1, never up, in no engine set): Abort, Close, Drain and
// duplicate ids work on it as on any request, and no engine sweep touches it. Its
// ABORT goes to the prefill leg instead (flushAborts calls pdAbortLegs).

import (
	"context"
	"errors"
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/fasthist"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// PDConfig turns a dispatcher into the decode side of prefill/decode
// disaggregation over the Prefill dispatcher's engines.
type PDConfig struct {
	// Prefill is the dispatcher of the prefill engines (its own frontend, ranks and
	// coordinator). It should not migrate (Config.MaxMigrations < 0): a lost prefill
	// leg is resent here.
	Prefill *Dispatcher
	// MinPromptTokens: shorter prompts are prefilled by the decode engine itself.
	MinPromptTokens int
	// BusyScore: when every ready prefill engine's Score (in flight, or queue from
	// its scheduler stats) is at least this, the decode engine prefills. 0 = never.
	BusyScore float64
	// MaxPrefillLegs is how many prefill engines one request may try before it is
	// prefilled locally; 0 = 2.
	MaxPrefillLegs int
	// OnHandoff, when set, gets every handoff's duration (the prefill's final
	// output received to the decode ADD handed to the writer), e.g. for the bench's
	// exact percentiles; it runs on the prefill engine's receive goroutine.
	OnHandoff func(time.Duration)
}

// pdEdge is a decode dispatcher's P/D state.
type pdEdge struct {
	p      *Dispatcher
	policy pdPolicy
	legs   int
	hold   *engine // requests in their prefill part
	seq    atomic.Uint64
	m      *pdMetrics
	hook   func(time.Duration)
}

// pdState is one split request's pair, shared by its callbacks. mu orders the
// pair's transitions; it is never held while taking a request's lock.
type pdState struct {
	mu   sync.Mutex
	pair pdPair
	leg  string // the live (or last) prefill leg's id
	orig *wire.EngineCoreRequest

	legAt     time.Time // the live leg was submitted
	decodeAt  time.Time // the decode ADD was written, until its first token
	transfers bool      // the decode ADD carried kv_transfer_params
}

// EnablePD makes d the decode side of P/D disaggregation. Call it once, before any
// Submit. Without it nothing changes: no role is checked on the hot path beyond one
// nil test.
func (d *Dispatcher) EnablePD(cfg PDConfig) error {
	if cfg.Prefill == nil || cfg.Prefill == d {
		return errors.New("dispatcher: EnablePD needs a separate prefill dispatcher")
	}
	if cfg.MinPromptTokens < 0 || cfg.BusyScore < 0 || cfg.MaxPrefillLegs < 0 {
		return errors.New("dispatcher: EnablePD: negative limit")
	}
	if d.pd != nil {
		return errors.New("dispatcher: EnablePD called twice")
	}
	legs := cfg.MaxPrefillLegs
	if legs == 0 {
		legs = 2
	}
	m, err := newPDMetrics(d.cfg.Registerer, d)
	if err != nil {
		return fmt.Errorf("dispatcher: registering P/D metrics: %w", err)
	}
	// Requests that end in their prefill part (client aborts) are counted under
	// rank "prefill_stage": they never reached a decode engine.
	hold := &engine{rank: -1}
	for o := range numOutcomes {
		hold.m.outcomes[o] = d.m.requests.WithLabelValues("prefill_stage", outcomeNames[o])
	}
	hold.m.ttft, hold.m.itl = fasthist.New(latencyBuckets[:]), fasthist.New(latencyBuckets[:])
	hold.m.tokens = d.m.tokens.WithLabelValues("prefill_stage")
	d.pd = &pdEdge{p: cfg.Prefill, legs: legs, hold: hold, m: m, hook: cfg.OnHandoff,
		policy: pdPolicy{minPromptTokens: cfg.MinPromptTokens, busyScore: cfg.BusyScore}}
	return nil
}

// PDEnabled reports whether EnablePD was called.
func (d *Dispatcher) PDEnabled() bool { return d.pd != nil }

// PrefillDispatcher is the prefill side, nil without P/D.
func (d *Dispatcher) PrefillDispatcher() *Dispatcher {
	if d.pd == nil {
		return nil
	}
	return d.pd.p
}

// prefillLoad is how many prefill engines are ready and the lowest Score among them.
func (p *Dispatcher) prefillLoad(now time.Time) (ready int, minScore float64) {
	ns, maxAge := now.UnixNano(), int64(p.cfg.StatsMaxAge)
	for _, e := range p.engines.Load().list {
		l := e.load(ns, maxAge)
		if !l.Ready {
			continue
		}
		if s := l.Score(); ready == 0 || s < minScore {
			minScore = s
		}
		ready++
	}
	return ready, minScore
}

// pdSubmit takes req when it is to be split; handled false sends it down the
// plain path (prefilled by its decode engine), the reason counted.
func (d *Dispatcher) pdSubmit(req *wire.EngineCoreRequest, r *request, ctx context.Context, start time.Time) (handled bool, err error) {
	pd := d.pd
	reason := PDUnsupported
	if req.Sampling != nil && !req.Resumable && req.PromptEmbeds == nil {
		ready, minScore := pd.p.prefillLoad(start)
		reason = pd.policy.decide(int(promptLen(req)), ready, minScore)
	}
	if reason != PDRemote {
		pd.m.local[reason].Inc()
		return false, nil
	}
	if req.DataParallelRank.Valid {
		// The pin names a decode rank; one that is not there is refused now, as
		// without P/D, not after a prefill that would be wasted.
		if _, err := d.choose(req, nil, start); err != nil {
			return true, err
		}
	}
	st := &pdState{orig: req, pair: pdPair{maxLegs: pd.legs}}
	r.mu.Lock()
	r.eng, r.done, r.pd = pd.hold, false, st
	r.sentRank = int32(pd.hold.rank)
	pd.hold.inFlight.Add(1)
	if _, dup := d.table.LoadOrStore(r.id, r); dup {
		pd.hold.inFlight.Add(-1)
		r.mu.Unlock()
		return true, &DuplicateRequestId{ID: r.id}
	}
	if d.closed.Load() {
		d.rollbackLocked(r, outcomeClosed)
		r.mu.Unlock()
		return true, ErrClosed
	}
	// The first leg goes out under r.mu, so an abort cannot miss it; its callback
	// waits for r.mu when it needs it, and takes no lock this one holds.
	if legErr := d.pdSendLeg(r, st, -1); legErr != nil {
		// No prefill engine took it (the prefill dispatcher tried each): prefill
		// on the decode engine, as if it had never been split.
		d.rollbackLocked(r, noOutcome)
		r.pd, r.done = nil, false
		r.mu.Unlock()
		pd.m.local[PDPrefillFailed].Inc()
		return false, nil
	}
	if ctx != nil && ctx.Done() != nil {
		r.stopWatch = context.AfterFunc(ctx, func() { d.abortOne(r, ErrAborted, outcomeCancelled, true) })
	}
	r.mu.Unlock()
	d.m.dispatch.Observe(d.cfg.Now().Sub(start).Seconds())
	return true, nil
}

// pdSendLeg submits a prefill leg for r to the prefill dispatcher: pinned to rank
// when rank >= 0, else its policy chooses.
func (d *Dispatcher) pdSendLeg(r *request, st *pdState, rank int) error {
	pd := d.pd
	leg := r.id + "#p" + strconv.FormatUint(pd.seq.Add(1), 10)
	orig := st.orig
	preq := *orig
	preq.RequestID = leg
	preq.DataParallelRank = wire.OptInt{}
	if rank >= 0 {
		preq.DataParallelRank = wire.SomeInt(int64(rank))
	}
	sp := *orig.Sampling
	sp.MaxTokens, sp.MinTokens = wire.SomeInt(1), 0
	params := wire.AppendPrefillKVParams(nil, leg)
	extra, err := wire.AppendExtraArgsWith(nil, orig.Sampling.ExtraArgs, params)
	if err != nil {
		return fmt.Errorf("dispatcher: extra_args: %w", err)
	}
	sp.ExtraArgs = extra
	preq.Sampling = &sp
	st.mu.Lock()
	st.leg, st.legAt = leg, d.cfg.Now()
	st.pair.legSent()
	st.mu.Unlock()
	_, err = pd.p.SubmitFunc(&preq, func(rank int, out *wire.EngineCoreOutput, err error) {
		d.pdLegOutput(r, st, leg, rank, out, err)
	})
	return err
}

// pdLegOutput is a prefill leg's callback, on the prefill engine's receive
// goroutine under the leg's lock. The final output hands over at once: the decode
// ADD is encoded and written here, with no goroutine switch in between.
func (d *Dispatcher) pdLegOutput(r *request, st *pdState, leg string, rank int, out *wire.EngineCoreOutput, err error) {
	if err == nil && !out.Finished() {
		return // the single token comes with the final output; nothing else matters
	}
	now := d.cfg.Now()
	ev := evPrefillFailed
	var params wire.Raw
	switch {
	case err != nil:
	case out.FinishReason == wire.FinishAbort || out.FinishReason == wire.FinishError:
		// The engine refused or dropped it: another prefill engine may not.
	case len(out.KVTransferParams) == 0 || (len(out.KVTransferParams) == 1 && out.KVTransferParams[0] == 0xc0):
		ev = evPrefillNoParams
	default:
		ev, params = evPrefillFinished, out.KVTransferParams
	}
	st.mu.Lock()
	if st.leg != leg {
		st.mu.Unlock()
		return // a leg we gave up on
	}
	if ev == evPrefillFailed && rank >= 0 {
		st.pair.failedRanks = append(st.pair.failedRanks, rank)
	}
	act := st.pair.on(ev)
	legAt, reason := st.legAt, st.pair.reason
	failed := append([]int(nil), st.pair.failedRanks...)
	st.mu.Unlock()
	if ev != evPrefillFailed {
		d.pd.m.legPrefill.Observe(now.Sub(legAt).Seconds())
	}
	switch act {
	case actSendDecode:
		d.pdSendDecode(r, st, params, now, false)
	case actSendLocal:
		d.pd.m.local[reason].Inc()
		d.pdSendDecode(r, st, nil, now, false)
	case actRetryPrefill:
		d.pd.m.retries.Inc()
		// Not on this goroutine: a new ADD may wait for queue room.
		d.goBG(func() { d.pdRetry(r, st, failed, now) })
	}
}

// pdRetry sends another prefill leg to a prefill engine that has not failed this
// request; with none left it prefills on the decode engine.
func (d *Dispatcher) pdRetry(r *request, st *pdState, failed []int, since time.Time) {
	rank := d.pd.p.pickExcept(failed, d.cfg.Now())
	if rank >= 0 {
		if err := d.pdSendLeg(r, st, rank); err == nil {
			st.mu.Lock()
			aborted, leg := st.pair.phase == phDone, st.leg
			st.mu.Unlock()
			if aborted { // the client gave up while the leg went out
				d.pd.p.Abort(leg)
			}
			return
		}
	}
	st.mu.Lock()
	st.pair.legs = st.pair.maxLegs // nowhere else to try
	act := st.pair.on(evPrefillFailed)
	reason := st.pair.reason
	st.mu.Unlock()
	if act == actSendLocal {
		d.pd.m.local[reason].Inc()
		d.pdSendDecode(r, st, nil, since, true)
	}
}

// pickExcept is the rank the policy chooses among ready engines not in ranks, -1
// when there is none.
func (p *Dispatcher) pickExcept(ranks []int, now time.Time) int {
	engs := p.engines.Load().list
	ns, maxAge := now.UnixNano(), int64(p.cfg.StatsMaxAge)
	loads := make([]Load, len(engs))
	for i, e := range engs {
		loads[i] = e.load(ns, maxAge)
		for _, x := range ranks {
			if e.rank == x {
				loads[i].Ready = false
			}
		}
	}
	seq := p.seq.Add(1)
	i := p.policy.Choose(loads, seq, splitmix64(p.cfg.Seed+seq))
	if i < 0 {
		return -1
	}
	return engs[i].rank
}

// pdSendDecode sends r to a decode engine: the request as submitted, with params
// (the prefill's kv_transfer_params, carried as they came) in extra_args, or
// plain (params nil: prefilled there). A decode engine that refuses is skipped
// for the next best; with none left r fails.
//
// wait false is the prefill engine's receive goroutine: it must never wait for
// room in a decode engine's full queue (that would hold every other output of
// the prefill engine behind one busy decode engine), so a handoff that would wait
// goes on in a goroutine of its own, which may.
func (d *Dispatcher) pdSendDecode(r *request, st *pdState, params wire.Raw, since time.Time, wait bool) {
	req := *st.orig
	if params != nil {
		sp := *st.orig.Sampling
		extra, err := wire.AppendExtraArgsWith(nil, sp.ExtraArgs, params)
		if err != nil {
			d.fail(r, fmt.Errorf("dispatcher: P/D handoff: %w", err), outcomeSendFailed)
			return
		}
		sp.ExtraArgs = extra
		req.Sampling = &sp
	}
	var skipStack [8]*engine
	skip := skipStack[:0]
	for {
		e, err := d.choose(&req, skip, since)
		if err != nil {
			d.fail(r, err, outcomeSendFailed)
			return
		}
		capped, err := capMaxTokens(req.Sampling, promptLen(&req), e.maxModelLen.Load())
		if err != nil {
			d.fail(r, err, outcomeSendFailed)
			return
		}
		orig := req.Sampling
		req.Sampling = capped
		retry, blocked := d.pdAdmit(&req, r, st, e, params != nil, since, wait)
		req.Sampling = orig
		if blocked {
			d.goBG(func() { d.pdSendDecode(r, st, params, since, true) })
			return
		}
		if !retry {
			return
		}
		skip = append(skip, e)
	}
}

// errPDWouldWait is the cause of the context a handoff on a receive goroutine
// sends with: a full queue answers at once instead of waiting.
var errPDWouldWait = errors.New("dispatcher: P/D handoff would wait for queue room")

// noWait is a context that has already ended with errPDWouldWait.
var noWait = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errPDWouldWait)
	return ctx
}()

// pdAdmit moves r from the holding engine to decode engine e and writes its ADD.
// retry reports that e refused and nothing reached it; blocked (only when wait
// is false) that e's queue is full and nothing was sent or changed.
func (d *Dispatcher) pdAdmit(req *wire.EngineCoreRequest, r *request, st *pdState, e *engine, remote bool, since time.Time, wait bool) (retry, blocked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done || r.eng != d.pd.hold {
		return false, false // aborted (or closed) meanwhile: nothing to send
	}
	hold := r.eng
	r.eng = e
	e.inFlight.Add(1)
	hold.inFlight.Add(-1)
	undo := func() {
		r.eng = hold
		hold.inFlight.Add(1)
		e.inFlight.Add(-1)
	}
	if d.closed.Load() || !e.up.Load() || d.groupRefusal(e.rank) != nil {
		undo()
		return !d.closed.Load(), false
	}
	e.admitted.Add(1)
	_, body, aux, err := d.encodeAdd(req, e, r.start)
	if err != nil {
		wire.PutBuffer(body)
	} else if cs, ok := d.sender.(ClientSender); ok && !wait {
		err = cs.SendFrom(noWait, 1<<63|d.anon.Add(1), e.rank, wire.RequestAdd, body, aux)
	} else {
		err = d.sender.Send(e.rank, wire.RequestAdd, body, aux)
	}
	if err != nil {
		e.admitted.Add(-1)
		undo()
		if !wait && errors.Is(err, errPDWouldWait) {
			return false, true
		}
		return true, false
	}
	now := d.cfg.Now()
	st.mu.Lock()
	st.decodeAt, st.transfers = now, remote
	st.mu.Unlock()
	if remote {
		d.pd.m.pairs.Inc()
		d.pd.m.handoff.Observe(now.Sub(since).Seconds())
		if d.pd.hook != nil {
			d.pd.hook(now.Sub(since))
		}
	}
	return false, false
}

// pdFirstToken observes the decode leg's time to first token (from its ADD).
// Caller holds r.mu.
func (d *Dispatcher) pdFirstToken(r *request, now time.Time) {
	st := r.pd
	st.mu.Lock()
	at := st.decodeAt
	st.decodeAt = time.Time{}
	st.mu.Unlock()
	if !at.IsZero() {
		d.pd.m.legDecode.Observe(now.Sub(at).Seconds())
	}
}

// pdAbortLegs aborts the prefill legs of requests that ended during their prefill
// part (flushAborts hands over the holding engine's group).
func (d *Dispatcher) pdAbortLegs(ents []abortEntry) {
	var legs []string
	for _, ent := range ents {
		st := ent.r.pd
		if st == nil {
			continue
		}
		st.mu.Lock()
		if st.pair.on(evAbort) == actAbortPrefill {
			legs = append(legs, st.leg)
		}
		st.mu.Unlock()
	}
	if len(legs) > 0 {
		d.pd.p.Abort(legs...)
	}
}

// PDInFlight is the number of requests in their prefill part.
func (d *Dispatcher) PDInFlight() int64 {
	if d.pd == nil {
		return 0
	}
	return d.pd.hold.inFlight.Load()
}
