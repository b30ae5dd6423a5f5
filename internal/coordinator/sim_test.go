package coordinator

import (
	"math/rand/v2"
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// engineSim is the engine side of the wave protocol (vLLM's DPEngineCoreProc,
// engine-protocol.md 5.4) without sockets. The fake engines of the socket
// tests wrap it too.
type engineSim struct {
	rank    int
	wave    int64 // current_wave
	running bool  // engines_running
	reqs    int   // local unfinished requests
}

// add is an ADD stamped with reqWave reaching the engine. A newer wave is
// adopted; an older one while idle means the frontend stamped it before
// learning that the wave completed, so the engine starts its current wave and
// reports start_wave for the coordinator to wake the others.
func (e *engineSim) add(reqWave int64) (startWave int64, report bool) {
	if reqWave > e.wave {
		e.wave = reqWave
	} else if reqWave < e.wave && !e.running {
		e.running, startWave, report = true, e.wave, true
	}
	e.reqs++
	return startWave, report
}

// startDPWave is START_DP_WAVE(wave, exclude) reaching the engine.
func (e *engineSim) startDPWave(w wire.StartDPWave) {
	if (!w.Exclude.Valid || w.Exclude.Value != int64(e.rank)) && w.Wave >= e.wave {
		e.wave = w.Wave
		e.running = true
	}
}

// active: the engine steps (and so joins the all-reduce) when it has work or
// is in a running wave (then with dummy batches).
func (e *engineSim) active() bool { return e.reqs > 0 || e.running }

// collectiveStep runs one lockstep step on every rank: each finishes a
// request, then the all-reduce decides whether any rank still has work. It
// returns the wave rank 0 reports complete, if the wave ended. It must only
// run when every rank is active: otherwise the active ranks would block in the
// all-reduce waiting for ranks that never step.
func collectiveStep(engines []*engineSim) (completed int64, done bool) {
	unfinished := false
	for _, e := range engines {
		if e.reqs > 0 {
			e.reqs--
		}
		unfinished = unfinished || e.reqs > 0
	}
	if unfinished {
		for _, e := range engines {
			e.running = true
		}
		return 0, false
	}
	completed = engines[0].wave
	for _, e := range engines {
		e.running = false
		e.wave++
	}
	return completed, true
}

// activity reports whether all, some or none of the ranks are stepping.
func activity(engines []*engineSim) (all, some bool) {
	all = true
	for _, e := range engines {
		all = all && e.active()
		some = some || e.active()
	}
	return all, some
}

type pendingAdd struct {
	rank  int
	stamp int64
}

// simNet wires a Coordinator to simulated engines in the manner of raft's
// test network: the frontend stamps ADDs from the coordinator's state, ADDs
// travel with a delay, coordinator messages are delivered at once.
type simNet struct {
	t       *testing.T
	co      *Coordinator
	engines []*engineSim
	pending []pendingAdd
	starts  int
}

func (n *simNet) deliver(msgs []Message) {
	for _, m := range append([]Message(nil), msgs...) {
		if m.Type == MsgStartWave {
			n.starts++
			for _, e := range n.engines {
				e.startDPWave(wire.StartDPWave{Wave: m.Wave, Exclude: m.Exclude})
			}
		}
	}
}

// submit is the frontend routing a request to rank: what Node.OnAdd does.
func (n *simNet) submit(rank int) {
	wave, running := n.co.Wave()
	if !running {
		n.deliver(n.co.Step(Event{Type: EventRequestArrived, Rank: rank, Wave: wave}))
	}
	n.pending = append(n.pending, pendingAdd{rank, wave})
}

func (n *simNet) arrive(i int) {
	p := n.pending[i]
	n.pending = append(n.pending[:i], n.pending[i+1:]...)
	if w, report := n.engines[p.rank].add(p.stamp); report {
		n.deliver(n.co.Step(Event{Type: EventStartWave, Rank: p.rank, Wave: w}))
	}
}

// step runs a collective step if every rank is active. A partly active set
// is only legal while an ADD is still on its way to an idle rank; anything
// else is the hang the wave protocol exists to prevent.
func (n *simNet) step() {
	all, some := activity(n.engines)
	if !all {
		if some && !n.idleRankAwaitsAdd() {
			n.t.Fatalf("deadlock: ranks %v partly active with no ADD on its way to an idle rank (coordinator wave %v)",
				n.describe(), n.waveString())
		}
		return
	}
	if w, done := collectiveStep(n.engines); done {
		n.deliver(n.co.Step(Event{Type: EventWaveComplete, Rank: 0, Wave: w}))
	}
}

func (n *simNet) idleRankAwaitsAdd() bool {
	for _, p := range n.pending {
		if !n.engines[p.rank].active() {
			return true
		}
	}
	return false
}

func (n *simNet) describe() []engineSim {
	out := make([]engineSim, len(n.engines))
	for i, e := range n.engines {
		out[i] = *e
	}
	return out
}

func (n *simNet) waveString() string {
	w, r := n.co.Wave()
	if r {
		return itoa64(w) + " running"
	}
	return itoa64(w) + " paused"
}

func itoa64(v int64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	return string(b)
}

// TestSimulatedLockstepNeverHangs drives random interleavings of request
// submission, delayed ADD delivery and lockstep steps across three MoE ranks,
// and checks that no rank ever waits in the all-reduce for a rank that will
// never step, that every request completes, and that the coordinator's wave
// follows the engines'.
func TestSimulatedLockstepNeverHangs(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		co := newCore(t, 3, true, false)
		n := &simNet{t: t, co: co}
		for r := range 3 {
			n.engines = append(n.engines, &engineSim{rank: r})
		}
		for range 300 {
			switch op := rng.IntN(10); {
			case op < 3:
				n.submit(rng.IntN(3))
			case op < 6 && len(n.pending) > 0:
				n.arrive(rng.IntN(len(n.pending)))
			default:
				n.step()
			}
		}
		for len(n.pending) > 0 {
			n.arrive(0)
		}
		for range 1000 {
			if _, some := activity(n.engines); !some {
				break
			}
			n.step()
		}
		if _, some := activity(n.engines); some {
			t.Fatalf("seed %d: engines never went idle: %+v", seed, n.describe())
		}
		wave, running := co.Wave()
		if running || wave != n.engines[0].wave {
			t.Fatalf("seed %d: coordinator at (%d, %v), engines at wave %d", seed, wave, running, n.engines[0].wave)
		}
	}
}

// Without the wake-up a request to one paused rank would leave the others
// asleep while it blocks in the all-reduce: the simulation must catch that.
func TestSimulationDetectsMissingWakeup(t *testing.T) {
	engines := []*engineSim{{rank: 0}, {rank: 1}}
	engines[0].add(0)
	if all, some := activity(engines); all || !some {
		t.Fatalf("activity = (%v, %v), want partly active", all, some)
	}
	engines[1].startDPWave(wire.StartDPWave{Wave: 0, Exclude: wire.SomeInt(0)})
	engines[0].startDPWave(wire.StartDPWave{Wave: 0, Exclude: wire.SomeInt(0)})
	if all, _ := activity(engines); !all {
		t.Fatal("START_DP_WAVE did not wake rank 1")
	}
	if w, done := collectiveStep(engines); !done || w != 0 {
		t.Fatalf("collectiveStep = (%d, %v), want wave 0 complete", w, done)
	}
	if engines[0].wave != 1 || engines[1].wave != 1 || engines[0].running {
		t.Fatalf("after wave: %+v %+v", *engines[0], *engines[1])
	}
}
