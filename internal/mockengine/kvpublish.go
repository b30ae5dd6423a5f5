package mockengine

// The engine's KV event publisher, vLLM's ZmqEventPublisher
// (vllm/distributed/kv_events.py): a PUB socket sending [topic, seq, payload]
// with seq 8 bytes big-endian from 0, one message per engine step that has
// events, the payload encoded as the engine's release encodes a KVEventBatch;
// and, when configured, a replay ROUTER that answers [b"", start] with every
// buffered message from start on, then the end marker. The publisher is the
// edge around the events the PrefixCache records: the engine loop publishes,
// one goroutine serves replays (and one redials a connecting PUB).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// kvEntry is one published message, kept for replay.
type kvEntry struct {
	seq     uint64
	payload []byte
}

// kvPublisher publishes one engine's KV events. publish is called by the engine
// loop only; the replay goroutine reads the buffer under mu.
type kvPublisher struct {
	enc         wire.KVEncoding
	bytesHashes bool
	rank        int64
	topic       []byte
	log         *slog.Logger

	pub    transport.Socket // bound PUB; nil when connecting (see dialer)
	dialer *kvDialer
	replay transport.Socket // nil without a replay endpoint

	mu   sync.Mutex
	seq  uint64
	ring []kvEntry // the last keep messages, oldest at next once full
	next int
	keep int

	batch  wire.KVEventBatch // reused by publish
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startKVPublisher opens the sockets of cfg (offset for rank) and starts the
// replay server. enc is the engine's release's encoding.
func startKVPublisher(ctx context.Context, nw transport.Network, cfg KVEventsConfig, rank int, enc wire.KVEncoding, bytesHashes bool, log *slog.Logger) (*kvPublisher, error) {
	cfg = cfg.withDefaults()
	ep, err := OffsetEndpoint(cfg.Endpoint, rank)
	if err != nil {
		return nil, err
	}
	rep, err := OffsetEndpoint(cfg.ReplayEndpoint, rank)
	if err != nil {
		return nil, err
	}
	p := &kvPublisher{enc: enc, bytesHashes: bytesHashes, rank: int64(rank), topic: []byte(cfg.Topic), log: log, keep: cfg.BufferSteps}
	ctx, p.cancel = context.WithCancel(ctx)
	opt := transport.Options{SendHWM: cfg.HWM, Logger: log}
	if kvBinds(ep) {
		if p.pub, err = nw.Listen(ctx, transport.Pub, ep, opt); err != nil {
			p.cancel()
			return nil, fmt.Errorf("mockengine: kv events PUB %s: %w", ep, err)
		}
	} else {
		p.dialer = &kvDialer{net: nw, addr: ep, opt: opt, log: log}
		p.wg.Add(1)
		go p.dialer.run(ctx, &p.wg)
	}
	if rep != "" {
		if p.replay, err = nw.Listen(ctx, transport.Router, rep, transport.Options{Logger: log}); err != nil {
			p.close()
			return nil, fmt.Errorf("mockengine: kv events replay ROUTER %s: %w", rep, err)
		}
		p.wg.Add(1)
		go p.serveReplay()
	}
	log.Info("mockengine: publishing KV events", "endpoint", ep, "replay", rep, "encoding", enc.String())
	return p, nil
}

// close stops the goroutines and closes the sockets.
func (p *kvPublisher) close() {
	p.cancel()
	if p.pub != nil {
		p.pub.Close()
	}
	if p.replay != nil {
		p.replay.Close() // unblocks serveReplay's Recv
	}
	p.wg.Wait()
}

// publish sends one batch of events stamped ts (seconds since the epoch) and
// keeps it for replay. Nothing is sent for no events.
func (p *kvPublisher) publish(ts float64, evs []CacheEvent) {
	if len(evs) == 0 {
		return
	}
	p.batch.TS, p.batch.DataParallelRank = ts, wire.SomeInt(p.rank)
	p.batch.Events = p.batch.Events[:0]
	for i := range evs {
		p.batch.Events = append(p.batch.Events, p.wireEvent(&evs[i]))
	}
	payload := wire.AppendKVEventBatch(nil, p.enc, &p.batch)
	if p.bytesHashes {
		payload = spliceBytesHashes(payload, p.batch.Events)
	}
	p.mu.Lock()
	seq := p.seq
	p.seq++
	if len(p.ring) < p.keep {
		p.ring = append(p.ring, kvEntry{seq, payload})
	} else {
		p.ring[p.next] = kvEntry{seq, payload}
		p.next = (p.next + 1) % len(p.ring)
	}
	p.mu.Unlock()
	msg := [][]byte{p.topic, wire.AppendKVSeq(nil, seq), payload}
	var err error
	if p.pub != nil {
		err = p.pub.Send(msg...)
	} else {
		err = p.dialer.send(msg)
	}
	if err != nil && !errors.Is(err, transport.ErrClosed) {
		p.log.Warn("mockengine: publishing KV events", "seq", seq, "err", err)
	}
}

// kvMediumGPU is every event's medium: the mock's cache is all GPU.
var kvMediumGPU = wire.SomeString("GPU")

// wireEvent is ev as vLLM's classes carry it. Fields the engine's release does
// not have are dropped by the encoder.
func (p *kvPublisher) wireEvent(ev *CacheEvent) wire.KVEvent {
	w := wire.KVEvent{Medium: kvMediumGPU}
	if p.enc >= wire.KVEncodingV021 {
		w.GroupIdx = wire.SomeInt(0) // the one full-attention group
	}
	for _, h := range ev.Hashes {
		w.BlockHashes = append(w.BlockHashes, p.hash(h))
	}
	switch ev.Kind {
	case CacheRemoved:
		w.Kind = wire.KVBlockRemoved
	case CacheCleared:
		return wire.KVEvent{Kind: wire.KVAllBlocksCleared}
	default:
		w.Kind = wire.KVBlockStored
		w.Parent, w.HasParent = p.hash(ev.Parent), ev.HasParent
		w.TokenIDs, w.BlockSize = ev.Tokens, int64(ev.BlockSize)
		if ev.LoRAName != "" {
			w.LoRAID, w.LoRAName = wire.SomeInt(ev.LoRAID), wire.SomeString(ev.LoRAName)
		}
		w.ExtraKeys = extraKeysRaw(ev)
		if p.enc >= wire.KVEncodingV021 {
			w.SpecKind = wire.SomeString("full_attention")
		}
	}
	return w
}

// extraKeysRaw is extra_keys as vLLM writes it from v0.18 on: one entry per
// block, a tuple of its keys or None.
func extraKeysRaw(ev *CacheEvent) []wire.Raw {
	keys := make([]wire.Raw, len(ev.Hashes))
	for i := range keys {
		if i < len(ev.ExtraKeys) && len(ev.ExtraKeys[i]) > 0 {
			keys[i] = strTuple(ev.ExtraKeys[i])
		}
	}
	return keys
}

// strTuple is a msgpack array of short strings (names and salts).
func strTuple(ss []string) wire.Raw {
	b := []byte{0x90 | byte(min(len(ss), 15))}
	for _, s := range ss[:min(len(ss), 15)] {
		switch n := len(s); {
		case n < 32:
			b = append(b, 0xa0|byte(n))
		case n < 256:
			b = append(b, 0xd9, byte(n))
		default:
			b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(min(n, 65535)))
			s = s[:min(n, 65535)]
		}
		b = append(b, s...)
	}
	return b
}

