package kvsub

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// gapLogEvery rate-limits the gap log line of one rank: a publisher past its
// high-water mark can drop every other message.
const gapLogEvery = 10 * time.Second

// all is the upto of a replay that takes whatever the buffer holds.
const all = wire.KVReplayEndSeq

// received is one Recv's result, handed from the reader to the rank's goroutine.
type received struct {
	frames [][]byte
	err    error
}

// receive applies the publisher's messages in seq order until the connection or the
// subscription ends. While the publisher is quiet it asks the replay buffer for
// what the SUB may have missed: a PUB drops what it publishes before our
// subscription reaches it (a slow joiner), and a lost last message leaves no later
// one to reveal the gap.
func (r *rankSub) receive(sock transport.Socket, dec *wire.KVBatchDecoder, tr *tracker) {
	msgs := make(chan received, 64)
	go func() {
		defer close(msgs)
		for {
			frames, err := sock.Recv()
			select {
			case msgs <- received{frames, err}:
			case <-r.ctx.Done():
				return
			}
			var left *transport.PeerLeftError
			if err != nil && !(errors.As(err, &left) && r.target.Endpoint.Bind) {
				return
			}
		}
	}()
	// The reader ends once the socket is closed (by the caller, or by halt).
	defer func() {
		sock.Close()
		for range msgs {
		}
	}()
	// A catch-up that finds nothing doubles the wait before the next one (up to
	// maxCatchUp): each costs the engine a scan of its buffer. A message resets it.
	wait := r.s.cfg.CatchUp
	idle := time.NewTimer(wait)
	defer idle.Stop()
	for {
		select {
		case m, ok := <-msgs:
			if !ok || !r.handle(m, dec, tr) {
				return
			}
			wait = r.s.cfg.CatchUp
		case <-idle.C:
			if r.target.Replay != "" && !r.catchUp(dec, tr) {
				wait = min(2*wait, maxCatchUp)
			}
		case <-r.ctx.Done():
			return
		}
		idle.Reset(wait)
	}
}

// maxCatchUp bounds the back-off of a quiet publisher's catch-ups.
const maxCatchUp = 30 * time.Second

// handle applies one received message; false ends the connection.
func (r *rankSub) handle(m received, dec *wire.KVBatchDecoder, tr *tracker) bool {
	if m.err != nil {
		var left *transport.PeerLeftError
		if !errors.As(m.err, &left) || !r.target.Endpoint.Bind {
			return false
		}
		// A bound SUB outlives one engine connection; what comes next may be a
		// restarted engine whose seq has not gone back yet.
		r.lostPublisher(tr)
		return true
	}
	_, seq, payload, err := wire.ParseKVEventMessage(m.frames)
	if err != nil {
		r.bad.Add(1)
		return true
	}
	r.connected.Store(true)
	if tr.duplicate(seq) {
		return true // a catch-up replay applied it already
	}
	r.sequence(seq, dec, tr)
	r.apply(seq, payload, dec)
	return true
}

// lostPublisher notes that the publisher's connection ended. vLLM's seq has no
// epoch: a restarted engine whose seq passed the old one's would look like a gap, so
// the first message after a reconnection that does not follow on exactly clears
// the rank and replays what the engine's buffer holds, as for a late join.
func (r *rankSub) lostPublisher(tr *tracker) {
	if tr.started {
		r.s.sink.KVClear(r.rank, "reconnect")
	}
	*tr = tracker{}
}

