package dispatcher

import (
	"github.com/switchyard-llm/switchyard/internal/fasthist"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// EngineUp marks rank connected and ready with unknown limits; see EngineUpWith.
func (d *Dispatcher) EngineUp(rank int) { d.EngineUpWith(rank, EngineLimits{}) }

// EngineUpWith marks rank connected and ready; it becomes eligible for new
// requests, which must fit lim (from the engine's registration). A rank that was
// down rejoins with fresh load stats (a restarted engine is empty) and the limits
// it registered this time.
func (d *Dispatcher) EngineUpWith(rank int, lim EngineLimits) {
	defer d.groupRankUp(rank) // after the engine is marked up
	d.refused.clear(rank)
	d.engMu.Lock()
	set := d.engines.Load()
	e := set.find(rank)
	if e == nil {
		e = &engine{rank: rank, m: d.m.forEngine(rank), vm: d.cfg.VLLM.Engine(rank, lim.NumGPUBlocks)}
		e.lastHeard.Store(d.cfg.Now().UnixNano()) // the stall clock starts at READY
		e.maxModelLen.Store(lim.MaxModelLen)
		e.layout.Store(lim.Layout)
		e.up.Store(true)
		d.engines.Store(set.with(e))
		d.engMu.Unlock()
		d.log.Info("dispatcher: engine up", "rank", rank, "max_model_len", lim.MaxModelLen)
		return
	}
	d.engMu.Unlock()
	if e.up.Load() {
		e.maxModelLen.Store(lim.MaxModelLen)
		e.layout.Store(lim.Layout)
		return
	}
	e.observeLoad(0, 0, 0, 0) // a restarted engine is empty; no stats yet
	e.cause.Store(nil)
	e.stalled.Store(false)
	e.lastHeard.Store(d.cfg.Now().UnixNano())
	e.maxModelLen.Store(lim.MaxModelLen) // before up: no request sees the old limits
	e.layout.Store(lim.Layout)           // a restarted engine may run another vLLM release
	e.up.Store(true)
	d.log.Info("dispatcher: engine rejoined", "rank", rank, "max_model_len", lim.MaxModelLen)
}

// EngineDown marks rank unusable and moves each of its in-flight requests to
// another rank (migrate.go); one that cannot move fails with a *RequestFailedError
// whose Cause is an *EngineDownError naming the rank and err (wrapped in a
// *MigrationError saying why when a move was tried). Its pending utility calls
// fail the same way. No ABORT is sent to it. Requests on other ranks are
// untouched. The rank is never chosen again until EngineUp.
func (d *Dispatcher) EngineDown(rank int, err error) {
	e := d.engines.Load().find(rank)
	if e == nil {
		return
	}
	msg := "engine down"
	if err != nil {
		msg = err.Error()
	}
	e.cause.Store(&msg)
	// Flip the flag before sweeping: a Submit that inserted after the sweep passed its
	// bucket re-checks the flag and fails itself.
	if !e.up.Swap(false) {
		return
	}
	d.log.Warn("dispatcher: engine down", "rank", rank, "err", err)
	d.groupRankDown(rank, err) // the rest of its lockstep group, if any
	cause := &EngineDownError{Rank: rank, Cause: err}
	for _, r := range d.table.All() {
		d.rescue(r, e, cause, outcomeEngineDown, false) // r's own lock decides whether it is e's
	}
	d.util.failRank(rank, cause)
	// Aborts queued for it are dropped by the next flush; free their ids now.
	d.kickAborter()
}

// ObserveLoad records an engine's queue (from the coordinator's publish, or from
// scheduler_stats in HandleOutputs) for the rank policy. Values no engine could
// report are clamped first (sanitizeStats).
func (d *Dispatcher) ObserveLoad(rank int, waiting, running int64, kvCacheUsage float64) {
	if e := d.engines.Load().find(rank); e != nil {
		now := d.cfg.Now().UnixNano()
		waiting, running, kvCacheUsage = e.sanitizeStats(waiting, running, kvCacheUsage)
		e.observeLoad(waiting, running, kvCacheUsage, now)
		d.heard(e, now)
	}
}

// HandleOutputs routes one decoded EngineCoreOutputs from rank: each output to its
// request, scheduler stats to the policy, finished_requests without a final output to
// failures, a utility reply to its call. outs is reused by the caller after return;
// nothing here keeps a reference into it. It never blocks on a consumer.
func (d *Dispatcher) HandleOutputs(rank int, outs *wire.EngineCoreOutputs) {
	e := d.engines.Load().find(rank)
	if e == nil {
		d.log.Warn("dispatcher: outputs from a rank that never came up", "rank", rank)
		return
	}
	now := d.cfg.Now()
	e.lastOutput.Store(now.UnixNano())
	d.heard(e, now.UnixNano())
	tokens := 0
	var ttft, itl fasthist.Batch
	for i := range outs.Outputs {
		o := &outs.Outputs[i]
		r, ok := d.table.Load(o.RequestID)
		if !ok {
			// Aborted, failed, or never ours: the engine may lag behind us.
			if d.cfg.AbortOrphans && o.FinishReason == wire.FinishNone {
				d.orphan(rank, o.RequestID)
			}
			continue
		}
		if d.deliverOutput(r, e, o, now, outs.Timestamp, &ttft, &itl) {
			tokens += len(o.NewTokenIDs)
		}
	}
	if tokens > 0 {
		e.m.tokens.Add(float64(tokens))
		e.vm.Generated(tokens)
		e.m.ttft.Flush(&ttft)
		e.m.itl.Flush(&itl)
	}
	if st := outs.SchedulerStats; st != nil {
		// Sanitised in place, so the vllm:* series show what routing uses.
		st.NumWaitingReqs, st.NumRunningReqs, st.KVCacheUsage = e.sanitizeStats(st.NumWaitingReqs, st.NumRunningReqs, st.KVCacheUsage)
		e.vm.Scheduler(st)
		e.observeLoad(st.NumWaitingReqs, st.NumRunningReqs, st.KVCacheUsage, now.UnixNano())
	}
	// Outputs come first: an id whose final output was in this message is gone by now.
	for _, id := range outs.FinishedRequests {
		if r, ok := d.table.Load(id); ok && r.owns(e, id) {
			d.fail(r, ErrNoFinalOutput, outcomeNoFinalOutput)
		}
	}
	if u := outs.UtilityOutput; u != nil && !u.CallIDNegative {
		d.util.resolve(rank, u)
	}
}

// deliverOutput hands one output from e to r's stream or callback; a finished output
// ends r. It reports false, delivering nothing, when r has ended or is no longer on e
// under the output's id (it moved: a late output of the lost engine). A stream whose
// buffer is full is ended with *SlowConsumerError and aborted at the engine, so the
// output loop moves on at once.
func (d *Dispatcher) deliverOutput(r *request, e *engine, o *wire.EngineCoreOutput, now time.Time, engineTS float64, ttft, itl *fasthist.Batch) bool {
	r.mu.Lock()
	if r.done || r.eng != e || r.engID != o.RequestID {
		r.mu.Unlock()
		return false
	}
	cut := false
	if r.left > 0 {
		if n := len(o.NewTokenIDs); n < int(r.left) {
			r.left -= int32(n)
		} else {
			cut = r.cutLocked(o)
		}
	}
	if len(o.NewTokenIDs) > 0 {
		if !r.movedAt.IsZero() {
			d.m.moveDelay.Observe(now.Sub(r.movedAt).Seconds())
			r.movedAt = time.Time{}
		}
		if !r.got1st {
			r.got1st = true
			ttft.Observe(e.m.ttft, now.Sub(r.start).Seconds())
			if r.pd != nil {
				d.pdFirstToken(r, now)
			}
		} else {
			itl.Observe(e.m.itl, now.Sub(r.last).Seconds())
		}
		r.last = now
	}
	e.vm.Output(&r.vs, o, now, engineTS)
	fin := o.Finished()
	if r.deliver != nil {
		if r.migrating {
			if r.tokens == nil {
				// One allocation for the first 32 tokens, where appending grew
				// the slice at 1, 2, 4, 8... (most answers are short).
				r.tokens = make([]int64, 0, max(len(o.NewTokenIDs), 32))
			}
			r.tokens = append(r.tokens, o.NewTokenIDs...)
		}
		if r.moves > 0 {
			o.RequestID = r.id // the caller's id, not the engine's
		}
		r.deliver(r.eng.rank, o, nil)
	} else if !r.pushLocked(o) {
		r.done, r.aborting = true, true
		r.err = &SlowConsumerError{ID: r.id, Rank: r.eng.rank, Buffered: r.buf.len()}
		stop := r.stopWatch
		r.mu.Unlock()
		d.settle(r, stop, outcomeSlowConsumer, true, true)
		return true
	}
	if !fin {
		collect := r.collect
		r.mu.Unlock()
		if !collect {
			r.wake()
		}
		return true
	}
	r.done = true
	if cut {
		// The engine still holds it: the id stays reserved until the ABORT is out.
		r.aborting = true
	} else {
		d.unlist(r)
	}
	e.vm.Finish(&r.vs, o.FinishReason, now)
	if r.moves > 0 {
		d.m.saved.Inc()
	}
	stop := r.stopWatch
	r.mu.Unlock()
	d.settle(r, stop, finishOutcome(o.FinishReason), cut, cut)
	return true
}

// cutLocked enforces max_tokens on o, an output that reaches r's limit (r.left > 0
// and o carries at least that many tokens): tokens beyond it are dropped and o ends
// the request with finish reason length if the engine did not end it. It reports
// whether the engine still holds the request (it did not finish it), which must then
// be aborted there. A well-behaved engine stops at max_tokens itself, so this only
// trims: what the client was promised is what it gets and is billed for.
// Caller holds r.mu.
func (r *request) cutLocked(o *wire.EngineCoreOutput) bool {
	o.NewTokenIDs = o.NewTokenIDs[:r.left]
	if lp := o.NewLogprobs; lp != nil {
		// One logprobs row per token: rows for dropped tokens would be billed
		// as the client's (and misalign the text path's per-token logprobs).
		n := int64(r.left)
		lp.LogprobTokenIDs = trimRows(lp.LogprobTokenIDs, n)
		lp.Logprobs = trimRows(lp.Logprobs, n)
		lp.SampledTokenRanks = trimRows(lp.SampledTokenRanks, n)
		lp.CuNumGeneratedTokens = trimCumulative(lp.CuNumGeneratedTokens, n)
	}
	r.left = 0
	if o.Finished() {
		return false
	}
	o.FinishReason, o.StopReason = wire.FinishLength, wire.StopReason{}
	return true
}

// fail ends r with a *RequestFailedError when the engine no longer holds it (it died,
// or it finished the request without a final output): no ABORT is needed.
func (d *Dispatcher) fail(r *request, cause error, oc outcome) {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done = true
	d.unlist(r)
	err := &RequestFailedError{ID: r.id, Rank: r.eng.rank, Cause: cause}
	if r.deliver != nil {
		r.deliver(r.eng.rank, nil, err)
	} else {
		r.err = err
	}
	stop := r.stopWatch
	r.mu.Unlock()
	d.settle(r, stop, oc, false, false)
}

// trimRows keeps t's first n rows (its first dimension). A tensor whose data does
// not split evenly into its rows is left as it is: the text path checks shapes.
func trimRows(t wire.Tensor, n int64) wire.Tensor {
	if len(t.Shape) == 0 || t.Shape[0] <= n || t.Shape[0] <= 0 || int64(len(t.Data))%t.Shape[0] != 0 {
		return t
	}
	row := int64(len(t.Data)) / t.Shape[0]
	shape := append([]int64{n}, t.Shape[1:]...)
	t.Shape, t.Data = shape, t.Data[:n*row]
	return t
}

// trimCumulative cuts cumulative token counts at n: counts past it are dropped and
// the last one is n, so the counts still cover exactly the tokens kept.
func trimCumulative(cu []int64, n int64) []int64 {
	if cu == nil {
		return nil
	}
	i := 0
	for i < len(cu) && cu[i] < n {
		i++
	}
	return append(cu[:i:i], n)
}
