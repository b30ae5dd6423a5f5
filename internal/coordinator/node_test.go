package coordinator

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

type loadObs struct {
	rank             int
	waiting, running int64
	kv               float64
}

// loadRec is a LoadSink that hands every observation to the test.
type loadRec chan loadObs

func (l loadRec) ObserveLoad(rank int, waiting, running int64, kv float64) {
	l <- loadObs{rank, waiting, running, kv}
}

func startNode(t *testing.T, ep endpointFunc, engines int, waves bool, load LoadSink) (*Node, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.InputAddress = ep("in")
	cfg.OutputAddress = ep("out")
	cfg.PublishAddress = ep("pub")
	cfg.Engines = engines
	cfg.EnableWaves = waves
	// Short cadences so a test frontend learns quickly that its
	// subscription is live (the first publish it sees).
	cfg.PublishInterval = 5 * time.Millisecond
	cfg.HeartbeatInterval = 20 * time.Millisecond
	cfg.ReadyResend = 20 * time.Millisecond
	cfg.Registerer = reg
	n, err := NewNode(cfg, load)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(testContext(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n, reg
}

// frontendSub is another API server on the front XPUB.
type frontendSub struct {
	s    transport.Socket
	pubs chan wire.CoordinatorPublish
	done chan struct{}
}

func subscribeFront(t *testing.T, addr string) *frontendSub {
	t.Helper()
	s, err := transport.Dial(testContext(t), transport.XSub, addr, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send([]byte{1}); err != nil {
		t.Fatal(err)
	}
	f := &frontendSub{s: s, pubs: make(chan wire.CoordinatorPublish, 1024), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			frames, err := s.Recv()
			if err != nil {
				return
			}
			p, err := wire.DecodeCoordinatorPublish(frames[0])
			if err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			select {
			case f.pubs <- p:
			default: // the test is not reading heartbeats; drop
			}
		}
	}()
	t.Cleanup(func() { s.Close(); testwait.Closed(t, f.done, "the publish reader to end") })
	// The first publish proves the subscription reached the node.
	recvWithin(t, f.pubs, "first publish")
	return f
}

// waitPublish skips publishes (heartbeats) until one matches.
func (f *frontendSub) waitPublish(t *testing.T, what string, match func(wire.CoordinatorPublish) bool) wire.CoordinatorPublish {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for time.Now().Before(deadline) {
		if p := recvWithin(t, f.pubs, what); match(p) {
			return p
		}
	}
	t.Fatalf("no publish with %s", what)
	return wire.CoordinatorPublish{}
}

func waveIs(wave int64, running bool) func(wire.CoordinatorPublish) bool {
	return func(p wire.CoordinatorPublish) bool { return p.CurrentWave == wave && p.EnginesRunning == running }
}

// gather reads every metric of reg as name -> value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetGauge() != nil:
				got[mf.GetName()] = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				got[mf.GetName()] = m.GetCounter().GetValue()
			}
		}
	}
	return got
}

func startEngines(t *testing.T, n *Node, count int) []*fakeEngine {
	t.Helper()
	var engines []*fakeEngine
	for r := range count {
		e := startFakeEngine(t, r, n.InputAddress(), n.OutputAddress())
		e.waitReady(t)
		n.EngineReady(r)
		engines = append(engines, e)
	}
	return engines
}

// READY reaches every engine, including one that subscribes after the
// others are already through the gate.
func TestNodeReadyGate(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		n, _ := startNode(t, ep, 2, true, nil)
		e0 := startFakeEngine(t, 0, n.InputAddress(), n.OutputAddress())
		e0.waitReady(t)
		n.EngineReady(0)
		e1 := startFakeEngine(t, 1, n.InputAddress(), n.OutputAddress())
		e1.waitReady(t)
		n.EngineReady(1)
	})
}

