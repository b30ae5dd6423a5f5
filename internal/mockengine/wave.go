package mockengine

import (
	"bytes"
	"context"
	"fmt"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// waveState is the engine side of vLLM's DP coordinator (DPEngineCoreProc,
// engine-protocol.md 2.3 and 5): it exists when INIT carried coordinator
// addresses. The wave number itself lives in Scheduler.CurrentWave, which the
// stats report.
//
// A real MoE rank ends a wave when an all-reduce across all ranks finds no
// unfinished request. The mock has no peers to reduce with, so each rank ends
// its wave when it is itself idle; rank 0 reports wave_complete as vLLM's
// rank 0 does. That keeps the protocol traffic real (start_wave on a stale
// ADD, wave adoption from START_DP_WAVE and ADD, wave_complete, stats on
// change) without simulating the collective.
type waveState struct {
	push    transport.Socket // PUSH to coordinator_output; nil = no coordinator
	running bool             // engines_running
	sent    bool             // stats sent at least once
	last    wire.SchedulerStats
	buf     []byte
}

// readyFrame is the coordinator's go-ahead on coordinator_input.
var readyFrame = []byte("READY")

// joinCoordinator does what the engine's input and output threads do when
// INIT names a coordinator: PUSH to coordinator_output, XSUB to
// coordinator_input, subscribe with 01 and block until READY. Only then may
// the engine send its handshake READY. The XSUB joins e.ins so the loop
// reads START_DP_WAVE like any input and closeAll closes it.
func (e *engine) joinCoordinator(ctx context.Context) error {
	if !e.coordinatorInput.Valid || !e.coordinatorOutput.Valid {
		return nil
	}
	push, err := e.dialPeer(ctx, transport.Push, e.coordinatorOutput.Value, nil)
	if err != nil {
		return fmt.Errorf("mockengine: coordinator output %s: %w", e.coordinatorOutput.Value, err)
	}
	e.wave.push = push
	// A new coordinator (another frontend took over the leadership) counts
	// subscriptions: subscribe again on every reconnection.
	sub, err := e.dialPeer(ctx, transport.XSub, e.coordinatorInput.Value, func(s transport.Socket) error { return s.Send([]byte{1}) })
	if err != nil {
		return fmt.Errorf("mockengine: coordinator input %s: %w", e.coordinatorInput.Value, err)
	}
	e.ins = append(e.ins, readySkipper{sub})
	if err := sub.Send([]byte{1}); err != nil {
		return fmt.Errorf("mockengine: coordinator subscribe: %w", err)
	}
	for {
		frames, err := recvCtx(ctx, sub)
		if err != nil {
			return fmt.Errorf("mockengine: waiting for coordinator READY: %w", err)
		}
		if len(frames) == 1 && bytes.Equal(frames[0], readyFrame) {
			e.log.Debug("mockengine: coordinator READY")
			return nil
		}
		e.log.Warn("mockengine: message before coordinator READY ignored", "frames", len(frames))
	}
}

// readySkipper drops the READY frames a coordinator re-sends (or sends for a
// later engine), as vLLM's engine ignores them after the first.
type readySkipper struct{ transport.Socket }

func (r readySkipper) Recv() ([][]byte, error) {
	for {
		frames, err := r.Socket.Recv()
		if err == nil && len(frames) == 1 && bytes.Equal(frames[0], readyFrame) {
			continue
		}
		return frames, err
	}
}

func (e *engine) closeCoordinator() {
	if e.wave.push != nil {
		e.wave.push.Close()
	}
}

// waveOnAdd applies an ADD's current_wave: a newer wave is adopted; an older
// one while idle means the frontend stamped it before learning the wave had
// completed, so the engine starts running and asks the coordinator (start_wave)
// to wake the other ranks.
func (e *engine) waveOnAdd(reqWave int64) {
	if e.wave.push == nil {
		return
	}
	cur := e.sched.CurrentWave
	switch {
	case reqWave > cur:
		e.sched.CurrentWave = reqWave
	case reqWave < cur && !e.wave.running:
		e.wave.running = true
		e.sendCoordinator(&wire.EngineCoreOutputs{StartWave: wire.SomeInt(cur)})
	}
}

// handleStartDPWave wakes a paused engine into wave w unless it is the
// excluded target (which already has the request) or w is behind it.
func (e *engine) handleStartDPWave(w wire.StartDPWave) {
	if e.wave.push == nil {
		e.log.Debug("mockengine: START_DP_WAVE ignored (no coordinator)", "wave", w.Wave)
		return
	}
	if w.Exclude.Valid && w.Exclude.Value == int64(e.cfg.Rank) {
		return
	}
	if w.Wave >= e.sched.CurrentWave {
		e.sched.CurrentWave = w.Wave
		e.wave.running = true
	}
}

// waveTick runs after every step tick: it ends a running wave once the engine
// is idle (rank 0 reports wave_complete) and sends the load to the
// coordinator when it changed, as vLLM checks around every step.
func (e *engine) waveTick() {
	if e.wave.push == nil {
		return
	}
	// A rank that stepped real work is in a running wave: vLLM's all-reduce
	// after the step sets engines_running from the unfinished requests.
	if !e.sched.Idle() {
		e.wave.running = true
	} else if e.wave.running {
		e.wave.running = false
		if e.cfg.Rank == 0 {
			e.sendCoordinator(&wire.EngineCoreOutputs{WaveComplete: wire.SomeInt(e.sched.CurrentWave)})
		}
		e.sched.CurrentWave++
		e.sched.StepCounter = 0
	}
	s := e.sched.Stats()
	if e.wave.sent && s.NumRunningReqs == e.wave.last.NumRunningReqs && s.NumWaitingReqs == e.wave.last.NumWaitingReqs {
		return
	}
	e.wave.sent, e.wave.last = true, s
	e.sendCoordinator(&wire.EngineCoreOutputs{SchedulerStats: &s})
}

func (e *engine) sendCoordinator(o *wire.EngineCoreOutputs) {
	o.EngineIndex = int64(e.cfg.Rank)
	o.Timestamp = e.timestamp()
	body, _, err := e.cfg.Layout.AppendOutputs(e.wave.buf[:0], o)
	if err != nil {
		e.log.Warn("mockengine: encoding coordinator message", "err", err)
		return
	}
	e.wave.buf = body
	if err := e.wave.push.Send(body); err != nil {
		e.log.Warn("mockengine: sending to coordinator", "err", err)
	}
}
