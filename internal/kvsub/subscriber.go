package kvsub

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// Sink receives what the subscriber learns. Calls for one rank come in seq order from
// that rank's goroutine; calls for different ranks run concurrently. A Sink must not
// block for long: the rank's PUB drops what its high-water mark cannot hold.
type Sink interface {
	// KVBatch hands over rank's next batch; b is reused after the call returns.
	KVBatch(rank int, b *wire.KVEventBatch)
	// KVClear says rank's index can no longer be trusted: a gap no replay
	// covered, or a seq that went back (the engine restarted).
	KVClear(rank int, reason string)
}

// Target is one rank's publisher, resolved (see Resolve).
type Target struct {
	Endpoint Resolved
	Replay   string // "" = none: a gap clears the rank's index
	Topic    string // subscription prefix
	// Given is the endpoint as configured, for status and logs.
	Given string
}

// Config configures a Subscriber. Zero fields take the defaults.
type Config struct {
	Logger  *slog.Logger
	Network transport.Network // nil = transport.ZMQ
	// ReplayTimeout bounds each wait of a replay: the dial, then each answer (a
	// buffer of thousands of batches takes its time on a loaded machine, and is
	// not cut off while it keeps coming). The whole replay is bounded by
	// replayWaits of them and by MaxReplay. 0 = 2 s.
	ReplayTimeout time.Duration
	// MaxMessageSize bounds one message from a publisher. 0 = 64 MiB.
	MaxMessageSize int
	// Retry is the pause between attempts to reach a publisher. 0 = 500 ms.
	Retry time.Duration
	// MaxReplay bounds the messages one replay applies. 0 = 100,000.
	MaxReplay int
	// CatchUp: after this long without a message, the replay buffer is asked for
	// what the SUB may have missed (needs a replay endpoint). 0 = 1 s.
	CatchUp time.Duration
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Network == nil {
		c.Network = transport.ZMQ
	}
	if c.ReplayTimeout <= 0 {
		c.ReplayTimeout = 2 * time.Second
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = 64 << 20
	}
	if c.Retry <= 0 {
		c.Retry = 500 * time.Millisecond
	}
	if c.MaxReplay <= 0 {
		c.MaxReplay = 100_000
	}
	if c.CatchUp <= 0 {
		c.CatchUp = time.Second
	}
	return c
}

// Status is one rank's subscription as /v1/engines shows it.
type Status struct {
	Endpoint  string `json:"endpoint"`
	Connected bool   `json:"connected"`
	LastSeq   int64  `json:"last_seq"`
	Gaps      int64  `json:"gaps"`
	Replays   int64  `json:"replays"`
	// Undecodable counts messages that were not a KV-event batch.
	Undecodable int64 `json:"undecodable"`
}

// Subscriber follows the publishers of many ranks, one goroutine each.
type Subscriber struct {
	cfg  Config
	sink Sink

	mu     sync.Mutex
	ranks  map[int]*rankSub
	closed bool
	wg     sync.WaitGroup
}

// New returns a Subscriber that follows nothing until Set.
func New(cfg Config, sink Sink) *Subscriber {
	return &Subscriber{cfg: cfg.withDefaults(), sink: sink, ranks: map[int]*rankSub{}}
}

