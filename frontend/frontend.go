// Package frontend connects unmodified vLLM engine-core processes to switchyard: it
// owns the handshake (or, bootstrapped, the sockets a launcher handed out), tracks
// every engine by its rank, sends to each engine from that engine's own writer, and
// hands decoded outputs to a Handler. One engine dying, stalling or sending garbage
// takes down that engine only; see README.md.
package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// Handler receives engine events; the dispatcher implements it. For one engine
// generation the calls never overlap and come in order: EngineUp, then
// HandleOutputs in arrival order (from the rank's receive goroutine), then at most
// one EngineDown, after which no HandleOutputs follows. Calls for different ranks
// run concurrently. A handler must not block for long and must not wait for another
// handler call to return.
type Handler interface {
	// HandleOutputs receives one decoded message; outs is reused after the call.
	HandleOutputs(rank int, outs *wire.EngineCoreOutputs)
	// EngineUp: READY and registration seen; the rank may be routed to.
	EngineUp(rank int, info EngineInfo)
	// EngineDown: err is *EngineDeadError{Rank, Cause}; every in-flight request of
	// that rank must fail.
	EngineDown(rank int, err error)
}

// RefusalHandler is optionally implemented by a Handler that wants to hear of an
// engine refused before it ever came up (its vLLM wire layout cannot be placed;
// err is the *LayoutRefusedError): a request pinned to that rank can then say why
// rather than only that the rank is not connected. It is called from the control
// loop and must not block.
type RefusalHandler interface {
	EngineRefused(rank int, err error)
}

// Frontend is the engine-facing side of switchyard.
type Frontend struct {
	cfg     Config
	h       Handler
	log     *slog.Logger
	net     transport.Network
	metrics *metrics

	table    atomic.Pointer[table]
	refusedN atomic.Int64 // refused HELLOs, for tests and logs

	hsSock              transport.Socket // handshake ROUTER (owner mode)
	sharedIn, sharedOut transport.Socket // bootstrapped mode
	ipcDir              string
	ownIPCDir           bool

	events chan event
	// pending: a HELLO per rank waiting for that rank's abandoned generation to
	// be superseded (supersede.go). Owned by the control loop.
	pending map[int]pendingHello
	// extraLogged: per rank, the extra registration keys last logged (layout.go).
	// Owned by the control loop.
	extraLogged map[int]string
	// hsConn: per rank, how many of its handshake connections have left, which
	// numbers the current one. The transport admits one connection per identity
	// at a time and delivers its departure before the next one's messages, so
	// every handshake message is tied to the connection it came on. Owned by the
	// control loop.
	hsConn   map[int]uint64
	hsAck    chan struct{} // the control loop handled a handshake event (postHandshake)
	churn    churnLog      // rate of handshake log lines per rank
	stop     chan struct{}
	loopDone chan struct{}
	wg       sync.WaitGroup
	closer   sync.Once

	mu      sync.Mutex
	started bool
	changed chan struct{} // closed and replaced on every engine state change
}

// New validates cfg; nothing is bound until Start.
func New(cfg Config, h Handler) (*Frontend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if h == nil {
		return nil, errors.New("frontend: nil Handler")
	}
	if cfg.EngineTransport == "" {
		cfg.EngineTransport = "ipc"
	}
	f := &Frontend{
		cfg:      cfg,
		h:        h,
		log:      cfg.Logger,
		net:      cfg.Network,
		events:   make(chan event, 64),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
		hsAck:    make(chan struct{}, 1),
		changed:  make(chan struct{}),
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.net == nil {
		f.net = transport.ZMQ
	}
	m, err := newMetrics(cfg.Registerer, f)
	if err != nil {
		return nil, err
	}
	f.metrics = m
	f.table.Store(newTable())
	return f, nil
}

func (f *Frontend) now() time.Time { return time.Now() }

// sendTimeout is the transport write deadline: a backstop behind the watchdog, which
// marks a write stuck after StuckAfter.
func (f *Frontend) sendTimeout() time.Duration { return 2 * f.cfg.StuckAfter }

// Start binds the sockets and starts the loops; it returns once listening, without
// waiting for engines. Handshake-owner mode binds every rank's input ROUTER and
// output PULL before the handshake ROUTER, so INIT always carries live addresses.
func (f *Frontend) Start(ctx context.Context) (err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("frontend: already started")
	}
	f.started = true
	defer func() {
		if err != nil {
			f.closeSockets()
			close(f.loopDone) // run never started; Close must not wait for it
		}
	}()
	if f.cfg.Bootstrapped != nil {
		err = f.startBootstrapped(ctx)
	} else {
		err = f.startOwner(ctx)
	}
	if err != nil {
		return err
	}
	f.wg.Add(1)
	go f.run()
	return nil
}