// rust-peer 5.1 item 3 over sockets: the first request of a wave wakes the
// other engine with the target excluded, nothing repeats while running, and
// after wave_complete the next request carries wave 1 and START_DP_WAVE(1)
// reaches both engines.
func TestNodeWaveLifecycle(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		n, reg := startNode(t, ep, 2, true, nil)
		engines := startEngines(t, n, 2)
		front := subscribeFront(t, n.PublishAddress())

		if w := n.OnAdd(0); w != 0 {
			t.Fatalf("OnAdd stamped %d, want 0", w)
		}
		engines[0].add(0)
		want := wire.StartDPWave{Wave: 0, Exclude: wire.SomeInt(0)}
		for _, e := range engines {
			if got := e.nextWave(t); got != want {
				t.Fatalf("engine %d got %+v, want %+v", e.rank, got, want)
			}
		}
		if st := engines[1].state(); !st.running {
			t.Fatalf("engine 1 not woken: %+v", st)
		}
		if st := engines[0].state(); st.running {
			t.Fatalf("target engine must not be woken by its own START_DP_WAVE: %+v", st)
		}
		// Running: a second request is stamped with the same wave and sends
		// nothing (the next START_DP_WAVE the engines see must be wave 1's).
		if w := n.OnAdd(1); w != 0 {
			t.Fatalf("second OnAdd stamped %d", w)
		}
		engines[1].add(0)

		if w := lockstep(t, engines); w != 0 {
			t.Fatalf("completed wave %d", w)
		}
		front.waitPublish(t, "wave 1 paused", waveIs(1, false))
		if w, r := n.Wave(); w != 1 || r {
			t.Fatalf("Wave() = (%d, %v), want (1, false)", w, r)
		}

		if w := n.OnAdd(1); w != 1 {
			t.Fatalf("OnAdd after wave_complete stamped %d, want 1", w)
		}
		engines[1].add(1)
		want = wire.StartDPWave{Wave: 1, Exclude: wire.SomeInt(1)}
		for _, e := range engines {
			if got := e.nextWave(t); got != want {
				t.Fatalf("engine %d got %+v, want %+v", e.rank, got, want)
			}
		}
		front.waitPublish(t, "wave 1 running", waveIs(1, true))
		if w := lockstep(t, engines); w != 1 {
			t.Fatalf("completed wave %d", w)
		}
		front.waitPublish(t, "wave 2 paused", waveIs(2, false))

		wantMetrics := map[string]float64{
			"switchyard_coordinator_start_dp_wave_broadcasts_total": 2,
			"switchyard_coordinator_wave_completions_total":         2,
			"switchyard_coordinator_wave":                           2,
			"switchyard_coordinator_engines_running":                0,
		}
		if diff := cmp.Diff(wantMetrics, gather(t, reg)); diff != "" {
			t.Errorf("metrics (-want +got):\n%s", diff)
		}
	})
}

// rust-peer 5.1 item 4: an engine's start_wave is rebroadcast to all with the
// sender excluded; the others adopt the wave.
func TestNodeRebroadcastsEngineStartWave(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		n, _ := startNode(t, ep, 2, true, nil)
		engines := startEngines(t, n, 2)
		engines[1].send(wire.EngineCoreOutputs{StartWave: wire.SomeInt(4)})
		want := wire.StartDPWave{Wave: 4, Exclude: wire.SomeInt(1)}
		for _, e := range engines {
			if got := e.nextWave(t); got != want {
				t.Fatalf("engine %d got %+v, want %+v", e.rank, got, want)
			}
		}
		if st := engines[0].state(); st.wave != 4 || !st.running {
			t.Fatalf("engine 0 = %+v, want wave 4 running", st)
		}
		// The node publishes its wave state (MsgWaveState) after the broadcast is
		// queued, so an engine can hold the broadcast before Wave() shows it.
		deadline := time.Now().Add(5 * time.Second)
		w, r := n.Wave()
		for (w != 4 || !r) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			w, r = n.Wave()
		}
		if w != 4 || !r {
			t.Fatalf("Wave() = (%d, %v), want (4, true)", w, r)
		}
	})
}

// A request stamped before the coordinator learnt of a wave_complete reaches
// an idle engine: it reports start_wave and the coordinator wakes the rest.
func TestNodeStaleRequestAtEngine(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		n, _ := startNode(t, ep, 2, true, nil)
		engines := startEngines(t, n, 2)
		front := subscribeFront(t, n.PublishAddress())
		// Both engines finished wave 0 but the coordinator has not heard yet.
		for _, e := range engines {
			e.mu.Lock()
			e.sim.wave = 1
			e.mu.Unlock()
		}
		engines[0].add(0) // stale stamp: engine 0 reports start_wave=1
		want := wire.StartDPWave{Wave: 1, Exclude: wire.SomeInt(0)}
		for _, e := range engines {
			if got := e.nextWave(t); got != want {
				t.Fatalf("engine %d got %+v, want %+v", e.rank, got, want)
			}
		}
		front.waitPublish(t, "wave 1 running", waveIs(1, true))
		if w := lockstep(t, engines); w != 1 {
			t.Fatalf("completed wave %d, want 1", w)
		}
		front.waitPublish(t, "wave 2 paused", waveIs(2, false))
	})
}

