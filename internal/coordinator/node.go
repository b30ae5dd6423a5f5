package coordinator

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// LoadSink receives every engine's load as soon as the coordinator learns
// it. The dispatcher satisfies it. ObserveLoad is called from the node's loop
// goroutine and must not block.
type LoadSink interface {
	ObserveLoad(rank int, waiting, running int64, kvCacheUsage float64)
}

// readyFrame is the coordinator's go-ahead on the back XPUB; the engine's
// input thread blocks on it after subscribing.
var readyFrame = []byte("READY")

// sendQueue bounds the frames waiting for a socket's writer goroutine. The
// loop blocks when it is full: dropping a START_DP_WAVE could hang the
// lockstep. It does not fill because of one slow engine: an XPUB Send only
// queues the message for each subscriber (transport.Options.SendHWM, 1000 by
// default) and each subscriber has its own writer, so an engine that stops
// reading delays nobody else. Once its own queue is full, broadcasts are dropped
// for it alone, as libzmq's XPUB does at SNDHWM (it is not stepping then
// anyway), and a write to it pending longer than the transport's SendTimeout
// disconnects it.
const sendQueue = 256

// Node is the in-process coordinator's socket edge: it binds the engine-facing
// back XPUB and PULL (and the front XPUB when configured) and runs one loop
// goroutine that owns the [Coordinator]. OnAdd, EngineReady and Wave are safe
// for concurrent use and never block.
type Node struct {
	cfg  Config
	load LoadSink
	net  transport.Network
	log  *slog.Logger
	m    *metrics
	co   *Coordinator // owned by run

	// state packs (current_wave, engines_running) into one word so OnAdd
	// stamps a wave and decides on a wake-up from the same snapshot; a wave
	// read from after a wave_complete with a running flag from before it
	// would stamp the new wave without waking the other ranks.
	state atomic.Uint64

	postMu sync.Mutex
	posted []Event       // from OnAdd / EngineReady, drained by run
	kick   chan struct{} // capacity 1: "posted is not empty"

	events chan Event // from the socket readers

	mu      sync.Mutex
	started bool
	closed  bool
	in, out transport.Socket // back XPUB, PULL
	pub     transport.Socket // front XPUB or nil
	inq     chan [][]byte
	pubq    chan [][]byte
	done    chan struct{}
	wg      sync.WaitGroup
}

// NewNode validates cfg and returns an unstarted Node; load may be nil.
func NewNode(cfg Config, load LoadSink) (*Node, error) {
	co, err := New(cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer, false)
	if err != nil {
		return nil, err
	}
	if load == nil {
		load = discardLoad{}
	}
	n := &Node{
		cfg:    cfg,
		load:   load,
		net:    cfg.Network,
		log:    co.log,
		m:      m,
		co:     co,
		kick:   make(chan struct{}, 1),
		events: make(chan Event, 256),
		inq:    make(chan [][]byte, sendQueue),
		pubq:   make(chan [][]byte, sendQueue),
		done:   make(chan struct{}),
	}
	if n.net == nil {
		n.net = transport.ZMQ
	}
	return n, nil
}

type discardLoad struct{}

func (discardLoad) ObserveLoad(int, int64, int64, float64) {}

// Start binds the sockets and starts the loop. It returns once every socket
// is listening, so InputAddress and OutputAddress can go into INIT. ctx
// bounds only the setup; the node runs until Close.
func (n *Node) Start(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case n.closed:
		return ErrClosed
	case n.started:
		return ErrStarted
	}
	opt := transport.Options{Logger: n.log}
	var err error
	if n.in, err = n.net.Listen(ctx, transport.XPub, n.cfg.InputAddress, opt); err != nil {
		return &SocketError{"input", n.cfg.InputAddress, err}
	}
	if n.out, err = n.net.Listen(ctx, transport.Pull, n.cfg.OutputAddress, opt); err != nil {
		n.in.Close()
		return &SocketError{"output", n.cfg.OutputAddress, err}
	}
	if n.cfg.PublishAddress != "" {
		if n.pub, err = n.net.Listen(ctx, transport.XPub, n.cfg.PublishAddress, opt); err != nil {
			n.in.Close()
			n.out.Close()
			return &SocketError{"publish", n.cfg.PublishAddress, err}
		}
	}
	n.started = true
	n.goRun(n.run)
	n.goRun(n.readOutputs)
	n.goRun(n.readBack)
	n.goRun(func() { n.write("input", n.in, n.inq) })
	if n.pub != nil {
		n.goRun(n.readFront)
		n.goRun(func() { n.write("publish", n.pub, n.pubq) })
	}
	pubAddr := ""
	if n.pub != nil {
		pubAddr = n.pub.Addr()
	}
	n.log.Info("coordinator: listening", "input", n.in.Addr(), "output", n.out.Addr(),
		"publish", pubAddr, "engines", n.cfg.Engines, "waves", n.cfg.EnableWaves)
	return nil
}

