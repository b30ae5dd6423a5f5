package clientapi

// The output side of the client protocol: per-(client, rank) batches filled by the
// dispatcher's callbacks, sealed per engine message into the client's queue, and one
// writer goroutine per client with something to send. A client that stops reading
// blocks only its own writer: the others' outputs go out on their own goroutines
// (one writer per peer connection, as the transport's per-peer write lock expects).

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// Note: "Caller holds s.mu" below means ClientServer.mu, which also guards every
// client's fields.

// deliver runs on the dispatcher's goroutines under the request's lock: it copies the
// output into the client's open batch for rank and never blocks. A normal output waits
// for EndBatch; an ending without a final output is sealed at once.
func (s *ClientServer) deliver(c *client, userID string, rank int, out *wire.EngineCoreOutput, err error) {
	s.mu.Lock()
	var ended *liveReq // the request's access-log record when it ends here
	defer func() {
		s.mu.Unlock()
		if ended != nil && ended.span != nil {
			var finish []string
			if err == nil {
				finish = []string{out.FinishReason.String()}
			}
			ended.span.End(ended.completion, finish, 0, err)
		}
		if ended != nil && s.accessLog {
			var status string
			switch {
			case err == nil:
				status = out.FinishReason.String()
			case errors.Is(err, dispatcher.ErrAborted):
				status = "abort"
			default:
				status, _, _ = s.classify(err)
			}
			s.logRequest(c, userID, *ended, status)
		}
	}()
	if c.gone {
		return
	}
	if s.accessLog || s.tracer != nil {
		if lr, ok := c.reqs[userID]; ok {
			lr.rank = rank
			if err == nil {
				if len(out.NewTokenIDs) > 0 {
					lr.span.FirstToken()
				}
				lr.completion += len(out.NewTokenIDs)
				c.reqs[userID] = lr
			}
			if err != nil || out.Finished() {
				ended = &lr
			}
		}
	}
	b := c.open[rank]
	if b == nil {
		b = getBatch(rank)
		c.open[rank] = b
		s.dirty[rank] = append(s.dirty[rank], c)
	}
	if err == nil {
		b.add(userID, out)
		c.queued++
		if out.Finished() {
			delete(c.reqs, userID)
			b.FinishedRequests = append(b.FinishedRequests, userID)
		}
		if c.queued > s.cfg.MaxQueued {
			s.slowClientLocked(c)
		}
		return
	}
	// The request ended without a final output: synthesise one so a client that
	// only understands outputs sees it end, then say why.
	delete(c.reqs, userID)
	reason := wire.FinishError
	if errors.Is(err, dispatcher.ErrAborted) || errors.Is(err, dispatcher.ErrClosed) {
		reason = wire.FinishAbort
	}
	b.Outputs = append(b.Outputs, wire.EngineCoreOutput{RequestID: userID, NewTokenIDs: []int64{}, FinishReason: reason})
	b.FinishedRequests = append(b.FinishedRequests, userID)
	c.queued++
	s.sealLocked(c, rank)
	if !errors.Is(err, dispatcher.ErrAborted) { // a client's own abort needs no explanation
		typ, msg, ranks := s.classify(err)
		s.queueLocked(c, outMsg{to: c.id, err: &clientError{RequestID: userID, Type: typ, Message: msg, ConnectedRanks: ranks, HasRanks: ranks != nil}})
	}
}

// EndBatch seals every client batch that rank's last engine message filled. The
// adapter calls it after dispatcher.HandleOutputs returns, on rank's output goroutine.
//
// It is also where back-pressure happens (nats' stalled producer): when a client this
// message fed has highWater outputs waiting for its writer, EndBatch waits until the
// writer takes them. The engine's output socket then fills and the engine slows
// down, instead of the client being dropped as a slow consumer because the writer
// (not the client) fell behind. The wait ends early when the client's writer makes
// no progress for maxStall: it is blocked on a client that does not read (the send
// timeout or the MaxQueued limit decides about that client), and until one of its
// writes completes, the client is not waited for again, so a client that stopped
// reading delays the engines (and so the other clients) by maxStall once, not per
// engine message.
func (s *ClientServer) EndBatch(rank int) {
	var buf [8]*client
	full, now := s.sealBatch(rank, buf[:0])
	for _, c := range now {
		s.writeNow(c)
	}
	if full != nil {
		s.stall(full)
	}
}