// rust-peer 5.1 item 5: stats-only outputs are accepted; the load reaches the
// dispatcher at once and other frontends through the rate-limited publish.
func TestNodeStats(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		load := make(loadRec, 16)
		n, _ := startNode(t, ep, 2, false, load)
		engines := startEngines(t, n, 2)
		front := subscribeFront(t, n.PublishAddress())
		engines[1].stats(2, 3, 0.5)
		if got, want := recvWithin(t, load, "load"), (loadObs{1, 2, 3, 0.5}); got != want {
			t.Fatalf("ObserveLoad got %+v, want %+v", got, want)
		}
		// Request outputs on this socket are ignored but their stats count.
		engines[0].send(wire.EngineCoreOutputs{
			Outputs:        []wire.EngineCoreOutput{{RequestID: "r", FinishReason: wire.FinishNone}},
			SchedulerStats: &wire.SchedulerStats{NumRunningReqs: 1},
		})
		if got, want := recvWithin(t, load, "load"), (loadObs{0, 0, 1, 0}); got != want {
			t.Fatalf("ObserveLoad got %+v, want %+v", got, want)
		}
		wantCounts := []wire.EngineLoad{{Running: 1}, {Waiting: 2, Running: 3, KVCacheUsage: 0.5}}
		p := front.waitPublish(t, "both loads", func(p wire.CoordinatorPublish) bool {
			return cmp.Equal(p.Counts, wantCounts)
		})
		if p.EnginesRunning || p.CurrentWave != 0 {
			t.Fatalf("publish %+v: waves are off", p)
		}
		if w := n.OnAdd(0); w != 0 {
			t.Fatalf("OnAdd with waves off = %d", w)
		}
		if _, r := n.Wave(); r {
			t.Fatal("OnAdd with waves off changed the running state")
		}
	})
}

// Another API server's FIRST_REQ (identity as bin, as Python sends it) wakes
// the engines with the target excluded by rank.
func TestNodeFirstReqFromOtherFrontend(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		n, _ := startNode(t, ep, 2, true, nil)
		engines := startEngines(t, n, 2)
		front := subscribeFront(t, n.PublishAddress())
		body := wire.AppendFirstReq(nil, wire.FirstReq{Identity: wire.IdentityOf(1), HasIdentity: true, Wave: 0})
		if err := front.s.Send(body); err != nil {
			t.Fatal(err)
		}
		want := wire.StartDPWave{Wave: 0, Exclude: wire.SomeInt(1)}
		for _, e := range engines {
			if got := e.nextWave(t); got != want {
				t.Fatalf("engine %d got %+v, want %+v", e.rank, got, want)
			}
		}
		front.waitPublish(t, "running", waveIs(0, true))
		if _, r := n.Wave(); !r {
			t.Fatal("node does not see the wave running")
		}
	})
}

