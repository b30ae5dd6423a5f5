package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

type sendItem struct {
	typ     byte
	body    []byte
	aux     [][]byte
	client  uint64 // who submitted it, for the fair share
	counted bool   // counted against client's share (ADDs)
}

// engine is one generation of one rank: its sockets, its send queue and writer, and
// its lifecycle. A rejoin makes a new engine value for the same rank.
type engine struct {
	f    *Frontend
	rank int
	id   wire.Identity
	gen  int

	in      transport.Socket // own input ROUTER, or the shared one (bootstrapped)
	out     transport.Socket // own output PULL; nil when shared
	outFail chan error       // the output reader's fatal cause, for outputWatch (own sockets)
	shared  bool

	sendq        *sendQueue
	now          nowWriter    // writes from the submitter while the writer is idle
	st           atomic.Int32 // EngineState, read by Send without locks
	pendingSince atomic.Int64 // unix nanos of the socket write in progress; 0 = none
	w            engineWriter // the one writer's scratch, owned by writeLoop
	lastOutput   atomic.Int64
	inputGone    atomic.Int64 // unix nanos when the input DEALER disconnected; 0 = connected
	info         atomic.Pointer[EngineInfo]
	dead         atomic.Pointer[EngineDeadError] // set once, before st leaves Ready
	// layout is the engine's vLLM wire layout once placed (nil before: only probe
	// replies, which every layout frames alike, are read then). confirmed is set by
	// the first output message with entries that fits it.
	layout    atomic.Pointer[wire.Layout]
	confirmed atomic.Bool

	// deliverMu orders the handler calls of this engine: EngineUp, HandleOutputs...,
	// EngineDown never overlap and EngineDown is the last one.
	deliverMu sync.Mutex
	isDown    bool
	wasUp     bool
	cause     error
	down      chan struct{} // closed when the engine goes down

	hs *handshake // owned by the control loop
}

func (f *Frontend) newEngine(rank, gen int, in, out transport.Socket, shared bool, hs *handshake) *engine {
	e := &engine{
		f: f, rank: rank, id: wire.IdentityOf(rank), gen: gen,
		in: in, out: out, shared: shared,
		sendq:   newSendQueue(f.cfg.SendQueue),
		down:    make(chan struct{}),
		outFail: make(chan error, 1),
		hs:      hs,
	}
	e.st.Store(int32(Connecting))
	e.info.Store(&EngineInfo{Rank: rank, Identity: e.id, State: Connecting, Since: f.now(), Generation: gen})
	return e
}

func (e *engine) state() EngineState { return EngineState(e.st.Load()) }

// start launches the engine's goroutines: its writer, and for own sockets the
// registration reader (input ROUTER) and the output reader (output PULL).
func (e *engine) start() {
	e.f.wg.Add(1)
	go e.writeLoop()
	if !e.shared {
		e.f.wg.Add(2)
		go e.inputLoop()
		go e.outputWatch()
	}
}

// enqueue queues one message. An ADD (wait) whose queue is full, or whose
// client is over its fair share, waits for room until ctx ends or SendWait
// passes (then *QueueFullError) or the engine goes down; other messages never wait, and a
// queue full even past its reserve refuses them with *EngineStuckError.
func (e *engine) enqueue(ctx context.Context, client uint64, it sendItem, wait bool) error {
	if err := e.routable(); err != nil {
		return err
	}
	if e.sendNow(it) {
		return nil
	}
	ok, room := e.sendq.tryPush(client, it, wait)
	if ok {
		return nil
	}
	if room == nil {
		return e.routable()
	}
	if !wait {
		e.f.metrics.queueFull.Inc()
		return &EngineStuckError{Rank: e.rank, Queued: e.sendq.queued()}
	}
	if ctx.Err() != nil {
		// A caller that cannot wait (a P/D handoff on a receive goroutine) is told
		// at once, without counting a wait or taking a share of the queue.
		return &QueueFullError{Rank: e.rank, Queued: e.sendq.queued(), Cause: context.Cause(ctx)}
	}
	// Only a send that has to wait pays for a timer.
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > e.f.cfg.SendWait {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, e.f.cfg.SendWait, ErrSendWait)
		defer cancel()
	}
	e.f.metrics.queueWaits.Inc()
	e.sendq.setWaiting(client, 1)
	defer e.sendq.setWaiting(client, -1)
	for {
		select {
		case <-room:
		case <-e.down:
			return e.routable()
		case <-ctx.Done():
			e.f.metrics.queueFull.Inc()
			return &QueueFullError{Rank: e.rank, Queued: e.sendq.queued(), Cause: context.Cause(ctx)}
		}
		if err := e.routable(); err != nil {
			return err
		}
		if ok, room = e.sendq.tryPush(client, it, true); ok {
			return nil
		}
		if room == nil {
			return e.routable()
		}
	}
}