// maxStall bounds how long EndBatch waits for a writer that makes no progress. The
// caller holds its engine's delivery lock, which the frontend's control loop takes to
// mark the engine down, so this stays short.
const maxStall = 100 * time.Millisecond

// sealBatch seals rank's open batches and returns a client whose backlog is at the
// high-water mark, if any, and now extended with the clients whose writer role the
// caller took (their writers were idle): it writes to them itself (writeNow).
func (s *ClientServer) sealBatch(rank int, now []*client) (full *client, _ []*client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.dirty[rank]
	if len(d) == 0 {
		return nil, now
	}
	high := s.highWater()
	for i, c := range d {
		if b := c.open[rank]; b != nil {
			delete(c.open, rank)
			if len(b.Outputs) > 0 && !c.gone {
				c.ready = append(c.ready, outMsg{to: c.id, outs: &b.EngineCoreOutputs, batch: b})
				if s.claimWriterLocked(c) {
					now = append(now, c)
				}
			}
		}
		if c.queued >= high && !c.gone && !c.blocked {
			full = c
		}
		d[i] = nil
	}
	s.dirty[rank] = d[:0]
	return full, now
}

// highWater is the backlog from which EndBatch stalls its caller: half of MaxQueued,
// and no more than stallBacklog. The writer takes the whole backlog each cycle, so a
// few thousand outputs already amortise its system calls; a deeper backlog only adds
// latency and memory (at 32,768 queued outputs, batches kept ~140 MB live in the
// throughput bench).
func (s *ClientServer) highWater() int { return max(min(s.cfg.MaxQueued/2, stallBacklog), 1) }

// stallBacklog caps the high-water mark.
const stallBacklog = 4096

// stall waits until c's writer has taken its backlog below the high-water mark, c
// is gone, the server closes, or the writer made no progress for maxStall (then c
// is marked blocked until its writer completes a write).
func (s *ClientServer) stall(c *client) {
	var t *time.Timer
	high := s.highWater()
	s.mu.Lock()
	for c.queued >= high && !c.gone && !c.blocked && !s.closed {
		c.drainWait = true
		ch := c.drained
		s.mu.Unlock()
		if t == nil {
			t = time.NewTimer(maxStall)
			defer t.Stop()
		} else {
			t.Reset(maxStall)
		}
		select {
		case <-ch:
		case <-t.C:
			s.mu.Lock()
			c.blocked = true
			s.mu.Unlock()
			return
		case <-s.stop:
			return
		}
		s.mu.Lock()
	}
	s.mu.Unlock()
}

// sealLocked moves c's open batch of rank to the writer queue. Caller holds s.mu.
func (s *ClientServer) sealLocked(c *client, rank int) {
	b := c.open[rank]
	if b == nil {
		return
	}
	delete(c.open, rank)
	d := s.dirty[rank]
	for i, x := range d {
		if x == c {
			d[i] = d[len(d)-1]
			s.dirty[rank] = d[:len(d)-1]
			break
		}
	}
	if len(b.Outputs) > 0 && !c.gone {
		s.queueLocked(c, outMsg{to: c.id, outs: &b.EngineCoreOutputs, batch: b})
	}
}

// queueLocked appends m to c's queue and starts c's writer unless it is running.
// Messages queued for a client that is gone (its final ABORT outputs and error) are
// still written. After Close no writer starts: what is queued then is dropped.
// Caller holds s.mu.
func (s *ClientServer) queueLocked(c *client, m outMsg) {
	c.ready = append(c.ready, m)
	if s.claimWriterLocked(c) {
		go s.writeClient(c)
	}
}

// claimWriterLocked takes c's writer role when it is free and the server is open;
// the caller then writes c's queue (or starts a goroutine that does) and ends with
// writers.Done. Caller holds s.mu.
func (s *ClientServer) claimWriterLocked(c *client) bool {
	if c.writing || s.closed {
		return false
	}
	c.writing = true
	s.writers.Add(1)
	return true
}

