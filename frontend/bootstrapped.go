package frontend

import (
	"context"
	"errors"
	"fmt"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// startBootstrapped binds the launcher-given input ROUTER and output PULL and waits
// for registrations of ranks StartRank .. StartRank+Count-1.
//
// The output socket is shared by every engine, so ENGINE_CORE_DEAD (one bare frame
// without an identity) and garbage cannot be attributed to a rank: they fail every
// engine on the socket. Disconnects are attributed through the input ROUTER, where
// each engine is known by its identity.
func (f *Frontend) startBootstrapped(ctx context.Context) error {
	b := f.cfg.Bootstrapped
	opt := f.engineSocketOptions()
	opt.JoinEvents = b.Registrations != nil
	in, err := f.net.Listen(ctx, transport.Router, b.InputAddress, opt)
	if err != nil {
		return fmt.Errorf("frontend: input socket: %w", err)
	}
	f.sharedIn = in
	opt.PeerEvents, opt.JoinEvents = false, false
	out, err := f.net.Listen(ctx, transport.Pull, b.OutputAddress, opt)
	if err != nil {
		return fmt.Errorf("frontend: output socket: %w", err)
	}
	f.sharedOut = out
	t := newTable()
	now := f.now()
	var engines []*engine
	for rank := b.StartRank; rank < b.StartRank+b.Count; rank++ {
		e := f.newEngine(rank, 0, in, nil, true, newBootstrappedHandshake(rank, f.cfg.PhaseTimeout, now))
		engines = append(engines, e)
		t = t.with(rank, e)
	}
	f.table.Store(t)
	for _, e := range engines {
		e.start()
	}
	f.wg.Add(2)
	go f.sharedInputLoop()
	go f.sharedOutputLoop()
	f.log.Warn("frontend: bootstrapped mode shares one output socket among all engines: ENGINE_CORE_DEAD or an undecodable message cannot be attributed to a rank and fails every engine on that socket",
		"input", in.Addr(), "output", out.Addr(), "start_rank", b.StartRank, "count", b.Count)
	return nil
}

func (f *Frontend) sharedInputLoop() {
	defer f.wg.Done()
	for {
		frames, err := f.sharedIn.Recv()
		if err != nil {
			if joined := (*transport.PeerJoinedError)(nil); errors.As(err, &joined) {
				f.onJoined(joined.Identity)
				continue
			}
			var left *transport.PeerLeftError
			if errors.As(err, &left) {
				if id, ok := wire.ParseIdentity(left.Identity); ok {
					if e := f.table.Load().get(id.Rank()); e != nil {
						f.markDown(e, Dead, fmt.Errorf("%w: input connection closed: %w", ErrEngineLeft, left.Cause))
					}
				}
				continue
			}
			return
		}
		f.sawInput(frames)
		f.onInput(nil, frames)
	}
}

func (f *Frontend) sharedOutputLoop() {
	defer f.wg.Done()
	var dec wire.OutputsDecoder
	var outs wire.EngineCoreOutputs
	for {
		frames, err := f.sharedOut.Recv()
		if err != nil {
			if errors.Is(err, transport.ErrClosed) {
				return
			}
			// A PUSH peer left; engines do not set an identity on it, so this cannot
			// be attributed. A clean close is an engine exiting, and the input
			// ROUTER's disconnect event names the rank. Anything else (an oversized
			// frame or message, a protocol error, a reset) lost the outputs that
			// were on that connection, of some engine that may well be alive: its
			// requests would hang, so every engine on the socket fails.
			if cause := errors.Unwrap(err); outputDropped(cause) {
				f.metrics.outputDrops.Inc()
				f.failShared(fmt.Errorf("%w: output connection dropped: %w", ErrOutputLost, cause))
				continue
			}
			f.log.Debug("frontend: output peer left", "err", err)
			continue
		}
		if wire.IsEngineCoreDead(frames) {
			f.failShared(ErrEngineCoreDead)
			continue
		}
		// Engines of several vLLM releases share this socket: engine_index (the
		// first field in every layout) says whose layout decodes the rest.
		idx, err := wire.PeekEngineIndex(frames[0])
		if err != nil {
			f.failShared(fmt.Errorf("frontend: undecodable output: %w", err))
			continue
		}
		e := f.table.Load().get(int(idx))
		if e == nil || idx < 0 {
			f.log.Warn("frontend: output for a rank this frontend does not manage", "engine_index", idx)
			continue
		}
		dec.Layout = e.layout.Load()
		if err := dec.Decode(frames, &outs); err != nil {
			// Attributable now: the engine_index was readable.
			f.markDown(e, Dead, e.decodeError(err))
			continue
		}
		if err := e.onOutputs(&dec, &outs); err != nil {
			f.markDown(e, Dead, err)
		}
	}
}

// failShared fails every engine on the shared output socket: the cause cannot be
// attributed to one of them.
func (f *Frontend) failShared(cause error) {
	f.log.Error("frontend: unattributable engine failure on the shared output socket; failing every engine on it", "cause", cause)
	for _, e := range f.table.Load().byRank {
		f.markDown(e, Dead, fmt.Errorf("%w (shared output socket, rank unknown)", cause))
	}
}