// routable returns nil while the engine takes messages, else why not.
func (e *engine) routable() error {
	switch s := e.state(); s {
	case Ready:
		return nil
	case Stuck, Dead:
		if d := e.dead.Load(); d != nil {
			return d
		}
		return &EngineDeadError{Rank: e.rank, Cause: e.deadCause()}
	}
	if e.isClosing() {
		return &EngineDeadError{Rank: e.rank, Cause: e.deadCause()}
	}
	return &EngineDeadError{Rank: e.rank, Cause: ErrNotReady}
}

func (e *engine) isClosing() bool {
	select {
	case <-e.down:
		return true
	default:
		return false
	}
}

// enqueueProbe queues a layout probe while the engine is still connecting: the one
// message an engine is sent before it is placed on a layout.
func (e *engine) enqueueProbe(body []byte) error {
	if ok, _ := e.sendq.tryPush(0, sendItem{typ: wire.RequestUtility, body: body}, false); !ok {
		return &EngineStuckError{Rank: e.rank, Queued: e.sendq.queued()}
	}
	return nil
}

func (e *engine) deadCause() error {
	if d := e.dead.Load(); d != nil {
		return d.Cause
	}
	return ErrEngineLeft
}

// maxWriteBatch bounds how many queued frames one socket write carries.
const maxWriteBatch = 64

// writeLoop is the engine's writer for everything that has to wait: one socket
// write at a time, timed so the watchdog can see a write that does not complete.
// Whatever queued up while the previous write was in progress goes out in one
// writev (transport.SendBatch), so a burst of ADDs costs one system call instead
// of one each. A message that finds the writer idle and nothing queued is written
// by its submitter instead (sendNow), without waiting on the engine.
func (e *engine) writeLoop() {
	defer e.f.wg.Done()
	for {
		select {
		case <-e.sendq.ready:
		case <-e.down:
			e.sendq.close()
			return
		}
		e.flush()
	}
}

// engineWriter is the write loop's scratch space, reused across batches.
type engineWriter struct {
	items  []sendItem
	frames [][]byte
	msgs   [][][]byte
	ends   []int
}

// flush writes queued messages until the queue is empty. The wake-up token is taken
// before each look at the queue, so a message pushed after the last look leaves a
// token and the write loop sends it. A failed write marks the engine down.
func (e *engine) flush() {
	w := &e.w
	for {
		select {
		case <-e.sendq.ready:
		default:
		}
		// Held from the pop to the end of the write: a submitter that finds it
		// free and the queue empty knows everything queued before it is in the
		// socket's order already.
		e.now.mu.Lock()
		w.items = e.sendq.popBatch(w.items[:0], maxWriteBatch)
		if len(w.items) == 0 {
			e.now.mu.Unlock()
			return
		}
		// Frames first, then the message windows: frames must not move once
		// msgs point into it.
		w.frames, w.ends = w.frames[:0], w.ends[:0]
		for _, it := range w.items {
			w.frames = append(w.frames, e.id[:], typeFrames[it.typ&3], it.body)
			w.frames = append(w.frames, it.aux...)
			w.ends = append(w.ends, len(w.frames))
		}
		w.msgs = w.msgs[:0]
		start := 0
		for _, end := range w.ends {
			w.msgs = append(w.msgs, w.frames[start:end:end])
			start = end
		}
		var err error
		e.pendingSince.Store(time.Now().UnixNano())
		transport.SendBatch(e.in, w.msgs, func(_ int, ferr error) {
			if err == nil {
				err = ferr
			}
		})
		e.pendingSince.Store(0)
		e.now.mu.Unlock()
		for i := range w.items {
			wire.PutBuffer(w.items[i].body)
		}
		clear(w.items)
		clear(w.frames)
		clear(w.msgs)
		if err != nil {
			if errors.Is(err, transport.ErrSendTimeout) {
				e.f.markDown(e, Stuck, &EngineStuckError{Rank: e.rank, Pending: e.f.sendTimeout()})
			} else {
				e.f.markDown(e, Dead, fmt.Errorf("%w: send failed: %w", ErrEngineLeft, err))
			}
			return // down: the write loop sees it and drains the queue
		}
	}
}

