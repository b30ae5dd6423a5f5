package frontend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

type eventKind int

const (
	evHandshake     eventKind = iota // HELLO or READY on the handshake socket
	evRegistration                   // first frame on an input socket
	evHandshakeLeft                  // a handshake connection closed
	evProbeReply                     // an engine answered a layout probe
)

type event struct {
	kind    eventKind
	id      wire.Identity
	status  wire.HandshakeStatus
	reg     wire.ReadyResponse
	err     error               // registration decode error; evHandshakeLeft: the transport's cause
	e       *engine             // registration: the generation whose socket it came in on (nil = shared); probe reply: the engine
	utility *wire.UtilityOutput // evProbeReply
	replay  bool                // evRegistration from a RegistrationStore, not the engine
	remote  string              // evHandshake: the handshake connection's remote address
}

// run is the control loop: the only goroutine that advances handshakes, creates
// engine generations and publishes new tables. It never touches the data path.
func (f *Frontend) run() {
	defer f.wg.Done()
	defer close(f.loopDone)
	tick := time.NewTicker(f.tickInterval())
	defer tick.Stop()
	for {
		select {
		case <-f.stop:
			return
		case ev := <-f.events:
			switch ev.kind {
			case evHandshake:
				f.onHandshake(ev)
				f.hsAck <- struct{}{}
			case evRegistration:
				f.onRegistration(ev)
			case evHandshakeLeft:
				f.onHandshakeLeft(ev)
				f.hsAck <- struct{}{}
			case evProbeReply:
				f.onProbeReply(ev.e, ev.utility)
			}
		case now := <-tick.C:
			f.check(now)
			f.checkPending(now)
		}
	}
}

// tickInterval resolves stuck writes and phase timeouts to a quarter of their limit.
func (f *Frontend) tickInterval() time.Duration {
	d := min(f.cfg.StuckAfter, f.cfg.PhaseTimeout) / 4
	return max(min(d, time.Second), time.Millisecond)
}

func (f *Frontend) post(ev event) {
	select {
	case f.events <- ev:
	case <-f.stop:
	}
}

// postHandshake posts a handshake event and waits until the control loop has
// handled it. The handshake ROUTER admits a new connection with a departed
// peer's identity only once its departure was received and Recv called again
// (transport.Options.PeerEvents), so an INIT always reaches the connection
// whose HELLO asked for it: never a newer one (a real engine behind a storm of
// HELLO-and-hang-ups would otherwise take a dead generation's INIT).
func (f *Frontend) postHandshake(ev event) {
	select {
	case f.events <- ev:
	case <-f.stop:
		return
	}
	select {
	case <-f.hsAck:
	case <-f.stop:
	}
}

// inputGoneGrace is how long an engine whose input connection dropped may still
// explain itself on its output socket (ENGINE_CORE_DEAD arrives there, followed by
// EOF) before it is declared gone.
const inputGoneGrace = time.Second

// check enforces phase deadlines and the stuck-send watchdog.
func (f *Frontend) check(now time.Time) {
	for _, e := range f.table.Load().byRank {
		switch e.state() {
		case Connecting:
			if err := e.hs.check(now); err != nil {
				f.markDown(e, Dead, err)
			}
		case Ready:
			if gone := e.inputGone.Load(); gone != 0 && now.Sub(time.Unix(0, gone)) > inputGoneGrace {
				f.markDown(e, Dead, fmt.Errorf("%w: input connection closed", ErrEngineLeft))
				continue
			}
			if ps := e.pendingSince.Load(); ps != 0 {
				if pending := now.Sub(time.Unix(0, ps)); pending > f.cfg.StuckAfter {
					f.markDown(e, Stuck, &EngineStuckError{Rank: e.rank, Queued: e.sendq.queued(), Pending: pending})
				}
			}
		}
	}
}

// handshakeLoop reads the handshake ROUTER and hands HELLO/READY to the control loop.
func (f *Frontend) handshakeLoop() {
	defer f.wg.Done()
	for {
		frames, err := f.hsSock.Recv()
		if err != nil {
			var left *transport.PeerLeftError
			if errors.As(err, &left) {
				if id, ok := wire.ParseIdentity(left.Identity); ok {
					f.postHandshake(event{kind: evHandshakeLeft, id: id, err: left.Cause})
				}
				continue
			}
			if errors.Is(err, transport.ErrClosed) {
				return
			}
			continue
		}
		id, ok := wire.ParseIdentity(frames[0])
		if !ok || len(frames) != 2 {
			f.churn.log(f.log, f.now(), -1, slog.LevelWarn, "frontend: ignoring handshake message", "identity", fmt.Sprintf("%.16x", frames[0]), "frames", len(frames))
			continue
		}
		st, err := wire.DecodeHandshakeStatus(frames[1])
		if err != nil {
			f.churn.log(f.log, f.now(), id.Rank(), slog.LevelWarn, "frontend: undecodable handshake message", "rank", id.Rank(), "err", err)
			continue
		}
		ev := event{kind: evHandshake, id: id, status: st}
		if pa, ok := f.hsSock.(transport.PeerAddrer); ok && st.Status == "HELLO" {
			ev.remote = pa.PeerAddr(frames[0])
		}
		f.postHandshake(ev)
	}
}

