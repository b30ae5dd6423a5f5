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

// receive applies the publisher's messages in seq order until the connection or the
// subscription ends.
func (r *rankSub) receive(sock transport.Socket, dec *wire.KVBatchDecoder, tr *tracker) {
	for {
		frames, err := sock.Recv()
		if err != nil {
			var left *transport.PeerLeftError
			if errors.As(err, &left) && r.target.Endpoint.Bind {
				continue // a bound SUB outlives one engine connection
			}
			return
		}
		_, seq, payload, err := wire.ParseKVEventMessage(frames)
		if err != nil {
			r.bad.Add(1)
			continue
		}
		r.connected.Store(true)
		r.sequence(seq, dec, tr)
		r.apply(seq, payload, dec)
	}
}

// sequence brings the index up to seq before seq itself is applied: a replay of
// what was lost, or a clear when nothing can cover it.
func (r *rankSub) sequence(seq uint64, dec *wire.KVBatchDecoder, tr *tracker) {
	first := tr.last() < 0
	v, want := tr.observe(seq)
	switch {
	case first && seq > 0 && r.target.Replay != "":
		// Joined late (switchyard restarted, or the engine published before we
		// subscribed): what the buffer still holds fills the index. A buffer that no
		// longer reaches back to 0 leaves blocks out, which only predicts too few hits.
		r.replay(0, seq, dec)
	case v == gap:
		r.gaps.Add(1)
		covered := r.target.Replay != "" && r.replay(want, seq, dec)
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
	}
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

// replay asks the rank's replay ROUTER for [from, upto) and applies it in order. It
// reports whether the whole range was applied; the caller clears the index if not.
func (r *rankSub) replay(from, upto uint64, dec *wire.KVBatchDecoder) bool {
	r.replays.Add(1)
	cfg := r.s.cfg
	opt := transport.Options{MaxMessageSize: cfg.MaxMessageSize, DialTimeout: cfg.ReplayTimeout}
	sock, err := cfg.Network.Dial(r.ctx, transport.Dealer, r.target.Replay, opt)
	if err != nil {
		cfg.Logger.Warn("kv events: replay endpoint not reachable", "rank", r.rank, "replay", r.target.Replay, "err", err)
		return false
	}
	// Recv has no deadline of its own: closing the socket ends it, at the deadline
	// or when the subscription is halted (closeSock).
	r.sockMu.Lock()
	if r.ctx.Err() != nil {
		r.sockMu.Unlock()
		sock.Close()
		return false
	}
	r.replaySock = sock
	r.sockMu.Unlock()
	stop := time.AfterFunc(cfg.ReplayTimeout, func() { sock.Close() })
	defer func() {
		stop.Stop()
		r.sockMu.Lock()
		r.replaySock = nil
		r.sockMu.Unlock()
		sock.Close()
	}()
	if err := sock.Send(nil, wire.AppendKVSeq(nil, from)); err != nil {
		return false
	}
	next := from
	for n := 0; n < cfg.MaxReplay; n++ {
		frames, err := sock.Recv()
		if err != nil || len(frames) != 3 || len(frames[1]) != 8 {
			return false
		}
		seq := binary.BigEndian.Uint64(frames[1])
		switch {
		case seq == wire.KVReplayEndSeq:
			return next >= upto
		case seq < next:
			continue // already applied
		case seq > next:
			return false // the buffer no longer holds next
		case seq < upto:
			r.apply(seq, frames[2], dec)
			next++
		}
		// Messages at or past upto arrive on the SUB as well; the replay is done.
		if next >= upto {
			return true
		}
	}
	return false
}