func (n *Node) goRun(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// InputAddress is the bound back XPUB endpoint (INIT's coordinator_input);
// "" before Start.
func (n *Node) InputAddress() string { return addrOf(&n.mu, &n.in) }

// OutputAddress is the bound PULL endpoint (INIT's coordinator_output).
func (n *Node) OutputAddress() string { return addrOf(&n.mu, &n.out) }

// PublishAddress is the bound front XPUB endpoint (the stats address other
// API servers subscribe to), "" when off.
func (n *Node) PublishAddress() string { return addrOf(&n.mu, &n.pub) }

func addrOf(mu *sync.Mutex, s *transport.Socket) string {
	mu.Lock()
	defer mu.Unlock()
	if *s == nil {
		return ""
	}
	return (*s).Addr()
}

// OnAdd implements dispatcher.WaveHook: it returns the wave to stamp on an
// ADD for rank and, when the engines are paused, asks the loop to broadcast
// START_DP_WAVE(wave, exclude=rank) so the other ranks join the lockstep.
// Only the first request of a paused period posts the wake-up (atomics and a
// non-blocking signal; no lock on the running path).
func (n *Node) OnAdd(rank int) int64 {
	if !n.cfg.EnableWaves {
		return 0
	}
	for {
		s := n.state.Load()
		wave, running := unpackState(s)
		if running {
			return wave
		}
		// Flip to running ourselves so concurrent OnAdds do not post again;
		// the loop overwrites it with the coordinator's own view.
		if n.state.CompareAndSwap(s, packState(wave, true)) {
			n.post(Event{Type: EventRequestArrived, Rank: rank, Wave: wave})
			return wave
		}
	}
}

// EngineReady records that the frontend saw rank's handshake READY, which an
// engine sends only after our READY reached it; once every rank is ready,
// READY is no longer re-sent.
func (n *Node) EngineReady(rank int) {
	n.post(Event{Type: EventEngineReady, Rank: rank})
}

// Wave returns the wave OnAdd stamps now and whether the engines are
// (believed) running.
func (n *Node) Wave() (current int64, running bool) { return unpackState(n.state.Load()) }

func (n *Node) post(ev Event) {
	n.postMu.Lock()
	n.posted = append(n.posted, ev)
	n.postMu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func packState(wave int64, running bool) uint64 {
	s := uint64(wave) << 1
	if running {
		s |= 1
	}
	return s
}

func unpackState(s uint64) (wave int64, running bool) { return int64(s >> 1), s&1 == 1 }

// Close stops the loop and closes the sockets; it is safe to call more than
// once and before Start.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	started := n.started
	n.mu.Unlock()
	if !started {
		return nil
	}
	close(n.done)
	var errs []error
	for _, s := range []transport.Socket{n.in, n.out, n.pub} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	n.wg.Wait()
	return errors.Join(errs...)
}

// run is the only goroutine that touches the Coordinator: events in,
// messages out, and a timer for what Tick has scheduled.
func (n *Node) run() {
	timer := time.NewTimer(0) // the first Tick sends READY and the first publish
	defer timer.Stop()
	var batch []Event
	for {
		select {
		case ev := <-n.events:
			n.apply(n.co.Step(ev))
		case <-n.kick:
			n.postMu.Lock()
			batch, n.posted = n.posted, batch[:0]
			n.postMu.Unlock()
			for _, ev := range batch {
				n.apply(n.co.Step(ev))
			}
		case now := <-timer.C:
			n.apply(n.co.Tick(now))
		case <-n.done:
			return
		}
		if d, ok := n.co.Deadline(); ok {
			timer.Reset(max(0, time.Until(d)))
		} else {
			timer.Stop()
		}
	}
}

// apply delivers the coordinator's messages. Socket sends go through each
// socket's writer goroutine, and the XPUBs queue per subscriber, so a slow peer
// never stalls the loop or the other peers.
func (n *Node) apply(msgs []Message) {
	for i := range msgs {
		m := &msgs[i]
		switch m.Type {
		case MsgReady:
			n.enqueue(n.inq, [][]byte{readyFrame})
		case MsgStartWave:
			body := wire.AppendStartDPWave(nil, wire.StartDPWave{Wave: m.Wave, Exclude: m.Exclude})
			n.enqueue(n.inq, [][]byte{{wire.RequestStartDPWave}, body})
			n.m.startWaves.Inc()
			n.log.Debug("coordinator: START_DP_WAVE", "wave", m.Wave, "exclude", m.Exclude)
		case MsgPublish:
			if n.pub != nil {
				body := wire.AppendCoordinatorPublish(nil, &wire.CoordinatorPublish{
					Counts: m.Counts, CurrentWave: m.Wave, EnginesRunning: m.Running,
				})
				n.enqueue(n.pubq, [][]byte{body})
			}
		case MsgLoad:
			n.load.ObserveLoad(m.Rank, m.Load.Waiting, m.Load.Running, m.Load.KVCacheUsage)
		case MsgWaveState:
			n.state.Store(packState(m.Wave, m.Running))
			n.m.setWave(m.Wave, m.Running)
			if m.Completed {
				n.m.completions.Inc()
			}
		}
	}
}

func (n *Node) enqueue(q chan [][]byte, frames [][]byte) {
	select {
	case q <- frames:
	case <-n.done:
	}
}

func (n *Node) write(name string, s transport.Socket, q chan [][]byte) {
	for {
		select {
		case frames := <-q:
			if err := s.Send(frames...); err != nil {
				if errors.Is(err, transport.ErrClosed) {
					return
				}
				n.log.Warn("coordinator: send failed", "socket", name, "err", err)
			}
		case <-n.done:
			return
		}
	}
}

func (n *Node) emit(ev Event) bool {
	select {
	case n.events <- ev:
		return true
	case <-n.done:
		return false
	}
}

// readOutputs decodes the engines' messages on the coordinator PULL.
func (n *Node) readOutputs() {
	var (
		dec     wire.OutputsDecoder
		o       wire.EngineCoreOutputs
		evs     []Event
		ignored bool
	)
	for {
		frames, err := n.out.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			n.log.Debug("coordinator: engine output connection closed", "err", err)
			continue
		}
		if err != nil {
			return
		}
		if wire.IsEngineCoreDead(frames) {
			n.log.Warn("coordinator: an engine reported ENGINE_CORE_DEAD on the coordinator socket")
			continue
		}
		if err := dec.Decode(frames, &o); err != nil {
			n.log.Warn("coordinator: undecodable engine message", "err", err)
			continue
		}
		evs, ignored = OutputsEvents(evs[:0], &o)
		if ignored {
			n.log.Warn("coordinator: request outputs on the coordinator socket ignored", "rank", o.EngineIndex)
		}
		for _, ev := range evs {
			if !n.emit(ev) {
				return
			}
		}
	}
}