// slowClientLocked drops a client that stopped reading: its queue is discarded and
// its requests aborted (their callbacks then find it gone). The client is still
// connected, so it is told: each live request ends with an ABORT output, as after
// its own ABORT, followed by one SlowClient error message; otherwise its requests
// would simply never end. Caller holds s.mu.
func (s *ClientServer) slowClientLocked(c *client) {
	s.log.Warn("client protocol: client does not read its outputs; aborting its requests", "client", c.idHex, "queued", c.queued)
	ends := make(map[int]*wire.EngineCoreOutputs)
	for userID, lr := range c.reqs {
		rank := max(lr.rank, 0)
		b := ends[rank]
		if b == nil {
			b = &wire.EngineCoreOutputs{EngineIndex: int64(rank)}
			ends[rank] = b
		}
		b.Outputs = append(b.Outputs, wire.EngineCoreOutput{RequestID: userID, NewTokenIDs: []int64{}, FinishReason: wire.FinishAbort})
		b.FinishedRequests = append(b.FinishedRequests, userID)
	}
	queued := c.queued
	ids := s.forgetLocked(c)
	for _, b := range ends {
		s.queueLocked(c, outMsg{to: c.id, outs: b})
	}
	s.queueLocked(c, outMsg{to: c.id, err: &clientError{Type: ErrTypeSlowClient,
		Message: fmt.Sprintf("client did not read its outputs (%d waiting, limit %d): its %d live requests were aborted", queued, s.cfg.MaxQueued, len(ids))}})
	s.goBG(func() { s.d.Abort(ids...) }) // not under the request lock that deliver runs in
}

// forgetLocked marks c gone, drops its queued messages and returns its engine ids.
func (s *ClientServer) forgetLocked(c *client) []string {
	c.gone = true
	delete(s.clients, string(c.id))
	ids := make([]string, 0, len(c.reqs))
	for _, lr := range c.reqs {
		ids = append(ids, lr.engineID)
		lr.span.End(lr.completion, nil, 0, apicore.ErrClientGone)
	}
	clear(c.reqs)
	for rank := range c.open {
		s.sealLocked(c, rank)
	}
	clear(c.ready)
	c.ready = c.ready[:0]
	c.queued = 0
	if c.drainWait { // a stalled EndBatch need not wait for a client that is gone
		close(c.drained)
		c.drained, c.drainWait = make(chan struct{}), false
	}
	return ids
}

// clientGone aborts every live request of a client that disappeared.
func (s *ClientServer) clientGone(id []byte, why string) {
	s.mu.Lock()
	c := s.clients[string(id)]
	if c == nil {
		s.mu.Unlock()
		return
	}
	ids := s.forgetLocked(c)
	s.mu.Unlock()
	if len(ids) > 0 {
		s.log.Info("client protocol: client gone; aborting its requests", "client", c.idHex, "reason", why, "requests", len(ids))
		s.d.Abort(ids...)
	}
}

// abort handles ABORT: unknown ids are ignored, as an engine does. An empty list is
// the keepalive.
func (s *ClientServer) abort(c *client, ids []string) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	eids := make([]string, 0, len(ids))
	for _, id := range ids {
		if lr, ok := c.reqs[id]; ok {
			eids = append(eids, lr.engineID)
		}
	}
	s.mu.Unlock()
	if len(eids) > 0 {
		s.d.Abort(eids...)
	}
}

// sendError queues an error message for c.
func (s *ClientServer) sendError(c *client, reqID, typ, msg string, ranks []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gone {
		return
	}
	s.queueLocked(c, outMsg{to: c.id, err: &clientError{RequestID: reqID, Type: typ, Message: msg, ConnectedRanks: ranks, HasRanks: ranks != nil}})
}

// sweepLoop runs the idle-client sweep (the liveness rule) until Close.
func (s *ClientServer) sweepLoop() {
	defer s.wg.Done()
	if s.cfg.Timeout <= 0 {
		<-s.stop
		return
	}
	t := time.NewTicker(max(s.cfg.Timeout/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			s.sweep(now)
		case <-s.stop:
			return
		}
	}
}

// sweep applies the liveness rule: a client with live requests that has been silent
// for longer than Timeout is gone.
func (s *ClientServer) sweep(now time.Time) {
	var gone [][]byte
	s.mu.Lock()
	for _, c := range s.clients {
		if len(c.reqs) > 0 && now.Sub(c.lastSeen) > s.cfg.Timeout {
			gone = append(gone, c.id)
		}
	}
	s.mu.Unlock()
	for _, id := range gone {
		s.clientGone(id, "silent for more than "+s.cfg.Timeout.String())
	}
}
