package coordinator

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// fakeEngine is the coordinator-facing side of a vLLM DP engine over real
// sockets: an XSUB on coordinator_input that subscribes and blocks until
// READY, a PUSH on coordinator_output for stats and wave events, and the wave
// logic of engineSim reacting to START_DP_WAVE.
type fakeEngine struct {
	t    *testing.T
	rank int
	sub  transport.Socket
	push transport.Socket

	mu  sync.Mutex
	sim engineSim

	ready     chan struct{} // closed at the first READY
	readyOnce sync.Once
	waves     chan wire.StartDPWave // every START_DP_WAVE, in order
	done      chan struct{}
	wg        sync.WaitGroup
}

func startFakeEngine(t *testing.T, rank int, inputAddr, outputAddr string) *fakeEngine {
	t.Helper()
	ctx := testContext(t)
	sub, err := transport.Dial(ctx, transport.XSub, inputAddr, transport.Options{})
	if err != nil {
		t.Fatalf("engine %d: dial coordinator input: %v", rank, err)
	}
	// The engine's input thread: subscribe to everything, then wait for READY.
	if err := sub.Send([]byte{1}); err != nil {
		t.Fatal(err)
	}
	push, err := transport.Dial(ctx, transport.Push, outputAddr, transport.Options{})
	if err != nil {
		sub.Close()
		t.Fatalf("engine %d: dial coordinator output: %v", rank, err)
	}
	e := &fakeEngine{
		t: t, rank: rank, sub: sub, push: push,
		sim:   engineSim{rank: rank},
		ready: make(chan struct{}),
		waves: make(chan wire.StartDPWave, 64),
		done:  make(chan struct{}),
	}
	e.wg.Add(1)
	go e.read()
	t.Cleanup(e.close)
	return e
}

func (e *fakeEngine) close() {
	close(e.done)
	e.sub.Close()
	e.push.Close()
	testwait.Wait(e.t, &e.wg, fmt.Sprintf("engine %d's reader to end", e.rank))
}

func (e *fakeEngine) read() {
	defer e.wg.Done()
	for {
		frames, err := e.sub.Recv()
		if err != nil {
			if !errors.Is(err, transport.ErrClosed) {
				e.t.Errorf("engine %d: recv: %v", e.rank, err)
			}
			return
		}
		switch {
		case len(frames) == 1 && bytes.Equal(frames[0], readyFrame):
			// Later READY frames (re-sends) are ignored, as engines do.
			e.readyOnce.Do(func() { close(e.ready) })
		case len(frames) == 2 && len(frames[0]) == 1 && frames[0][0] == wire.RequestStartDPWave:
			w, err := wire.DecodeStartDPWave(frames[1])
			if err != nil {
				e.t.Errorf("engine %d: START_DP_WAVE: %v", e.rank, err)
				return
			}
			e.mu.Lock()
			e.sim.startDPWave(w)
			e.mu.Unlock()
			select {
			case e.waves <- w:
			case <-e.done:
				return
			}
		default:
			e.t.Errorf("engine %d: unexpected message %q", e.rank, frames)
		}
	}
}

func (e *fakeEngine) waitReady(t *testing.T) {
	t.Helper()
	recvWithin(t, e.ready, "READY at engine")
}

// nextWave returns the next START_DP_WAVE this engine received.
func (e *fakeEngine) nextWave(t *testing.T) wire.StartDPWave {
	t.Helper()
	return recvWithin(t, e.waves, "START_DP_WAVE")
}

func (e *fakeEngine) send(o wire.EngineCoreOutputs) {
	e.t.Helper()
	o.EngineIndex = int64(e.rank)
	body, _, err := wire.AppendOutputs(nil, &o)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.push.Send(body); err != nil {
		e.t.Fatalf("engine %d: send: %v", e.rank, err)
	}
}

// add is an ADD stamped with wave reaching the engine; a stale wave while
// idle makes it report start_wave, as vLLM's engine does.
func (e *fakeEngine) add(wave int64) {
	e.mu.Lock()
	w, report := e.sim.add(wave)
	e.mu.Unlock()
	if report {
		e.send(wire.EngineCoreOutputs{StartWave: wire.SomeInt(w)})
	}
}

func (e *fakeEngine) stats(waiting, running int64, kv float64) {
	e.send(wire.EngineCoreOutputs{SchedulerStats: &wire.SchedulerStats{
		NumWaitingReqs: waiting, NumRunningReqs: running, KVCacheUsage: kv,
	}})
}

func (e *fakeEngine) state() engineSim {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sim
}

// lockstep runs collective steps over the engines until the wave ends, then
// has rank 0 report wave_complete as vLLM's engines do. Every engine must be
// active: the caller waits for the START_DP_WAVE deliveries first.
func lockstep(t *testing.T, engines []*fakeEngine) int64 {
	t.Helper()
	sims := make([]*engineSim, len(engines))
	for i, e := range engines {
		e.mu.Lock()
		defer e.mu.Unlock()
		sims[i] = &e.sim
	}
	for range 1000 {
		if all, _ := activity(sims); !all {
			t.Fatalf("lockstep with idle ranks: %+v", sims)
		}
		if w, done := collectiveStep(sims); done {
			body, _, _ := wire.AppendOutputs(nil, &wire.EngineCoreOutputs{WaveComplete: wire.SomeInt(w)})
			if err := engines[0].push.Send(body); err != nil {
				t.Fatal(err)
			}
			return w
		}
	}
	t.Fatal("wave never completed")
	return 0
}