func (f *Frontend) startOwner(ctx context.Context) error {
	if f.cfg.EngineTransport == "ipc" {
		f.ipcDir = f.cfg.IPCDir
		if f.ipcDir == "" {
			dir, err := os.MkdirTemp("", "switchyard-")
			if err != nil {
				return fmt.Errorf("frontend: ipc dir: %w", err)
			}
			f.ipcDir, f.ownIPCDir = dir, true
		}
	}
	t := newTable()
	var engines []*engine
	for rank := range f.cfg.DataParallelSize {
		in, out, sink, err := f.bindEngine(ctx, rank, 0)
		if err != nil {
			for _, e := range engines {
				e.in.Close()
				e.out.Close()
			}
			return err
		}
		e := f.newEngine(rank, 0, in, out, false, newHandshake(rank, f.cfg.PhaseTimeout))
		sink.e.Store(e)
		engines = append(engines, e)
		t = t.with(rank, e)
	}
	f.table.Store(t)
	// PeerEvents: an engine whose handshake connection closes between HELLO and
	// READY died while starting (the model load OOMed...); see onHandshakeLeft.
	hs, err := f.net.Listen(ctx, transport.Router, f.cfg.HandshakeAddress, transport.Options{
		MaxFrameSize: 1 << 20, SendTimeout: f.sendTimeout(), PeerEvents: true, Logger: f.log,
	})
	if err != nil {
		return fmt.Errorf("frontend: handshake socket: %w", err)
	}
	f.hsSock = hs
	for _, e := range engines {
		e.start()
	}
	f.wg.Add(1)
	go f.handshakeLoop()
	f.log.Info("frontend: listening", "handshake", hs.Addr(), "ranks", f.cfg.DataParallelSize, "engine_transport", f.cfg.EngineTransport)
	return nil
}

// bindEngine binds one rank's own input ROUTER and output PULL. Giving every engine
// its own pair (INIT is answered per engine) attributes every frame, disconnect and
// sentinel to one rank, and a stalled engine cannot hold a lock another engine needs.
// The output PULL delivers to sink, which the caller points at the engine it makes.
func (f *Frontend) bindEngine(ctx context.Context, rank, gen int) (in, out transport.Socket, sink *outputSink, err error) {
	var inEP, outEP string
	if f.cfg.EngineTransport == "tcp" {
		inEP = "tcp://" + net.JoinHostPort(f.cfg.BindHost, "0")
		outEP = inEP
	} else {
		inEP = "ipc://" + filepath.Join(f.ipcDir, fmt.Sprintf("r%d-g%d-in", rank, gen))
		outEP = "ipc://" + filepath.Join(f.ipcDir, fmt.Sprintf("r%d-g%d-out", rank, gen))
	}
	opt := f.engineSocketOptions()
	if in, err = f.net.Listen(ctx, transport.Router, inEP, opt); err != nil {
		return nil, nil, nil, fmt.Errorf("frontend: rank %d input socket: %w", rank, err)
	}
	opt.PeerEvents = false
	sink = &outputSink{}
	opt.Handler = sink.handle
	if out, err = f.net.Listen(ctx, transport.Pull, outEP, opt); err != nil {
		in.Close()
		return nil, nil, nil, fmt.Errorf("frontend: rank %d output socket: %w", rank, err)
	}
	return in, out, sink, nil
}

// engineSocketOptions are the options of the sockets engines connect to (input
// ROUTER with departures reported, output PULL).
func (f *Frontend) engineSocketOptions() transport.Options {
	return transport.Options{
		MaxFrameSize: f.cfg.MaxFrameSize, MaxMessageSize: f.cfg.MaxMessageSize,
		SendTimeout: f.sendTimeout(), PeerEvents: true, Logger: f.log,
	}
}

// HandshakeAddress is the resolved handshake endpoint (empty when bootstrapped).
func (f *Frontend) HandshakeAddress() string {
	if f.hsSock == nil {
		return ""
	}
	return f.hsSock.Addr()
}

