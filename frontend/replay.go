package frontend

import (
	"bytes"
	"context"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// RegistrationStore keeps each engine's input registration where a restarted
// frontend finds it. A vLLM engine sends its registration on each input
// socket once, when it starts; when one of several frontends restarts, the
// engine's ZeroMQ DEALER reconnects to it by itself but sends nothing, so the
// frontend would wait for a registration forever. With a store
// (BootstrappedConfig.Registrations), every registration seen is saved, and
// an engine that connects without registering within replayGrace is
// registered from the store (the frames every frontend of the deployment
// saw from that engine are the same).
type RegistrationStore interface {
	// Saw records rank's registration frame; it must not block.
	Saw(rank int, frame []byte)
	// Known returns the last registration frame recorded for rank.
	Known(ctx context.Context, rank int) ([]byte, bool)
}

// replayGrace: an engine that has just started sends its registration right
// after it connects; only one that stays silent this long is replayed.
const replayGrace = 500 * time.Millisecond

// sawInput records a registration frame from the shared input socket.
func (f *Frontend) sawInput(frames [][]byte) {
	store := f.cfg.Bootstrapped.Registrations
	if store == nil || len(frames) < 2 || len(frames[1]) == 0 {
		return
	}
	id, ok := wire.ParseIdentity(frames[0])
	if !ok {
		return
	}
	store.Saw(id.Rank(), bytes.Clone(frames[1]))
}

// onJoined: an engine connected to the shared input socket. If it has not
// registered after replayGrace, its stored registration is replayed.
func (f *Frontend) onJoined(idBytes []byte) {
	store := f.cfg.Bootstrapped.Registrations
	id, ok := wire.ParseIdentity(idBytes)
	if store == nil || !ok {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		t := time.NewTimer(replayGrace)
		defer t.Stop()
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		if e := f.table.Load().get(id.Rank()); e == nil || e.state() != Connecting {
			return // registered meanwhile (the control loop re-checks)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		frame, ok := store.Known(ctx, id.Rank())
		cancel()
		if !ok {
			f.log.Warn("frontend: an engine reconnected without registering and no registration of it is stored; it stays connecting until it restarts", "rank", id.Rank())
			return
		}
		ev := event{kind: evRegistration, id: id, replay: true}
		ev.reg, ev.err = wire.DecodeReadyResponse(frame)
		f.post(ev)
	}()
}
