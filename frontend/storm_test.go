package frontend

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// helloStorm dials the handshake socket as rank from workers goroutines, each
// sending HELLO (and READY when withReady) and hanging up, until stop.
// started is closed after the first 100 storm connections.
func helloStorm(f *Frontend, rank, workers int, withReady bool, stop <-chan struct{}, started chan<- struct{}) (wait func() int64) {
	var once sync.Once
	var wg sync.WaitGroup
	var n atomic.Int64
	id := wire.IdentityOf(rank)
	hello := wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "HELLO", Local: true, Headless: true})
	ready := wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "READY", Local: true, Headless: true})
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				s, err := transport.Dial(ctx, transport.Dealer, f.HandshakeAddress(), transport.Options{Identity: id[:]})
				cancel()
				if err != nil {
					continue
				}
				s.Send(hello)
				if withReady {
					s.Send(ready)
				}
				if n.Add(1) == 100 {
					once.Do(func() { close(started) })
				}
				s.Close()
			}
		}()
	}
	return func() int64 { wg.Wait(); return n.Load() }
}

// A storm of HELLO-and-hang-ups as rank 0 (HELLO alone, or HELLO and READY)
// must not keep the real engine out: a libzmq engine sends HELLO once. It must
// not be refused as a duplicate identity after its handshake consumed its HELLO,
// take a dead generation's INIT meant for a storm connection, or be refused as
// "already live" while a HELLO-and-READY generation waits out PhaseTimeout.
func TestHelloStorm(t *testing.T) {
	for _, withReady := range []bool{false, true} {
		t.Run(map[bool]string{false: "hello", true: "hello-ready"}[withReady], func(t *testing.T) {
			rec := newRecorder()
			cfg := testConfig(t, "ipc", 1)
			cfg.PhaseTimeout = time.Minute
			f := startFrontend(t, cfg, rec)
			stop := make(chan struct{})
			started := make(chan struct{})
			wait := helloStorm(f, 0, 4, withReady, stop, started)
			defer func() {
				close(stop)
				testwait.Func(t, "the HELLO storm to stop", func() { wait() })
			}()
			testwait.Recv(t, started, "100 storm connections")
			begin := time.Now()
			pyEngineLayout(t, f.HandshakeAddress(), 0, 0, "newest")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := rec.waitCtx(ctx, func() bool { return rec.ups[0] >= 1 }); err != nil {
				info := f.Engines()[0]
				t.Fatalf("real engine not up within 10 s of a HELLO storm: %v; rank 0 %s generation %d: %s", err, info.State, info.Generation, info.Cause)
			}
			t.Logf("real engine up after %v, %d HELLOs refused", time.Since(begin), f.refusedN.Load())
			ids := sendAll(t, f, 0, 3, 4, "storm")
			rec.waitFor(t, "requests served", func() bool { return rec.allFinished(ids) })
		})
	}
}

// An engine that sent READY and closed its handshake connection, as vLLM does,
// but whose registration has not arrived yet, survives a storm connection's
// HELLO and READY: that READY belongs to the storm's connection (whose HELLO
// waits to supersede the engine), not to the engine's generation. It used to
// be taken as the engine's second READY, and the engine killed as a duplicate
// under load, when its registration came late.
func TestStormReadyBeforeRegistration(t *testing.T) {
	rec := newRecorder()
	cfg := testConfig(t, "ipc", 1)
	cfg.PhaseTimeout = time.Minute
	f := startFrontend(t, cfg, rec)
	l := wire.Native()
	hsDial := func() transport.Socket {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		id := wire.IdentityOf(0)
		for {
			// Refused while the identity's last connection is live; admitted
			// only after its departure was handled, and with it whatever it sent.
			s, err := transport.Dial(ctx, transport.Dealer, f.HandshakeAddress(), transport.Options{Identity: id[:]})
			if err == nil {
				return s
			}
			if ctx.Err() != nil {
				t.Fatal(err)
			}
		}
	}
	hs := hsDial()
	hs.Send(wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "HELLO", Headless: true}))
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	frames, err := recvBefore(ctx, hs)
	if err != nil {
		t.Fatalf("INIT: %v", err)
	}
	init, err := wire.DecodeInit(frames[0])
	if err != nil {
		t.Fatal(err)
	}
	hs.Send(wire.AppendReady(nil, l, &wire.HandshakeStatus{Status: "READY", Headless: true, NumGPUBlocks: wire.SomeInt(4096)}))
	hs.Close()

	storm := hsDial()
	storm.Send(wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "HELLO", Local: true, Headless: true}))
	storm.Send(wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "READY", Local: true, Headless: true}))
	storm.Close()
	hsDial().Close() // the storm's HELLO, READY and departure are handled

	in, err := transport.Dial(context.Background(), transport.Dealer, init.Addresses.Inputs[0], transport.Options{Identity: wire.IdentityOf(0).Bytes(), DialTimeout: 5 * time.Second})
	if err != nil {
		info := f.Engines()[0]
		t.Fatalf("rank 0 %s generation %d (%s): %v", info.State, info.Generation, info.Cause, err)
	}
	defer in.Close()
	in.Send(wire.AppendRegistration(nil, l, &wire.ReadyResponse{
		MaxModelLen: wire.SomeInt(2048), NumGPUBlocks: wire.SomeInt(4096), BlockSize: wire.SomeInt(16),
		DType: wire.SomeString("bfloat16"), VLLMVersion: wire.SomeString(l.VLLMVersion),
		DataParallelRank: wire.SomeInt(0),
	}))
	waitFor(t, f, "the engine up or down", func(e []EngineInfo) bool { return e[0].State != Connecting })
	if info := f.Engines()[0]; info.State != Ready || info.Generation != 0 {
		t.Fatalf("rank 0 %s generation %d, want ready generation 0: %s", info.State, info.Generation, info.Cause)
	}
}

// waitCtx is waitFor bounded by ctx, returning ctx's error instead of failing.
func (r *recorder) waitCtx(ctx context.Context, cond func() bool) error {
	for {
		r.mu.Lock()
		ok := cond()
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
