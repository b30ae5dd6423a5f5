package frontend

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard-llm/switchyard/internal/memtransport"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func bootstrappedConfig(t *testing.T, tr string, start, count, dp int) Config {
	cfg := testConfig(t, tr, dp)
	in, out := "tcp://127.0.0.1:0", "tcp://127.0.0.1:0"
	if tr == "ipc" {
		in, out = "ipc://"+filepath.Join(cfg.IPCDir, "in"), "ipc://"+filepath.Join(cfg.IPCDir, "out")
	}
	cfg.Bootstrapped = &BootstrappedConfig{InputAddress: in, OutputAddress: out, StartRank: start, Count: count}
	return cfg
}

func bootMock(f *Frontend, rank, dp int) mockengine.Config {
	c := mockConfig("", rank, dp)
	c.Inputs, c.Outputs = []string{f.sharedIn.Addr()}, []string{f.sharedOut.Addr()}
	return c
}

// Bootstrapped mode owns ranks [1, 3) of 3: registrations from both come in on the
// shared input, requests are served, and a sentinel on the shared output fails
// every engine on it, because it cannot be attributed.
func TestBootstrapped(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		f := startFrontend(t, bootstrappedConfig(t, tr, 1, 2, 3), rec)
		c2 := bootMock(f, 2, 3)
		c2.Faults.DieAfterSteps = 3
		startMock(t, bootMock(f, 1, 3))
		startMock(t, c2)
		waitReady(t, f, 2)
		if infos := f.Engines(); len(infos) != 2 || infos[0].Rank != 1 || infos[1].Rank != 2 {
			t.Fatalf("engines %+v", infos)
		}
		ids := sendAll(t, f, 1, 2, 2, "boot")
		rec.waitFor(t, "rank 1 served", func() bool { return rec.allFinished(ids) })
		sendAll(t, f, 2, 1, 50, "boot")
		rec.waitFor(t, "both down", func() bool { return len(rec.downs[1]) == 1 && len(rec.downs[2]) == 1 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if !errors.Is(rec.downs[1][0], ErrEngineCoreDead) {
			t.Fatalf("rank 1 (innocent, unattributable) down with %v", rec.downs[1][0])
		}
	})
}

// Bootstrapped, every rank's registration deadline starts at Start: rank 1 never
// registers and times out after PhaseTimeout (fake time, so rank 0's registration
// cannot be late on a loaded machine), rank 0 is up.
func TestBootstrappedRegistrationTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memtransport.New()
		cfg := bootstrappedConfig(t, "tcp", 0, 2, 2)
		cfg.Network = mem
		cfg.PhaseTimeout = 5 * time.Second
		start := time.Now()
		f := startFrontend(t, cfg, newRecorder())
		c := bootMock(f, 0, 2)
		c.Network = mem
		startMock(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		err := f.WaitReady(ctx, 2)
		var pt *PhaseTimeoutError
		if !errors.As(err, &pt) || pt.Rank != 1 || pt.Phase != PhaseRegistration {
			t.Fatalf("want registration timeout of rank 1, got %v", err)
		}
		if d := time.Since(start); d < cfg.PhaseTimeout || d > cfg.PhaseTimeout+f.tickInterval() {
			t.Fatalf("timed out after %v (PhaseTimeout %v, tick %v)", d, cfg.PhaseTimeout, f.tickInterval())
		}
		if err := f.WaitReady(ctx, 1); err != nil {
			t.Fatal(err)
		}
	})
}

// Phase deadlines under fake time: an engine that registers but never sends READY
// times out in the READY phase after exactly PhaseTimeout, with no real waiting.
func TestReadyTimeoutSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memtransport.New()
		cfg := DefaultConfig()
		cfg.Network = mem
		cfg.IPCDir = "/nonexistent" // memtransport never touches the file system
		cfg.DataParallelSize = 2
		cfg.PhaseTimeout = time.Minute
		rec := newRecorder()
		f, err := New(cfg, rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 2)
		for rank := range 2 {
			c := mockConfig(f.HandshakeAddress(), rank, 2)
			c.Network = mem
			c.Faults.SkipReady = rank == 1
			go func() { done <- mockengine.Run(ctx, c) }()
		}
		start := time.Now()
		err = f.WaitReady(context.Background(), 2)
		var pt *PhaseTimeoutError
		if !errors.As(err, &pt) || pt.Rank != 1 || pt.Phase != PhaseReady {
			t.Fatalf("want READY timeout of rank 1, got %v", err)
		}
		if d := time.Since(start); d < time.Minute || d > time.Minute+time.Second {
			t.Fatalf("timed out after %v", d)
		}
		if err := f.WaitReady(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		testwait.Recv(t, done, "a mock engine to stop")
		testwait.Recv(t, done, "the other mock engine to stop")
	})
}