// hash is a block hash as the events carry it. With bytes hashes the int written
// is a placeholder with the top bit set, so that the encoder writes it as a
// 9-byte uint64 that spliceBytesHashes can find and replace.
func (p *kvPublisher) hash(h uint64) wire.KVBlockHash {
	if p.bytesHashes {
		return wire.KVBlockHash(h | 1<<63)
	}
	return wire.KVBlockHash(h)
}

// serveReplay answers replay requests until the ROUTER closes.
func (p *kvPublisher) serveReplay() {
	defer p.wg.Done()
	for {
		frames, err := p.replay.Recv()
		if errors.Is(err, transport.ErrClosed) {
			return
		}
		if err != nil || len(frames) < 1 {
			continue
		}
		start, err := wire.ParseKVReplayRequest(frames[1:])
		if err != nil {
			p.log.Warn("mockengine: invalid KV replay request", "frames", len(frames)-1)
			continue
		}
		p.answerReplay(frames[0], start)
	}
}

// answerReplay sends every buffered message with seq >= start, then the end.
func (p *kvPublisher) answerReplay(id []byte, start uint64) {
	p.mu.Lock()
	var out []kvEntry
	for i := range p.ring {
		if e := p.ring[(p.next+i)%len(p.ring)]; e.seq >= start {
			out = append(out, e)
		}
	}
	p.mu.Unlock()
	for _, e := range out {
		if err := p.replay.Send(id, nil, wire.AppendKVSeq(nil, e.seq), e.payload); err != nil {
			return // the requester left
		}
	}
	p.replay.Send(id, nil, wire.AppendKVSeq(nil, wire.KVReplayEndSeq), nil)
}