func TestNodeLifecycle(t *testing.T) {
	cfg := DefaultConfig()
	n, err := NewNode(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
	if err := n.Start(testContext(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close = %v, want ErrClosed", err)
	}

	n, err = NewNode(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(testContext(t)); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start = %v, want ErrStarted", err)
	}
	if n.InputAddress() == cfg.InputAddress || n.OutputAddress() == "" || n.PublishAddress() != "" {
		t.Fatalf("addresses: %q %q %q", n.InputAddress(), n.OutputAddress(), n.PublishAddress())
	}
	// A second node on the same port cannot bind.
	cfg2 := cfg
	cfg2.OutputAddress = n.OutputAddress()
	n2, _ := NewNode(cfg2, nil)
	var se *SocketError
	if err := n2.Start(testContext(t)); !errors.As(err, &se) || se.Socket != "output" {
		t.Fatalf("Start on a busy port = %v, want output SocketError", err)
	}
	n2.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	cfg.Engines = 0
	if _, err := NewNode(cfg, nil); err == nil {
		t.Fatal("NewNode accepted Engines=0")
	}
	// Metrics register once per registry.
	reg := prometheus.NewRegistry()
	cfg = DefaultConfig()
	cfg.Registerer = reg
	if _, err := NewNode(cfg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := NewNode(cfg, nil); err == nil {
		t.Fatal("second NewNode on one registry did not report the duplicate metrics")
	}
}

// A burst of concurrent requests to paused engines wakes them once.
func TestNodeConcurrentOnAddWakesOnce(t *testing.T) {
	n, _ := startNode(t, func(string) string { return "tcp://127.0.0.1:0" }, 2, true, nil)
	engines := startEngines(t, n, 2)
	front := subscribeFront(t, n.PublishAddress())
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if w := n.OnAdd(i % 2); w != 0 {
				t.Errorf("OnAdd = %d", w)
			}
		})
	}
	testwait.Wait(t, &wg, "64 concurrent OnAdd calls")
	first := engines[1].nextWave(t)
	if first.Wave != 0 {
		t.Fatalf("START_DP_WAVE = %+v", first)
	}
	engines[0].send(wire.EngineCoreOutputs{WaveComplete: wire.SomeInt(0)})
	front.waitPublish(t, "wave 1 paused", waveIs(1, false))
	n.OnAdd(0)
	// Had the burst sent two broadcasts, the second would come before this.
	if got, want := engines[1].nextWave(t), (wire.StartDPWave{Wave: 1, Exclude: wire.SomeInt(0)}); got != want {
		t.Fatalf("next START_DP_WAVE = %+v, want %+v", got, want)
	}
}

// OnAdd is on the dispatch hot path: one atomic load while running.
func BenchmarkOnAddRunning(b *testing.B) {
	cfg := DefaultConfig()
	cfg.EnableWaves = true
	n, err := NewNode(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	n.state.Store(packState(3, true))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n.OnAdd(1)
		}
	})
}

// One engine that stops reading its coordinator socket must not hold up the
// coordinator's broadcasts to the others: the back XPUB gives every subscriber its
// own queue (messages for the stalled one are dropped once it is full, as libzmq's
// XPUB does at SNDHWM). Before, every broadcast was written to each subscriber in
// turn on the node's writer goroutine, and once the stalled engine's socket buffers
// filled, each write to it blocked for the 30 s send timeout: the healthy engine
// stopped hearing START_DP_WAVE and READY.
func TestNodeStalledEngineDoesNotHoldUpOthers(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		n, _ := startNode(t, ep, 2, true, nil)
		healthy := startFakeEngine(t, 0, n.InputAddress(), n.OutputAddress())
		healthy.waitReady(t)
		// The stalled engine subscribes, then never reads again (its transport
		// stops reading once one message is queued).
		stalled, err := transport.Dial(testContext(t), transport.XSub, n.InputAddress(), transport.Options{RecvQueue: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stalled.Close() })
		if err := stalled.Send([]byte{1}); err != nil {
			t.Fatal(err)
		}
		// Each start_wave for a newer wave is broadcast to both engines as
		// START_DP_WAVE. 100,000 of them (~1.2 MB) overfill the stalled engine's
		// buffers many times over; the healthy one must hear the last of every round
		// of 500 within waitTimeout. (Rounds stay under the transport's SendHWM of
		// 1,000 queued per subscriber, past which even a healthy one would drop.)
		wave := int64(0)
		msgs := make([][][]byte, 0, 500)
		for round := range 200 {
			msgs = msgs[:0]
			for range cap(msgs) {
				wave++
				body, _, err := wire.AppendOutputs(nil, &wire.EngineCoreOutputs{StartWave: wire.SomeInt(wave)})
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, [][]byte{body})
			}
			transport.SendBatch(healthy.push, msgs, func(_ int, err error) { t.Fatalf("start_wave: %v", err) })
			for {
				w := healthy.nextWave(t)
				if w.Wave == wave {
					break
				}
				if w.Wave > wave {
					t.Fatalf("round %d: wave %d, want up to %d", round, w.Wave, wave)
				}
			}
		}
		if w, running := n.Wave(); w != wave || !running {
			t.Fatalf("Wave() = (%d, %v), want (%d, true)", w, running, wave)
		}
	})
}
