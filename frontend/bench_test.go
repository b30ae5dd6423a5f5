package frontend

import (
	"context"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// rawEngine does an engine's handshake with bare sockets and nothing else, so the
// benchmarks measure switchyard's side, not the mock's decoding.
type rawEngine struct {
	in, out transport.Socket
}

func dialRawEngine(tb testing.TB, hsAddr string, rank int) *rawEngine {
	tb.Helper()
	ctx := context.Background()
	opt := transport.Options{Identity: wire.IdentityOf(rank).Bytes(), RecvQueue: 1024}
	hs, err := transport.Dial(ctx, transport.Dealer, hsAddr, opt)
	if err != nil {
		tb.Fatal(err)
	}
	defer hs.Close()
	hs.Send(wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "HELLO", Headless: true}))
	rctx, cancel := context.WithTimeout(ctx, testwait.Deadline)
	defer cancel()
	frames, err := recvBefore(rctx, hs)
	if err != nil {
		tb.Fatalf("INIT: %v", err)
	}
	init, err := wire.DecodeInit(frames[0])
	if err != nil {
		tb.Fatal(err)
	}
	e := &rawEngine{}
	if e.out, err = transport.Dial(ctx, transport.Push, init.Addresses.Outputs[0], opt); err != nil {
		tb.Fatal(err)
	}
	if e.in, err = transport.Dial(ctx, transport.Dealer, init.Addresses.Inputs[0], opt); err != nil {
		tb.Fatal(err)
	}
	// A v0.21 engine's handshake: placed without probes.
	v021 := wire.BuiltinLayout("v0.21")
	e.in.Send(wire.AppendRegistration(nil, v021, &wire.ReadyResponse{MaxModelLen: wire.SomeInt(4096)}))
	hs.Send(wire.AppendReady(nil, v021, &wire.HandshakeStatus{Status: "READY", Headless: true}))
	return e
}

func (e *rawEngine) close() {
	e.in.Close()
	e.out.Close()
}

type countingHandler struct {
	n    atomic.Int64
	want int64
	done chan struct{}
}

func (h *countingHandler) HandleOutputs(int, *wire.EngineCoreOutputs) {
	if h.n.Add(1) == h.want {
		close(h.done)
	}
}
func (h *countingHandler) EngineUp(int, EngineInfo) {}
func (h *countingHandler) EngineDown(int, error)    {}

func benchFrontend(b *testing.B, tr string, n int, h Handler) (*Frontend, []*rawEngine) {
	cfg := DefaultConfig()
	cfg.EngineTransport = tr
	cfg.IPCDir = b.TempDir()
	cfg.DataParallelSize = n
	cfg.SendQueue = 4096
	f, err := New(cfg, h)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	engines := make([]*rawEngine, n)
	for r := range n {
		engines[r] = dialRawEngine(b, f.HandshakeAddress(), r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.WaitReady(ctx, n); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		f.Close()
		for _, e := range engines {
			e.close()
		}
	})
	return f, engines
}

// BenchmarkSendPath8: ADDs (a 100-token prompt, ~330 B) spread over 8 engines through
// Send -> per-engine queue -> writer -> socket, until every engine has read its share.
func BenchmarkSendPath8(b *testing.B) {
	for _, tr := range []string{"ipc", "tcp"} {
		b.Run(tr, func(b *testing.B) {
			const n = 8
			f, engines := benchFrontend(b, tr, n, &countingHandler{want: -1})
			sp := wire.DefaultSamplingParams()
			prompt := make([]int64, 100)
			for i := range prompt {
				prompt[i] = int64(1000 + i)
			}
			tmpl, _, _ := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: "bench-request-0000", PromptTokenIDs: prompt, Sampling: &sp})
			var got atomic.Int64
			var wg sync.WaitGroup
			total := int64(b.N)
			for _, e := range engines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for got.Load() < total {
						if _, err := e.in.Recv(); err != nil {
							return
						}
						if got.Add(1) == total {
							for _, x := range engines {
								x.in.Close() // wake the other readers
							}
						}
					}
				}()
			}
			b.SetBytes(int64(len(tmpl)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				for {
					err := f.Send(i%n, wire.RequestAdd, append(wire.GetBuffer(), tmpl...), nil)
					if err == nil {
						break
					}
					runtime.Gosched() // queue full: let the writers drain
				}
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkOutputPath8: 8 engines push step outputs (4 requests x 1 token plus
// scheduler stats, ~250 B) that are received, decoded once and handed to the Handler.
func BenchmarkOutputPath8(b *testing.B) {
	for _, tr := range []string{"ipc", "tcp"} {
		b.Run(tr, func(b *testing.B) {
			const n = 8
			h := &countingHandler{want: int64(b.N), done: make(chan struct{})}
			_, engines := benchFrontend(b, tr, n, h)
			bodies := make([][]byte, n)
			for r := range n {
				o := wire.EngineCoreOutputs{EngineIndex: int64(r), Timestamp: 12345.678,
					SchedulerStats: &wire.SchedulerStats{NumRunningReqs: 4, StepCounter: 7}}
				for j := range 4 {
					o.Outputs = append(o.Outputs, wire.EngineCoreOutput{RequestID: "bench-request-000" + string(rune('0'+j)), NewTokenIDs: []int64{4242}, FinishReason: wire.FinishNone})
				}
				// In the layout the raw engines registered with: outputs in another
				// would take the engine down as misplaced, and the count would never come.
				bodies[r], _, _ = wire.BuiltinLayout("v0.21").AppendOutputs(nil, &o)
			}
			b.SetBytes(int64(len(bodies[0])))
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for r, e := range engines {
				share := b.N / n
				if r < b.N%n {
					share++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range share {
						if err := e.out.Send(bodies[r]); err != nil {
							return
						}
					}
				}()
			}
			wg.Wait()
			if b.N > 0 {
				<-h.done
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msg/s")
		})
	}
}

// BenchmarkCost64Engines measures what per-engine sockets cost for 64 engines: run
// with -bench Cost64 -benchtime 1x. Reported per frontend (not per op).
func BenchmarkCost64Engines(b *testing.B) {
	for _, tr := range []string{"ipc", "tcp"} {
		b.Run(tr, func(b *testing.B) {
			for range b.N {
				g0, fd0 := runtime.NumGoroutine(), openFDs()
				cfg := DefaultConfig()
				cfg.EngineTransport = tr
				cfg.IPCDir = b.TempDir()
				cfg.DataParallelSize = 64
				f, err := New(cfg, &countingHandler{want: -1})
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if err := f.Start(context.Background()); err != nil {
					b.Fatal(err)
				}
				bindTime := time.Since(start)
				g1, fd1 := runtime.NumGoroutine(), openFDs()
				var engines []*rawEngine
				for r := range 64 {
					engines = append(engines, dialRawEngine(b, f.HandshakeAddress(), r))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				if err := f.WaitReady(ctx, 64); err != nil {
					b.Fatal(err)
				}
				cancel()
				// Engine-side sockets live in this process too: subtract their reader
				// goroutine and fd each (2 sockets per engine; the handshake one is closed).
				g2, fd2 := runtime.NumGoroutine()-2*64, openFDs()-2*64
				b.ReportMetric(float64(g1-g0), "goroutines-listening")
				b.ReportMetric(float64(g2-g0), "goroutines-connected")
				b.ReportMetric(float64(fd1-fd0), "fds-listening")
				b.ReportMetric(float64(fd2-fd0), "fds-connected")
				b.ReportMetric(float64(bindTime.Microseconds()), "bind-µs")
				f.Close()
				for _, e := range engines {
					e.close()
				}
			}
		})
	}
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}