// Send is SendFrom for an anonymous client, waiting at most Config.SendWait.
func (f *Frontend) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	return f.SendFrom(context.Background(), 0, rank, typ, body, aux)
}

// SendFrom queues one request for rank on behalf of client (any key that
// tells submitters apart; 0 = anonymous). Ownership of body passes to the
// frontend, which returns it with wire.PutBuffer after the socket write (or at
// once on error).
//
// A full send queue is backpressure: an ADD waits for room, and while several
// clients wait each gets its fair share of the queue, so one client's burst
// queues behind itself. The wait ends with ctx or after Config.SendWait,
// whichever is first, with a *QueueFullError. ABORT, UTILITY and
// START_DP_WAVE never wait. Other errors: *EngineDeadError (also while the
// rank is still connecting, with Cause ErrNotReady), *EngineStuckError (even
// the reserve for non-ADD messages is full), *UnknownRankError.
func (f *Frontend) SendFrom(ctx context.Context, client uint64, rank int, typ byte, body []byte, aux [][]byte) error {
	t := f.table.Load()
	e := t.get(rank)
	if e == nil {
		wire.PutBuffer(body)
		return &UnknownRankError{Rank: rank, Connected: t.readyRanks()}
	}
	if typ > wire.RequestUtility {
		wire.PutBuffer(body)
		return fmt.Errorf("frontend: refusing request type %#x (engines kill their input thread on it)", typ)
	}
	if err := e.enqueue(ctx, client, sendItem{typ: typ, body: body, aux: aux}, typ == wire.RequestAdd); err != nil {
		wire.PutBuffer(body)
		return err
	}
	return nil
}

// Engines lists every managed rank in rank order, from a lock-free snapshot.
func (f *Frontend) Engines() []EngineInfo {
	t := f.table.Load()
	out := make([]EngineInfo, 0, len(t.ranks))
	for _, r := range t.ranks {
		e := t.byRank[r]
		info := *e.info.Load()
		if ns := e.lastOutput.Load(); ns != 0 {
			info.LastOutput = time.Unix(0, ns)
		}
		out = append(out, info)
	}
	return out
}

// WaitReady waits until n engines are Ready and the handler has heard so (its EngineUp
// returned, so a request can be routed to them at once). It fails early when fewer than n ranks
// can still come up (their handshakes failed: the error names rank and phase).
func (f *Frontend) WaitReady(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		ch := f.changed
		f.mu.Unlock()
		t := f.table.Load()
		up, possible := 0, 0
		var errs []error
		for _, r := range t.ranks {
			e := t.byRank[r]
			switch e.state() {
			case Ready:
				// The send path turns Ready just before EngineUp; the info only once
				// EngineUp returned, when the handler routes to the rank.
				if e.info.Load().State == Ready {
					up++
				}
				possible++
			case Connecting:
				possible++
			default:
				if d := e.dead.Load(); d != nil {
					errs = append(errs, d)
				}
			}
		}
		if up >= n {
			return nil
		}
		if possible < n {
			return fmt.Errorf("frontend: %d engine(s) cannot become ready: %w", n-possible, errors.Join(errs...))
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("frontend: %d of %d engines ready: %w", up, n, ctx.Err())
		case <-f.stop:
			return ErrClosed
		}
	}
}

// notify wakes WaitReady and refreshes the state gauges.
func (f *Frontend) notify() {
	f.mu.Lock()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	f.metrics.refresh()
}

// Close stops everything: every engine goes down with ErrClosed (EngineDown is
// called for those that were up), sockets close, and Close returns once no
// goroutine of the frontend is left.
func (f *Frontend) Close() error {
	f.closer.Do(func() {
		f.mu.Lock()
		started := f.started
		f.started = true // a Start after Close fails
		f.mu.Unlock()
		close(f.stop)
		if started {
			<-f.loopDone
		}
		for _, e := range f.table.Load().byRank {
			f.markDown(e, Dead, ErrClosed)
		}
		f.closeSockets()
		f.wg.Wait()
		if f.ownIPCDir {
			os.RemoveAll(f.ipcDir)
		}
	})
	return nil
}

func (f *Frontend) closeSockets() {
	for _, s := range []transport.Socket{f.hsSock, f.sharedIn, f.sharedOut} {
		if s != nil {
			s.Close()
		}
	}
	for _, e := range f.table.Load().byRank {
		if !e.shared {
			e.in.Close()
			e.out.Close()
		}
	}
}
