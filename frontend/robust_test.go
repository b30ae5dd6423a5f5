package frontend

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// An engine that dies between INIT and READY (an OOM while loading the model) is
// marked down as soon as its handshake connection closes, so its restart's HELLO is
// answered at once. Before, the rank stayed "connecting" and the restart was refused
// as already live until PhaseTimeout (10 minutes by default; 10 s here).
func TestEngineDyingBeforeReadyRestartsAtOnce(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		cfg := testConfig(t, tr, 1)
		cfg.PhaseTimeout = time.Minute
		f := startFrontend(t, cfg, rec)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()

		hs, err := transport.Dial(ctx, transport.Dealer, f.HandshakeAddress(), transport.Options{Identity: []byte{0, 0}})
		if err != nil {
			t.Fatal(err)
		}
		hello := wire.HandshakeStatus{Status: "HELLO", Headless: true}
		if err := hs.Send(wire.AppendHandshakeStatus(nil, &hello)); err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() { _, err := hs.Recv(); got <- err }()
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("INIT: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("no INIT")
		}
		hs.Close() // the engine process died while loading the model

		err = f.WaitReady(ctx, 1) // fails early once the rank cannot come up
		if !errors.Is(err, ErrEngineLeft) || ctx.Err() != nil {
			t.Fatalf("WaitReady: %v, want the rank down with ErrEngineLeft", err)
		}
		if info := f.Engines()[0]; info.State != Dead || !strings.Contains(info.Cause, "before READY") {
			t.Fatalf("engine %+v", info)
		}

		startMock(t, mockConfig(f.HandshakeAddress(), 0, 1)) // the restart
		// (not WaitReady: it fails at once while the rank is dead)
		rec.waitFor(t, "restarted engine up", func() bool { return rec.ups[0] == 1 })
		if info := f.Engines()[0]; info.Generation != 1 {
			t.Fatalf("restarted engine %+v, want generation 1", info)
		}
		// vLLM closes the handshake socket after READY: that must not matter.
		ids := sendAll(t, f, 0, 2, 5, "restart")
		rec.waitFor(t, "requests served", func() bool { return rec.allFinished(ids) })
		if n := f.refusedN.Load(); n != 0 {
			t.Fatalf("%d HELLOs refused", n)
		}
	})
}

// sendOversized connects a PUSH to an output socket and sends a frame over its limit:
// the transport drops the connection with *FrameTooLargeError. It drops it on the
// frame's header, so the write of the body may fail with EPIPE or ECONNRESET: that
// is the drop this sends for, not a failure.
func sendOversized(t *testing.T, addr string, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	push, err := transport.Dial(ctx, transport.Push, addr, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { push.Close() })
	if err := push.Send(make([]byte, size)); err != nil && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
}

// An output connection dropped by an error (here an oversized frame) loses the
// outputs on it. Bootstrapped, it cannot be attributed, so every engine on the
// shared socket fails (before, it was ignored and their requests hung); it is
// logged at Error and counted.
func TestBootstrappedOutputDroppedFailsSharedEngines(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		cfg := bootstrappedConfig(t, tr, 0, 2, 2)
		cfg.MaxFrameSize = 64 << 10
		f := startFrontend(t, cfg, rec)
		startMock(t, bootMock(f, 0, 2))
		startMock(t, bootMock(f, 1, 2))
		waitReady(t, f, 2)
		sendOversized(t, f.sharedOut.Addr(), 100<<10)
		rec.waitFor(t, "both ranks down", func() bool { return len(rec.downs[0]) == 1 && len(rec.downs[1]) == 1 })
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for rank, errs := range rec.downs {
			if !errors.Is(errs[0], ErrOutputLost) || !errors.Is(errs[0], transport.ErrFrameTooLarge) {
				t.Errorf("rank %d down with %v", rank, errs[0])
			}
		}
		if n := testutil.ToFloat64(f.metrics.outputDrops); n != 1 {
			t.Errorf("output connection errors counted %v, want 1", n)
		}
	})
}

// Owner mode attributes the same to the one engine whose output socket it is.
func TestOutputDroppedByErrorCounted(t *testing.T) {
	rec := newRecorder()
	cfg := testConfig(t, "ipc", 2)
	cfg.MaxFrameSize = 64 << 10
	f := startFrontend(t, cfg, rec)
	startMock(t, mockConfig(f.HandshakeAddress(), 0, 2))
	startMock(t, mockConfig(f.HandshakeAddress(), 1, 2))
	waitReady(t, f, 2)
	sendOversized(t, f.table.Load().get(1).out.Addr(), 100<<10)
	rec.waitFor(t, "rank 1 down", func() bool { return len(rec.downs[1]) == 1 })
	rec.mu.Lock()
	err := rec.downs[1][0]
	rec.mu.Unlock()
	if !errors.Is(err, ErrOutputLost) || !errors.Is(err, transport.ErrFrameTooLarge) {
		t.Fatalf("rank 1 down with %v", err)
	}
	if n := testutil.ToFloat64(f.metrics.outputDrops); n != 1 {
		t.Fatalf("output connection errors counted %v, want 1", n)
	}
	if s := f.Engines()[0].State; s != Ready {
		t.Fatalf("rank 0 %v", s)
	}
}

// INIT hands engines BindHost as the address of their sockets: a wildcard is not
// one they can connect to.
func TestConfigRefusesWildcardBindHost(t *testing.T) {
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1", true}, {"10.1.2.3", true}, {"node-7.cluster", true}, {"::1", true}, {"[fd00::5]", true},
		{"0.0.0.0", false}, {"::", false}, {"[::]", false}, {"*", false}, {"0:0:0:0:0:0:0:0", false},
	} {
		t.Run(tt.host, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.EngineTransport = "tcp"
			cfg.BindHost = tt.host
			err := cfg.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate: %v", err)
			}
			if err != nil && (!strings.Contains(err.Error(), "BindHost") || !strings.Contains(err.Error(), "--engine-bind-host")) {
				t.Fatalf("unclear error: %v", err)
			}
		})
	}
}