func (f *Frontend) onHandshake(ev event) {
	rank := ev.id.Rank()
	if rank >= f.cfg.DataParallelSize {
		// Any identity can knock: one shared budget (-1) for all outside ranks.
		f.churn.log(f.log, f.now(), -1, slog.LevelError, "frontend: refused handshake from a rank outside the data parallel size", "rank", rank, "data_parallel_size", f.cfg.DataParallelSize, "status", ev.status.Status)
		f.refuse()
		return
	}
	e := f.table.Load().get(rank)
	now := f.now()
	if ev.status.Status == "HELLO" {
		switch {
		case e.state() == Connecting && !e.hs.hello:
			// the generation bound at Start (or after a failed handshake) is free
		case f.abandoned(e):
			// Its HELLO and READY came from a connection that hung up and nothing
			// registered: this HELLO may supersede it (supersede.go).
			if e = f.supersede(ev, e, now); e == nil {
				return
			}
		case e.state() == Connecting || e.state() == Ready:
			f.churn.log(f.log, f.now(), rank, slog.LevelError, "frontend: refused HELLO: rank is already live", "rank", rank, "state", e.state().String())
			f.refuse()
			return
		default: // Dead or Stuck: a restarted engine rejoins with fresh sockets
			if e = f.rejoin(rank, e); e == nil {
				return
			}
		}
		if err := e.hs.onHello(now, ev.status); err != nil {
			f.markDown(e, Dead, err)
			return
		}
		e.hs.helloConn = f.hsConn[rank]
		e.setRemoteHost(ev.remote)
		init := wire.HandshakeInit{Addresses: wire.EngineZmqAddresses{
			Inputs:            []string{e.in.Addr()},
			Outputs:           []string{e.out.Addr()},
			CoordinatorInput:  optString(f.cfg.CoordinatorInput),
			CoordinatorOutput: optString(f.cfg.CoordinatorOutput),
		}}
		if err := f.hsSock.Send(ev.id[:], wire.AppendInit(nil, &init)); err != nil {
			f.markDown(e, Dead, &HandshakeError{Rank: rank, Phase: PhaseHello, Msg: "sending INIT", Err: err})
			return
		}
		f.churn.log(f.log, f.now(), rank, slog.LevelInfo, "frontend: engine connected", "rank", rank, "generation", e.gen, "input", e.in.Addr(), "output", e.out.Addr())
		f.notify()
		return
	}
	if e.state() != Connecting {
		f.churn.log(f.log, f.now(), rank, slog.LevelWarn, "frontend: ignoring handshake message for an engine not connecting", "rank", rank, "status", ev.status.Status, "state", e.state().String())
		return
	}
	if e.hs.hello && e.hs.helloConn != f.hsConn[rank] {
		// Sent by a connection whose HELLO was refused or waits to supersede e
		// (a storm's HELLO and READY): applied to e, it would kill e (the real
		// engine, its READY seen, its registration on the way) as a duplicate.
		f.churn.log(f.log, now, rank, slog.LevelWarn, "frontend: ignoring READY from a handshake connection other than its HELLO's", "rank", rank, "generation", e.gen)
		return
	}
	if err := e.hs.onReady(now, ev.status); err != nil {
		f.markDown(e, Dead, err)
		return
	}
	f.maybeUp(e)
}

// rejoin binds fresh sockets for rank's next generation after old and publishes
// it; nil when the sockets cannot be bound.
func (f *Frontend) rejoin(rank int, old *engine) *engine {
	in, out, sink, err := f.bindEngine(context.Background(), rank, old.gen+1)
	if err != nil {
		f.log.Error("frontend: cannot rejoin engine", "rank", rank, "err", err)
		return nil
	}
	e := f.newEngine(rank, old.gen+1, in, out, false, newHandshake(rank, f.cfg.PhaseTimeout))
	sink.e.Store(e)
	f.table.Store(f.table.Load().with(rank, e))
	e.start()
	f.churn.log(f.log, f.now(), rank, slog.LevelInfo, "frontend: engine rejoining", "rank", rank, "generation", e.gen)
	return e
}

