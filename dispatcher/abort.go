package dispatcher

import (
	"sync"

	"github.com/puzpuzpuz/xsync/v4"
	"github.com/switchyard-llm/switchyard/wire"
)

// abortQueue collects aborted requests whose ABORT has not been sent, grouped per
// engine in arrival order, so one flush writes one ABORT frame per engine however
// many requests were aborted since the last one.
type abortQueue struct {
	mu     sync.Mutex
	groups []abortGroup
}

type abortGroup struct {
	eng  *engine
	reqs []abortEntry
}

// abortEntry is one id to abort at an engine. free: the request has ended and its
// ids are released once the ABORT is out; a migrated request's old engine id (the
// request lives on elsewhere) is not.
type abortEntry struct {
	r    *request
	id   string
	free bool
}

// add queues the ABORT of a request that has ended, at its engine. Caller has
// made r terminal (r.eng and r.engID no longer change).
func (q *abortQueue) add(r *request) { q.addID(r.eng, r, r.engID, true) }

// addID queues the ABORT of id at eng on behalf of r.
func (q *abortQueue) addID(eng *engine, r *request, id string, free bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ent := abortEntry{r: r, id: id, free: free}
	for i := range q.groups {
		if q.groups[i].eng == eng {
			q.groups[i].reqs = append(q.groups[i].reqs, ent)
			return
		}
	}
	q.groups = append(q.groups, abortGroup{eng: eng, reqs: []abortEntry{ent}})
}

// take empties the queue and returns what it held.
func (q *abortQueue) take() []abortGroup {
	q.mu.Lock()
	defer q.mu.Unlock()
	g := q.groups
	q.groups = nil
	return g
}

// Abort aborts live requests by id: each ends locally at once (a Stream gets a final
// Output with Finish == wire.FinishAbort; a SubmitFunc callback gets ErrAborted) and
// the engines get one ABORT frame each, listing their ids, before Abort returns.
// Unknown and finished ids are ignored.
func (d *Dispatcher) Abort(ids ...string) {
	for _, id := range ids {
		if r, ok := d.table.Load(id); ok {
			d.abortOne(r, ErrAborted, outcomeCancelled, false)
		}
	}
	d.flushAborts()
}

// abortOne ends r locally if it is still live and queues its ABORT. kick wakes the
// batcher; callers that abort many at once flush themselves instead.
func (d *Dispatcher) abortOne(r *request, cause error, oc outcome, kick bool) {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done, r.aborting = true, true
	clientAbort := cause == ErrAborted || cause == ErrStreamDropped
	switch {
	case r.deliver != nil && clientAbort:
		r.deliver(r.eng.rank, nil, ErrAborted)
	case r.deliver != nil:
		r.deliver(r.eng.rank, nil, &RequestFailedError{ID: r.id, Rank: r.eng.rank, Cause: cause})
	case clientAbort:
		// vLLM sends no output for a client abort: end the stream here, at once.
		r.buf.push(Output{Finish: wire.FinishAbort})
	default:
		r.err = &RequestFailedError{ID: r.id, Rank: r.eng.rank, Cause: cause}
	}
	stop := r.stopWatch
	r.mu.Unlock()
	d.settle(r, stop, oc, true, kick)
}

// settle does the bookkeeping after r went terminal (outside r.mu): wake the reader,
// stop watching its context, count it and, when the engine still holds the request,
// queue the ABORT that frees its id. A request the engine no longer holds has already
// left the table (under r.mu, before any reader could see it end, so an id is free
// again by the time its stream returns io.EOF).
func (d *Dispatcher) settle(r *request, stop func() bool, oc outcome, abort, kick bool) {
	r.wake()
	if stop != nil {
		stop()
	}
	r.eng.inFlight.Add(-1)
	r.eng.ended.Add(1)
	r.eng.m.outcomes[oc].Inc()
	if abort {
		d.aborts.add(r)
		if kick {
			d.kickAborter()
		}
	}
	d.noteIdle()
}

func (d *Dispatcher) kickAborter() {
	select {
	case d.abortKick <- struct{}{}:
	default:
	}
}

// runAborter sends queued aborts whenever kicked; concurrent cancellations coalesce
// into one frame per engine while it works. It flushes once more on Close.
func (d *Dispatcher) runAborter() {
	defer close(d.aborterDone)
	for {
		select {
		case <-d.abortKick:
			d.flushAborts()
		case <-d.stop:
			d.flushAborts()
			return
		}
	}
}

// flushAborts sends one ABORT per engine for everything queued, then frees the ids.
// An engine that is down gets nothing: it no longer holds the requests.
func (d *Dispatcher) flushAborts() {
	for _, g := range d.aborts.take() {
		if d.pd != nil && g.eng == d.pd.hold {
			d.pdAbortLegs(g.reqs) // ended in their prefill part: abort the prefill leg
		}
		if g.eng.up.Load() {
			ids := make([]string, len(g.reqs))
			for i, ent := range g.reqs {
				ids[i] = ent.id
			}
			body := wire.AppendAbort(wire.GetBuffer(), ids)
			if err := d.sender.Send(g.eng.rank, wire.RequestAbort, body, nil); err != nil {
				d.log.Warn("dispatcher: ABORT not sent", "rank", g.eng.rank, "requests", len(ids), "err", err)
			}
		}
		// Only now may the ids be reused: an ADD with the same id can no longer reach
		// the engine ahead of the ABORT (frames to one rank keep their order).
		for _, ent := range g.reqs {
			if !ent.free {
				continue
			}
			d.freeID(ent.r, ent.r.id)
			if ent.id != ent.r.id {
				d.freeID(ent.r, ent.id)
			}
		}
	}
}

// freeID removes id from the table if it still maps to r.
func (d *Dispatcher) freeID(r *request, id string) {
	d.table.Compute(id, func(old *request, loaded bool) (*request, xsync.ComputeOp) {
		if loaded && old == r {
			return nil, xsync.DeleteOp
		}
		return old, xsync.CancelOp
	})
}