// Set follows rank's publisher at t, replacing a different earlier target (whose
// goroutine is stopped and joined first). The same target again is a no-op, so a
// caller may Set on every engine-up.
func (s *Subscriber) Set(rank int, t Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if old := s.ranks[rank]; old != nil {
		if old.target == t {
			return
		}
		old.halt()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rankSub{s: s, rank: rank, target: t, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	r.lastSeq.Store(-1)
	s.ranks[rank] = r
	s.wg.Add(1)
	go r.run()
}

// Drop stops following rank.
func (s *Subscriber) Drop(rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.ranks[rank]; r != nil {
		r.halt()
		delete(s.ranks, rank)
	}
}

// Status reports rank's subscription; false when rank has none.
func (s *Subscriber) Status(rank int) (Status, bool) {
	s.mu.Lock()
	r := s.ranks[rank]
	s.mu.Unlock()
	if r == nil {
		return Status{}, false
	}
	return Status{
		Endpoint: r.target.Endpoint.Addr, Connected: r.isConnected(), LastSeq: r.lastSeq.Load(),
		Gaps: r.gaps.Load(), Replays: r.replays.Load(), Undecodable: r.bad.Load(),
	}, true
}

// Close stops every rank's goroutine and waits for them.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	s.closed = true
	for rank, r := range s.ranks {
		r.cancel()
		r.closeSock()
		delete(s.ranks, rank)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// rankSub is one rank's goroutine and its counters.
type rankSub struct {
	s      *Subscriber
	rank   int
	target Target
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	sockMu     sync.Mutex
	sock       transport.Socket
	replaySock transport.Socket // open only during a replay
	replayStop *time.Timer      // its deadline

	connected          atomic.Bool
	lastSeq            atomic.Int64
	gaps, replays, bad atomic.Int64
	lastGapLog         time.Time // the goroutine's own
}

// halt stops the goroutine and waits for it.
func (r *rankSub) halt() {
	r.cancel()
	r.closeSock()
	<-r.done
}

func (r *rankSub) closeSock() {
	r.sockMu.Lock()
	defer r.sockMu.Unlock()
	if r.sock != nil {
		r.sock.Close()
	}
	if r.replaySock != nil {
		r.replaySock.Close()
	}
}

// isConnected: a dialled publisher is connected while its connection lasts; a bound
// SUB while an engine's PUB is connected to it.
func (r *rankSub) isConnected() bool {
	if !r.target.Endpoint.Bind {
		return r.connected.Load()
	}
	r.sockMu.Lock()
	defer r.sockMu.Unlock()
	if pc, ok := r.sock.(transport.PeerCounter); ok && r.sock != nil {
		return pc.PeerCount() > 0
	}
	return r.connected.Load()
}

func (r *rankSub) setSock(sock transport.Socket) bool {
	r.sockMu.Lock()
	defer r.sockMu.Unlock()
	if r.ctx.Err() != nil {
		return false
	}
	r.sock = sock
	return true
}

func (r *rankSub) run() {
	defer r.s.wg.Done()
	defer close(r.done)
	var (
		dec wire.KVBatchDecoder
		tr  tracker
	)
	log := r.s.cfg.Logger
	for r.ctx.Err() == nil {
		sock, err := r.open()
		if err != nil {
			if r.ctx.Err() == nil {
				log.Debug("kv events: publisher not reachable yet", "rank", r.rank, "endpoint", r.target.Endpoint.Addr, "err", err)
				r.pause()
			}
			continue
		}
		if !r.setSock(sock) {
			sock.Close()
			return
		}
		// A bound SUB is connected once an engine's message arrives.
		r.connected.Store(!r.target.Endpoint.Bind)
		log.Info("kv events: subscribed", "rank", r.rank, "endpoint", r.target.Endpoint.Addr,
			"bind", r.target.Endpoint.Bind, "replay", r.target.Replay, "topic", r.target.Topic)
		r.receive(sock, &dec, &tr)
		r.lostPublisher(&tr)
		r.connected.Store(false)
		sock.Close()
		if r.ctx.Err() == nil {
			log.Info("kv events: publisher went away; reconnecting", "rank", r.rank, "endpoint", r.target.Endpoint.Addr)
			r.pause()
		}
	}
}

func (r *rankSub) pause() {
	t := time.NewTimer(r.s.cfg.Retry)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
	case <-t.C:
	}
}

// open reaches the publisher: dial an engine that binds, bind for one that connects.
// A bind that finds the address taken or not local means the engine bound it after
// all (an operator who named the engine's own host): dial it instead.
func (r *rankSub) open() (transport.Socket, error) {
	opt := transport.Options{MaxMessageSize: r.s.cfg.MaxMessageSize, PeerEvents: true,
		DialTimeout: 5 * time.Second}
	net := r.s.cfg.Network
	var (
		sock transport.Socket
		err  error
	)
	if r.target.Endpoint.Bind {
		sock, err = net.Listen(r.ctx, transport.Sub, r.target.Endpoint.Addr, opt)
		if err != nil && (errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, syscall.EADDRNOTAVAIL)) {
			sock, err = net.Dial(r.ctx, transport.Sub, r.target.Endpoint.Addr, opt)
		}
	} else {
		sock, err = net.Dial(r.ctx, transport.Sub, r.target.Endpoint.Addr, opt)
	}
	if err != nil {
		return nil, err
	}
	if err := sock.Send(append([]byte{1}, r.target.Topic...)); err != nil {
		sock.Close()
		return nil, err
	}
	return sock, nil
}