// readBack watches the back XPUB for engine subscriptions: each one is an
// engine's input thread waiting for READY.
func (n *Node) readBack() {
	for {
		frames, err := n.in.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			continue
		}
		if err != nil {
			return
		}
		if len(frames) == 1 && len(frames[0]) >= 1 && frames[0][0] == 1 {
			if !n.emit(Event{Type: EventSubscribed}) {
				return
			}
			continue
		}
		if len(frames) == 1 && len(frames[0]) >= 1 && frames[0][0] == 0 {
			continue // unsubscribe: the engine is going away
		}
		n.log.Warn("coordinator: unexpected message from an engine on the input socket", "frames", len(frames))
	}
}

// readFront takes FIRST_REQ wake-ups from other API servers on the front XPUB.
func (n *Node) readFront() {
	for {
		frames, err := n.pub.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			continue
		}
		if err != nil {
			return
		}
		if len(frames) != 1 || len(frames[0]) == 0 || frames[0][0] <= 1 {
			continue // (un)subscription of a frontend
		}
		f, err := wire.DecodeFirstReq(frames[0])
		if err != nil {
			// SCALE_ELASTIC_EP and unknown messages: elastic EP is not supported.
			n.log.Warn("coordinator: unsupported message from a frontend", "err", err)
			continue
		}
		if !n.emit(FirstReqEvent(f)) {
			return
		}
	}
}