// sequence brings the index up to seq before seq itself is applied: a replay of
// what was lost, or a clear when nothing can cover it.
func (r *rankSub) sequence(seq uint64, dec *wire.KVBatchDecoder, tr *tracker) {
	if tr.reconnected {
		tr.reconnected = false
		if seq != tr.next {
			r.s.cfg.Logger.Info("kv events: the publisher is back at another seq; clearing its index", "rank", r.rank, "seq", seq, "expected", tr.next)
			r.s.sink.KVClear(r.rank, "reconnect")
			*tr = tracker{}
		}
	}
	first := tr.last() < 0
	v, want := tr.observe(seq)
	switch {
	case first && seq > 0 && r.target.Replay != "":
		// Joined late (switchyard restarted, or the engine published before we
		// subscribed): what the buffer still holds fills the index. A buffer that no
		// longer reaches back to 0 leaves blocks out, which only predicts too few hits.
		r.replay(0, seq, dec, true)
	case v == gap:
		r.gaps.Add(1)
		covered := false
		if r.target.Replay != "" {
			_, covered, _ = r.replay(want, seq, dec, false)
		}
		if now := time.Now(); now.Sub(r.lastGapLog) >= gapLogEvery {
			r.lastGapLog = now
			r.s.cfg.Logger.Warn("kv events: gap in the publisher's sequence", "rank", r.rank,
				"missing_from", want, "missing_to", seq-1, "replayed", covered, "gaps", r.gaps.Load())
		}
		if !covered {
			r.s.sink.KVClear(r.rank, "gap")
		}
	case v == wentBack:
		r.s.cfg.Logger.Info("kv events: sequence went back (the engine restarted); clearing its index", "rank", r.rank, "seq", seq)
		r.s.sink.KVClear(r.rank, "restart")
		// What the new engine published before we were back is in its buffer, as
		// for a late join.
		if seq > 0 && r.target.Replay != "" {
			r.replay(0, seq, dec, true)
		}
	}
}

// catchUp applies what the replay buffer holds past the last message seen. A
// buffer that no longer reaches back to it is a gap no replay covers. A ROUTER that
// cannot be reached or does not answer proves no gap (the publisher may just be
// quiet): the next message's seq tells.
// It reports whether it applied anything.
func (r *rankSub) catchUp(dec *wire.KVBatchDecoder, tr *tracker) bool {
	from := uint64(tr.last() + 1)
	next, _, hole := r.replay(from, all, dec, !tr.started)
	if next > from {
		tr.caughtUp(next)
	}
	if hole && tr.started {
		r.gaps.Add(1)
		r.s.sink.KVClear(r.rank, "gap")
	}
	return next > from
}

func (r *rankSub) apply(seq uint64, payload []byte, dec *wire.KVBatchDecoder) {
	b, err := dec.Decode(payload)
	if err != nil {
		r.bad.Add(1)
		return
	}
	r.lastSeq.Store(int64(seq))
	r.s.sink.KVBatch(r.rank, b)
}

// replayWaits bounds one replay's time, in ReplayTimeouts: a ROUTER that trickles
// its answers holds up only its own rank's events, and not for long.
const replayWaits = 15

// maxOversized bounds the messages too large to receive that one replay steps
// over; a buffer with more ends the replay uncovered (the caller clears).
const maxOversized = 16

// replay asks the rank's replay ROUTER for [from, upto) (upto all: whatever it
// holds) and applies it in order. It returns the seq after the last one applied and
// whether the range was covered from its start; the caller clears the index if not.
// hole reports that the buffer answered without holding next (a gap for certain),
// as opposed to a ROUTER that could not be reached or did not answer in time.
// With partial (an index that holds nothing of this stream yet), a buffer that no
// longer reaches back to from is applied from its oldest message on.
//
// A buffered message over MaxMessageSize drops the replay connection each time it
// is asked for, so asking again from the same seq would never get past it. It is
// lost for good: the index is cleared (unless partial) and the replay goes on after
// it, as for a late join, so one oversized batch costs its blocks and not the rest
// of the stream.
func (r *rankSub) replay(from, upto uint64, dec *wire.KVBatchDecoder, partial bool) (next uint64, ok, hole bool) {
	b := replayBudget{msgs: r.s.cfg.MaxReplay, until: time.Now().Add(replayWaits * r.s.cfg.ReplayTimeout)}
	for range maxOversized {
		var tooLarge bool
		next, ok, hole, tooLarge = r.replayOnce(from, upto, dec, partial, &b)
		if !tooLarge {
			return next, ok, hole
		}
		r.bad.Add(1)
		if upto != all && next+1 >= upto {
			return next, false, false // nothing after it to replay
		}
		if !partial {
			r.s.sink.KVClear(r.rank, "gap")
		}
		from, partial = next+1, true
	}
	return next, false, false
}