// kvDialer is a PUB that connects, as vLLM's does to an endpoint without a
// wildcard: it dials until the peer listens and again after it leaves, as
// libzmq reconnects. Messages published while it is away are dropped, as a
// libzmq PUB drops them for want of a subscription. It is an XPUB so that the
// peer's departure surfaces (a PUB cannot receive).
type kvDialer struct {
	net  transport.Network
	addr string
	opt  transport.Options
	log  *slog.Logger

	mu  sync.Mutex
	cur transport.Socket
}

func (d *kvDialer) send(msg [][]byte) error {
	d.mu.Lock()
	s := d.cur
	d.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Send(msg...)
}

// run dials, then reads (subscriptions, departures) until the peer leaves,
// and again, until ctx ends.
func (d *kvDialer) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	opt := d.opt
	opt.PeerEvents = true
	for ctx.Err() == nil {
		s, err := d.net.Dial(ctx, transport.XPub, d.addr, opt)
		if err != nil {
			sleepCtx(ctx, redialInterval)
			continue
		}
		d.mu.Lock()
		d.cur = s
		d.mu.Unlock()
		stop := context.AfterFunc(ctx, func() { s.Close() })
		for {
			if _, err := s.Recv(); err != nil {
				break // the peer left, or the socket closed
			}
		}
		stop()
		d.mu.Lock()
		d.cur = nil
		d.mu.Unlock()
		s.Close()
	}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// spliceBytesHashes rewrites the placeholder hashes of evs in payload as 32-byte
// bin values (HashBytes), the form of VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0:
// wire's encoder writes int hashes only. A placeholder is written as 0xcf and 8
// bytes; anything else matching one of this batch's placeholders by chance has
// odds of 2^-64 a hash.
func spliceBytesHashes(payload []byte, evs []wire.KVEvent) []byte {
	ph := map[uint64]bool{}
	for i := range evs {
		for _, h := range evs[i].BlockHashes {
			ph[uint64(h)] = true
		}
		if evs[i].HasParent {
			ph[uint64(evs[i].Parent)] = true
		}
	}
	out := make([]byte, 0, len(payload)+len(ph)*26)
	for i := 0; i < len(payload); {
		if payload[i] == 0xcf && i+9 <= len(payload) {
			if v := binary.BigEndian.Uint64(payload[i+1:]); ph[v] {
				b := HashBytes(v)
				out = append(append(out, 0xc4, 32), b[:]...)
				i += 9
				continue
			}
		}
		out = append(out, payload[i])
		i++
	}
	return out
}

// publishKVEvents publishes the events of the step (or utility call) just run,
// as vLLM publishes each step's events in one batch.
func (e *engine) publishKVEvents() {
	if e.kv == nil {
		return
	}
	e.kvEvents = e.sched.TakeCacheEvents(e.kvEvents[:0])
	e.kv.publish(float64(time.Now().UnixNano())/1e9, e.kvEvents)
	clear(e.kvEvents)
}

// resetPrefixCache answers reset_prefix_cache(reset_running_requests=False,
// ...): with the cache on, vLLM's answer (false while requests hold blocks,
// unless forced) and an AllBlocksCleared published at once; without, true.
func (e *engine) resetPrefixCache(args wire.Raw) wire.Raw {
	var a []any
	if len(args) > 0 {
		_ = msgpack.Unmarshal(args, &a) // args were checked to be an array
	}
	force := len(a) > 0 && a[0] == true
	ok, _ := e.sched.ResetCache(force)
	e.publishKVEvents()
	if !ok {
		return rawFalse
	}
	return rawTrue
}
