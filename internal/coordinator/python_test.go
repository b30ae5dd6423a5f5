package coordinator

import (
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/pypeer"
	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/wire"
)

// needPython returns the interpreter with pyzmq and msgpack, or skips.
func needPython(t *testing.T) string {
	t.Helper()
	return pytest.Find(t, "zmq", "msgpack")
}

// startPy runs testdata/script, a Python peer driven by JSON lines.
func startPy(t *testing.T, python, script string, args ...string) *pypeer.Peer {
	t.Helper()
	return pypeer.Start(t, waitTimeout, python, "testdata/"+script, args...)
}

// startExternal starts an External with the default config following the
// publisher at statsAddress, closed at cleanup.
func startExternal(t *testing.T, statsAddress string, load LoadSink) *External {
	t.Helper()
	cfg := DefaultExternalConfig()
	cfg.StatsAddress = statsAddress
	x, err := NewExternal(cfg, load)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Start(testContext(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// wantStartWave checks a START_DP_WAVE as the Python engine decoded it
// (exclude -1 = nil). JSON numbers arrive as float64.
func wantStartWave(t *testing.T, ev map[string]any, wave, exclude int) {
	t.Helper()
	var gotExclude = -1
	if x, ok := ev["exclude"].(float64); ok {
		gotExclude = int(x)
	}
	if ev["wave"] != float64(wave) || gotExclude != exclude {
		t.Fatalf("START_DP_WAVE = %v, want wave %d exclude %d", ev, wave, exclude)
	}
}

// Python engines subscribe over XSUB and block until READY exactly as
// vLLM's input thread does; they report msgspec-shaped stats, start_wave and
// wave_complete, and decode START_DP_WAVE.
func TestPythonEngineInterop(t *testing.T) {
	python := needPython(t)
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		load := make(loadRec, 16)
		n, _ := startNode(t, ep, 2, true, load)
		var engines []*pypeer.Peer
		for r := range 2 {
			e := startPy(t, python, "engine.py", n.InputAddress(), n.OutputAddress(), itoa64(int64(r)))
			e.Expect(t, "ready")
			n.EngineReady(r)
			engines = append(engines, e)
		}
		front := subscribeFront(t, n.PublishAddress())

		engines[1].Send(t, map[string]any{"cmd": "stats", "waiting": 4, "running": 2, "kv": 0.75})
		if got, want := recvWithin(t, load, "load"), (loadObs{1, 4, 2, 0.75}); got != want {
			t.Fatalf("ObserveLoad = %+v, want %+v", got, want)
		}

		if w := n.OnAdd(0); w != 0 {
			t.Fatalf("OnAdd = %d", w)
		}
		for _, e := range engines {
			wantStartWave(t, e.Expect(t, "start_dp_wave"), 0, 0)
		}
		engines[0].Send(t, map[string]any{"cmd": "wave_complete", "wave": 0})
		front.waitPublish(t, "wave 1 paused", waveIs(1, false))
		engines[1].Send(t, map[string]any{"cmd": "start_wave", "wave": 3})
		for _, e := range engines {
			wantStartWave(t, e.Expect(t, "start_dp_wave"), 3, 1)
		}
		front.waitPublish(t, "wave 3 running", waveIs(3, true))
	})
}

// rust-peer 5.1 items 37-39 against a Python XPUB standing in for vLLM's
// coordinator: the XPUB sees the subscription, publishes set the wave and the
// load, one FIRST_REQ [identity, wave] per paused period, none while running.
func TestExternalCoordinator(t *testing.T) {
	python := needPython(t)
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		bind := ep("coord")
		if strings.HasPrefix(bind, "tcp://") {
			bind = "tcp://127.0.0.1:*"
		}
		py := startPy(t, python, "coordinator.py", bind)
		addr := py.Expect(t, "bound")["address"].(string)

		load := make(loadRec, 16)
		x := startExternal(t, addr, load)
		py.Expect(t, "subscribed") // item 37

		publish := func(counts [][]float64, wave int, running bool) {
			var c any
			if counts != nil {
				c = counts
			}
			py.Send(t, map[string]any{"cmd": "publish", "counts": c, "wave": wave, "running": running})
		}
		// Item 38: wave 7, paused; counts reach the load sink.
		publish([][]float64{{11, 3, 0.5}}, 7, false)
		if got, want := recvWithin(t, load, "load"), (loadObs{0, 11, 3, 0.5}); got != want {
			t.Fatalf("ObserveLoad = %+v, want %+v", got, want)
		}
		for _, rank := range []int{0, 1, 0} {
			if w := x.OnAdd(rank); w != 7 {
				t.Fatalf("OnAdd stamped %d, want 7", w)
			}
		}
		fr := py.Expect(t, "first_req")
		if fr["engine"] != "0000" || fr["wave"] != float64(7) {
			t.Fatalf("FIRST_REQ = %v, want engine 0000 wave 7", fr)
		}
		// Item 39: running suppresses the wake-up.
		publish([][]float64{{1, 1, 0}}, 5, true)
		recvWithin(t, load, "load")
		if w, r := x.Wave(); w != 5 || !r {
			t.Fatalf("Wave() = (%d, %v), want (5, true)", w, r)
		}
		if w := x.OnAdd(0); w != 5 {
			t.Fatalf("OnAdd stamped %d, want 5", w)
		}
		// A new paused wave: the next FIRST_REQ the coordinator sees must be
		// this one, proving nothing was sent for the burst above or while
		// running.
		publish([][]float64{{0, 0, 0}}, 8, false)
		recvWithin(t, load, "load")
		if w := x.OnAdd(1); w != 8 {
			t.Fatalf("OnAdd stamped %d, want 8", w)
		}
		fr = py.Expect(t, "first_req")
		if fr["engine"] != "0100" || fr["wave"] != float64(8) {
			t.Fatalf("FIRST_REQ = %v, want engine 0100 wave 8", fr)
		}
		// A wave-only publish (counts nil) does not touch the load.
		publish(nil, 9, true)
		publish([][]float64{{2, 2, 0}}, 9, true)
		if got := recvWithin(t, load, "load"); got.waiting != 2 {
			t.Fatalf("ObserveLoad = %+v after a counts-less publish", got)
		}
	})
}

// Several switchyard API servers can share one in-process coordinator: an
// External following a Node's front publisher stamps its wave and its
// FIRST_REQ (identity as bin) wakes the engines with the target excluded.
func TestExternalFollowsNode(t *testing.T) {
	forEachTransport(t, func(t *testing.T, ep endpointFunc) {
		n, _ := startNode(t, ep, 2, true, nil)
		engines := startEngines(t, n, 2)
		load := make(loadRec, 64)
		x := startExternal(t, n.PublishAddress(), load)
		recvWithin(t, load, "first publish") // subscription is live
		if w := x.OnAdd(1); w != 0 {
			t.Fatalf("OnAdd = %d", w)
		}
		want := wire.StartDPWave{Wave: 0, Exclude: wire.SomeInt(1)}
		for _, e := range engines {
			if got := e.nextWave(t); got != want {
				t.Fatalf("engine %d got %+v, want %+v", e.rank, got, want)
			}
		}
	})
}