// replayBudget is what is left of one replay's bounds, across its connections.
type replayBudget struct {
	msgs  int
	until time.Time
}

// replayOnce is one replay connection's worth of replay; tooLarge reports that it
// ended at a message at next that exceeded MaxMessageSize.
func (r *rankSub) replayOnce(from, upto uint64, dec *wire.KVBatchDecoder, partial bool, b *replayBudget) (next uint64, ok, hole, tooLarge bool) {
	sock := r.openReplay()
	if sock == nil {
		return from, false, false, false
	}
	defer r.closeReplay(sock)
	if err := sock.Send(nil, wire.AppendKVSeq(nil, from)); err != nil {
		return from, false, false, false
	}
	r.replays.Add(1)
	next = from
	for ; b.msgs > 0 && time.Now().Before(b.until); b.msgs-- {
		frames, err := sock.Recv()
		if err != nil {
			return next, false, false, errors.Is(err, transport.ErrFrameTooLarge)
		}
		r.replayStop.Reset(r.s.cfg.ReplayTimeout) // it answered: the next answer gets its own wait
		if len(frames) != 3 || len(frames[1]) != 8 {
			return next, false, false, false
		}
		seq := binary.BigEndian.Uint64(frames[1])
		if partial && next == from && seq > next && seq != wire.KVReplayEndSeq {
			next = seq // the oldest message the buffer still holds
		}
		switch {
		case seq == wire.KVReplayEndSeq:
			ok = upto == all || next >= upto
			return next, ok, !ok, false
		case seq < next:
			continue // already applied
		case seq > next:
			return next, false, true, false // the buffer no longer holds next
		case seq < upto:
			r.apply(seq, frames[2], dec)
			next++
		}
		// Messages at or past upto arrive on the SUB as well; the replay is done.
		if upto != all && next >= upto {
			return next, true, false, false
		}
	}
	return next, false, false, false
}

// openReplay dials the replay ROUTER for one replay, registered so that halt can
// close it; nil when it cannot be reached or the subscription is ending.
func (r *rankSub) openReplay() transport.Socket {
	cfg := r.s.cfg
	// PeerEvents: a ROUTER that goes away (or drops us for an oversized message)
	// ends the replay at once, not at its deadline.
	opt := transport.Options{MaxMessageSize: cfg.MaxMessageSize, DialTimeout: cfg.ReplayTimeout, PeerEvents: true}
	sock, err := cfg.Network.Dial(r.ctx, transport.Dealer, r.target.Replay, opt)
	if err != nil {
		cfg.Logger.Debug("kv events: replay endpoint not reachable", "rank", r.rank, "replay", r.target.Replay, "err", err)
		return nil
	}
	r.sockMu.Lock()
	defer r.sockMu.Unlock()
	if r.ctx.Err() != nil {
		sock.Close()
		return nil
	}
	r.replaySock = sock
	// Recv has no deadline of its own: closing the socket ends it, when a wait
	// passes ReplayTimeout (replayOnce restarts the timer at each answer) or when
	// the subscription is halted (closeSock).
	r.replayStop = time.AfterFunc(cfg.ReplayTimeout, func() { sock.Close() })
	return sock
}

func (r *rankSub) closeReplay(sock transport.Socket) {
	r.sockMu.Lock()
	r.replayStop.Stop()
	r.replaySock, r.replayStop = nil, nil
	r.sockMu.Unlock()
	sock.Close()
}
