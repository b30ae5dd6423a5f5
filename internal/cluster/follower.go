package cluster

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/internal/coordinator"
	"github.com/switchyard-llm/switchyard/transport"
)

// Follower follows the elected leader's coordinator publish, as every vLLM
// API server follows the DP coordinator: load per rank for rank choice, the
// wave for each ADD, FIRST_REQ to wake paused engines. The leader follows
// it too, so every frontend routes on the same view. When the leader
// changes, [Follower.Reconnect] drops the old connection and dials the
// publish address again, where the new leader's coordinator binds.
type Follower struct {
	publish string
	waves   bool
	net     transport.Network
	log     *slog.Logger

	load coordinator.LoadSink
	cur  atomic.Pointer[coordinator.External]

	mu     sync.Mutex // serializes Reconnect and Close
	closed bool
	cancel context.CancelFunc
}

// NewFollower follows the coordinator publishing at publish; net nil =
// transport.ZMQ.
func NewFollower(publish string, waves bool, net transport.Network, log *slog.Logger) *Follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Follower{publish: publish, waves: waves, net: net, log: log.With("component", "coordinator-follower")}
}

// Start records where loads go and connects in the background (the
// leader's coordinator may not be up yet).
func (f *Follower) Start(ctx context.Context, load coordinator.LoadSink) error {
	f.load = load
	f.Reconnect()
	return nil
}

// OnAdd implements dispatcher.WaveHook through the current connection;
// wave 0 while there is none.
func (f *Follower) OnAdd(rank int) int64 {
	if e := f.cur.Load(); e != nil {
		return e.OnAdd(rank)
	}
	return 0
}

// Reconnect drops the current connection and dials again until it
// succeeds or the Follower is closed.
func (f *Follower) Reconnect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	if f.cancel != nil {
		f.cancel()
	}
	if old := f.cur.Swap(nil); old != nil {
		old.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.dial(ctx)
}

func (f *Follower) dial(ctx context.Context) {
	for ctx.Err() == nil {
		cfg := coordinator.DefaultExternalConfig()
		cfg.StatsAddress = f.publish
		cfg.EnableWaves = f.waves
		cfg.DialTimeout = 2 * time.Second
		cfg.Logger = f.log
		cfg.Network = f.net
		e, err := coordinator.NewExternal(cfg, f.load)
		if err == nil {
			err = e.Start(ctx)
		}
		if err == nil {
			f.mu.Lock()
			if ctx.Err() != nil {
				f.mu.Unlock()
				e.Close()
				return
			}
			f.cur.Store(e)
			f.mu.Unlock()
			f.log.Info("following the leader's coordinator", "address", f.publish)
			return
		}
		if e != nil {
			e.Close()
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// Close disconnects for good.
func (f *Follower) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.cancel != nil {
		f.cancel()
	}
	if old := f.cur.Swap(nil); old != nil {
		return old.Close()
	}
	return nil
}