// onHandshakeLeft: an engine's handshake connection closed. vLLM closes it itself
// right after READY, so that is ignored; between HELLO and READY it means the engine
// died while starting (an OOM during model load...). It is marked down at once: its
// restart's HELLO would otherwise be refused as "already live" until PhaseTimeout
// (10 minutes by default). The transport reports the departure before it accepts a
// new connection with the same identity, so the restart's HELLO comes after this.
// Only the departure of the connection that sent e's HELLO concerns e; any other
// is a refused HELLO's, or a waiting one's (dropped with it).
func (f *Frontend) onHandshakeLeft(ev event) {
	rank := ev.id.Rank()
	if rank >= f.cfg.DataParallelSize {
		return
	}
	conn := f.hsConn[rank]
	if f.hsConn == nil {
		f.hsConn = make(map[int]uint64)
	}
	f.hsConn[rank] = conn + 1
	if f.dropPending(rank, conn) {
		// Whatever state the generation it waited on is in now: replayed, its
		// INIT would go to no one, or to a newer connection.
		return
	}
	e := f.table.Load().get(rank)
	if e.state() != Connecting || !e.hs.hello || e.hs.helloConn != conn {
		return
	}
	if e.hs.ready {
		if e.hs.leftAt.IsZero() {
			e.hs.leftAt = f.now() // as vLLM does; a new HELLO may supersede it (supersede.go)
		}
		return
	}
	f.markDown(e, Dead, fmt.Errorf("%w: handshake connection closed before READY (the engine died while starting): %w", ErrEngineLeft, ev.err))
}

// refuse counts a refused HELLO. The engine gets no INIT: it gives up after its own
// handshake timeout (5 minutes in vLLM) and exits.
func (f *Frontend) refuse() {
	f.metrics.refused.Inc()
	f.refusedN.Add(1)
	f.notify()
}

func optString(s string) wire.OptString {
	if s == "" {
		return wire.OptString{}
	}
	return wire.SomeString(s)
}

// onInput runs on an input reader: the engine's first frame there is its
// registration (empty for old engines, else EngineCoreReadyResponse).
func (f *Frontend) onInput(e *engine, frames [][]byte) {
	id, ok := wire.ParseIdentity(frames[0])
	if e != nil && (!ok || id != e.id) {
		f.log.Warn("frontend: ignoring input from an unexpected identity", "rank", e.rank, "identity", fmt.Sprintf("%x", frames[0]))
		return
	}
	if !ok {
		f.log.Warn("frontend: received input registration for unexpected engine id", "identity", fmt.Sprintf("%x", frames[0]))
		return
	}
	ev := event{kind: evRegistration, id: id, e: e}
	if len(frames) < 2 || len(frames[1]) == 0 {
		ev.reg = wire.ReadyResponse{Empty: true}
	} else {
		ev.reg, ev.err = wire.DecodeReadyResponse(frames[1])
	}
	f.post(ev)
}

func (f *Frontend) onRegistration(ev event) {
	rank := ev.id.Rank()
	cur := f.table.Load().get(rank)
	e := ev.e
	if e == nil { // shared input socket (bootstrapped)
		if cur == nil {
			f.log.Error("frontend: received input registration for unexpected engine id", "rank", rank)
			return
		}
		e = cur
		if s := e.state(); s == Dead || s == Stuck {
			// A launcher restarted the engine on the same addresses: next generation.
			e = f.newEngine(rank, e.gen+1, f.sharedIn, nil, true, newBootstrappedHandshake(rank, f.cfg.PhaseTimeout, f.now()))
			f.table.Store(f.table.Load().with(rank, e))
			e.start()
			f.log.Info("frontend: engine rejoining", "rank", rank, "generation", e.gen)
		}
	}
	if ev.replay && (e != cur || e.state() != Connecting || e.hs.registered) {
		return // the engine registered itself meanwhile
	}
	if ev.replay {
		f.log.Info("frontend: engine reconnected without registering (it registered with this frontend's previous run); replaying its stored registration", "rank", rank)
	}
	if e != cur || e.state() != Connecting {
		if e == cur && e.state() == Ready {
			f.log.Debug("frontend: ignoring extra input message", "rank", rank)
		}
		return
	}
	if ev.err != nil {
		f.markDown(e, Dead, &HandshakeError{Rank: rank, Phase: PhaseRegistration, Msg: "undecodable registration", Err: ev.err})
		return
	}
	if err := e.hs.onRegistration(f.now(), ev.reg); err != nil {
		f.markDown(e, Dead, err)
		return
	}
	f.maybeUp(e)
}

func (f *Frontend) maybeUp(e *engine) {
	if e.hs.seen() && e.hs.layout == nil && e.hs.prober == nil {
		f.place(e) // comes back here once placed
		return
	}
	if !e.hs.up() {
		return
	}
	if e.goUp(e.hs.reg) {
		f.log.Info("frontend: engine ready", "rank", e.rank, "generation", e.gen)
		f.notify()
	}
}
