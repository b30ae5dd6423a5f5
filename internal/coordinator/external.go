package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// subscribeAll is the XSUB subscription to every topic.
var subscribeAll = []byte{1}

// External follows vLLM's own Python DP coordinator when switchyard is one of
// several API servers behind it (vLLM's Rust client leaves this
// combination unimplemented). It connects an XSUB to the coordinator's
// stats address, takes counts, current_wave and engines_running from its
// publishes, and sends FIRST_REQ [identity, wave] when a request goes to
// engines it believes paused, exactly as a Python API server does.
//
// OnAdd and Wave are safe for concurrent use and never block.
type External struct {
	cfg  ExternalConfig
	load LoadSink
	net  transport.Network
	log  *slog.Logger
	m    *metrics

	state atomic.Uint64 // packState(current_wave, engines_running)

	postMu sync.Mutex
	posted []wire.FirstReq
	kick   chan struct{}

	mu      sync.Mutex
	started bool
	closed  bool
	sock    transport.Socket
	done    chan struct{}
	wg      sync.WaitGroup
}

// NewExternal validates cfg and returns an unstarted External; load may be
// nil.
func NewExternal(cfg ExternalConfig, load LoadSink) (*External, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, true)
	if err != nil {
		return nil, err
	}
	if load == nil {
		load = discardLoad{}
	}
	e := &External{
		cfg:  cfg,
		load: load,
		net:  cfg.Network,
		log:  cfg.Logger,
		m:    m,
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	if e.net == nil {
		e.net = transport.ZMQ
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e, nil
}

// Start connects to the coordinator and subscribes to everything. go-zeromq
// style Dial is synchronous: Start fails if the coordinator is not listening
// within DialTimeout.
func (e *External) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return ErrClosed
	case e.started:
		return ErrStarted
	}
	s, err := e.net.Dial(ctx, transport.XSub, e.cfg.StatsAddress,
		transport.Options{DialTimeout: e.cfg.DialTimeout, Logger: e.log})
	if err != nil {
		return &SocketError{"stats", e.cfg.StatsAddress, err}
	}
	if err := s.Send(subscribeAll); err != nil {
		s.Close()
		return &SocketError{"stats", e.cfg.StatsAddress, err}
	}
	e.sock = s
	e.started = true
	e.wg.Add(2)
	go func() { defer e.wg.Done(); e.readPublishes() }()
	go func() { defer e.wg.Done(); e.sendFirstReqs() }()
	e.log.Info("coordinator: following external coordinator", "address", e.cfg.StatsAddress, "waves", e.cfg.EnableWaves)
	return nil
}

// OnAdd implements dispatcher.WaveHook: it returns the wave of the latest
// publish and, when that publish said the engines are paused, sends FIRST_REQ
// once so the coordinator wakes the other ranks. The flag flips to running
// locally so a burst of requests sends one wake-up; the next publish
// overwrites it with the coordinator's view.
func (e *External) OnAdd(rank int) int64 {
	for {
		s := e.state.Load()
		wave, running := unpackState(s)
		if running || !e.cfg.EnableWaves {
			return wave
		}
		if e.state.CompareAndSwap(s, packState(wave, true)) {
			e.postMu.Lock()
			e.posted = append(e.posted, wire.FirstReq{Identity: wire.IdentityOf(rank), HasIdentity: true, Wave: wave})
			e.postMu.Unlock()
			select {
			case e.kick <- struct{}{}:
			default:
			}
			return wave
		}
	}
}

// Wave returns the wave OnAdd stamps now and whether the engines are
// believed running.
func (e *External) Wave() (current int64, running bool) { return unpackState(e.state.Load()) }

// Close disconnects; it is safe to call more than once and before Start.
func (e *External) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	started := e.started
	e.mu.Unlock()
	if !started {
		return nil
	}
	close(e.done)
	err := e.sock.Close()
	e.wg.Wait()
	return err
}

func (e *External) readPublishes() {
	for {
		frames, err := e.sock.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			// The single connection is gone and the transport does not
			// redial; keep the last state rather than guessing.
			e.log.Error("coordinator: lost the external coordinator", "address", e.cfg.StatsAddress, "err", err)
			continue
		}
		if err != nil {
			return
		}
		if len(frames) != 1 {
			e.log.Warn("coordinator: unexpected multipart publish", "frames", len(frames))
			continue
		}
		p, err := wire.DecodeCoordinatorPublish(frames[0])
		if err != nil {
			e.log.Warn("coordinator: undecodable publish", "err", err)
			continue
		}
		e.state.Store(packState(p.CurrentWave, p.EnginesRunning))
		e.m.setWave(p.CurrentWave, p.EnginesRunning)
		if e.cfg.IgnoreCounts {
			continue
		}
		for rank, c := range p.Counts {
			e.load.ObserveLoad(rank, c.Waiting, c.Running, c.KVCacheUsage)
		}
	}
}

func (e *External) sendFirstReqs() {
	var batch []wire.FirstReq
	var buf []byte
	for {
		select {
		case <-e.kick:
		case <-e.done:
			return
		}
		e.postMu.Lock()
		batch, e.posted = e.posted, batch[:0]
		e.postMu.Unlock()
		for _, f := range batch {
			buf = wire.AppendFirstReq(buf[:0], f)
			// XSUB data messages go to the coordinator's XPUB; the socket
			// does not retain buf after Send returns.
			if err := e.sock.Send(buf); err != nil {
				if errors.Is(err, transport.ErrClosed) {
					return
				}
				e.log.Warn("coordinator: FIRST_REQ not sent", "err", err)
				continue
			}
			e.m.firstReqs.Inc()
		}
	}
}