// typeFrames are the four request type bytes as frames, shared by every send.
var typeFrames = [4][]byte{{wire.RequestAdd}, {wire.RequestAbort}, {wire.RequestStartDPWave}, {wire.RequestUtility}}

// inputLoop reads the engine's own input ROUTER: the first frame from the engine's
// identity is its registration; a disconnect of that identity is its death.
func (e *engine) inputLoop() {
	defer e.f.wg.Done()
	for {
		frames, err := e.in.Recv()
		if err != nil {
			var left *transport.PeerLeftError
			if errors.As(err, &left) {
				if string(left.Identity) == string(e.id[:]) {
					// The output socket usually tells why first (the sentinel, then
					// EOF, on one ordered stream); the control loop declares the
					// engine gone only if it has not been marked down after a grace.
					e.inputGone.CompareAndSwap(0, time.Now().UnixNano())
				}
				continue
			}
			return // closed
		}
		e.f.onInput(e, frames)
	}
}

// deliver hands one decoded message to the handler unless the engine is down.
func (e *engine) deliver(outs *wire.EngineCoreOutputs) {
	e.lastOutput.Store(time.Now().UnixNano())
	e.f.metrics.outputs.Inc()
	e.deliverMu.Lock()
	if e.wasUp && !e.isDown {
		e.f.h.HandleOutputs(e.rank, outs)
	}
	e.deliverMu.Unlock()
}

// goUp makes the engine routable and tells the handler, unless it already went down.
func (e *engine) goUp(reg wire.ReadyResponse) bool {
	e.deliverMu.Lock()
	defer e.deliverMu.Unlock()
	if e.isDown {
		return false
	}
	e.wasUp = true
	info := *e.info.Load()
	info.State, info.Ready, info.Since = Ready, reg, e.f.now()
	// Ready before EngineUp: the handler may route to the rank as soon as it hears
	// of it, and a Send in between would be refused with ErrNotReady (seen as a
	// flaky utility call right after start-up).
	e.st.Store(int32(Ready))
	e.f.h.EngineUp(e.rank, info)
	// Shown Ready (Engines, /v1/engines) and counted by WaitReady only now, once
	// the handler routes to it: a client that saw it ready and sent at once got
	// "no engine is connected and ready" (TestAttackHelloStorm in CI).
	e.info.Store(&info)
	return true
}

// markDown takes an engine out of service once: it records the cause, fails its
// requests through EngineDown (if it was ever up) and closes its own sockets, which
// also unblocks a stuck write. It is safe from any goroutine except from inside a
// handler call for the same engine, or from the engine's own output reader, whose
// socket it closes (outputSink hands its cause to outputWatch for that).
func (f *Frontend) markDown(e *engine, state EngineState, cause error) bool {
	e.deliverMu.Lock()
	if e.isDown {
		e.deliverMu.Unlock()
		return false
	}
	e.isDown = true
	e.cause = cause
	info := *e.info.Load()
	info.State, info.Since, info.Cause = state, f.now(), cause.Error()
	e.info.Store(&info)
	dead := &EngineDeadError{Rank: e.rank, Cause: cause}
	e.dead.Store(dead)
	e.st.Store(int32(state))
	close(e.down)
	if e.wasUp {
		e.f.h.EngineDown(e.rank, dead)
	}
	e.deliverMu.Unlock()
	if !e.shared {
		e.in.Close()
		e.out.Close()
	}
	f.metrics.failure(cause)
	switch {
	case errors.Is(cause, ErrClosed):
	case !e.wasUp: // died in its handshake: held back when a rank churns (churnLog)
		f.churn.log(f.log, f.now(), e.rank, slog.LevelWarn, "frontend: engine down", "rank", e.rank, "generation", e.gen, "state", state.String(), "cause", cause)
	default:
		f.log.Warn("frontend: engine down", "rank", e.rank, "generation", e.gen, "state", state.String(), "cause", cause)
	}
	f.notify()
	return true
}

// setRemoteHost records the host the engine's HELLO came from (control loop). An ipc
// or unparsable address leaves it empty.
func (e *engine) setRemoteHost(addr string) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return
	}
	e.deliverMu.Lock()
	defer e.deliverMu.Unlock()
	info := *e.info.Load()
	info.RemoteHost = host
	e.info.Store(&info)
}
