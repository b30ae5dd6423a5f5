package mockengine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// inMsg is one message from an input socket (frames = [type, body, aux...]).
type inMsg struct {
	frames [][]byte
	err    error
}

// loop is the engine's busy loop: input messages are applied as they come, and a
// step runs every StepInterval while there is work.
func (e *engine) loop(ctx context.Context) error {
	inbox := make(chan inMsg)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		e.closeAll() // unblocks the readers
		wg.Wait()
	}()
	for _, s := range e.ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				frames, err := s.Recv()
				select {
				case inbox <- inMsg{frames, err}:
				case <-ctx.Done():
					return
				}
				if errors.Is(err, transport.ErrClosed) {
					return
				}
			}
		}()
	}
	tick := time.NewTicker(e.cfg.StepInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-inbox:
			if m.err != nil {
				if errors.Is(m.err, transport.ErrClosed) {
					return nil
				}
				continue
			}
			if err := e.handle(m.frames); err != nil {
				return e.die(err)
			}
		case <-tick.C:
			if e.lock != nil && !e.lock.whole() {
				continue // blocked in the collective with a dead peer
			}
			if !e.sched.Idle() {
				if err := e.step(ctx); err != nil {
					return err
				}
			}
			e.waveTick()
		}
	}
}

// ErrInputThreadDied: the mock received a message on which a real engine's input
// thread would die. vLLM decodes an ADD (and ABORT/UTILITY) outside the thread's
// try block (EngineCoreProc.process_input_sockets), so a real engine would stop
// reading without a word and every later request would hang. The mock instead
// sends ENGINE_CORE_DEAD on every output and exits with this error, so a test
// sees at once that switchyard sent something a real engine cannot take.
var ErrInputThreadDied = errors.New("mockengine: a real engine's input thread would die on this message")

// ErrNoOutputSocket: an output is due for a client_index the engine has no output
// socket for. vLLM's output thread indexes sockets[client_index] and dies on the
// IndexError; the mock dies with the sentinel on the outputs it has.
var ErrNoOutputSocket = errors.New("mockengine: no output socket for client_index")

// handle applies one input message. An error is fatal: the engine dies with the
// sentinel (a real engine dies on a duplicate id; on a message it cannot decode its
// input thread dies silently, which the mock makes loud so tests notice).
func (e *engine) handle(frames [][]byte) error {
	if len(frames) < 2 {
		return fmt.Errorf("mockengine: input message with %d frames", len(frames))
	}
	typ, err := wire.ParseRequestType(frames[0])
	if err != nil {
		return fmt.Errorf("mockengine: %w", err)
	}
	e.log.Debug("mockengine: request", "type", typ)
	switch typ {
	case wire.RequestAdd:
		var req wire.EngineCoreRequest
		if err := e.cfg.Layout.DecodeAdd(frames[1:], &req); err != nil {
			return fmt.Errorf("%w: ADD: %w", ErrInputThreadDied, err)
		}
		// vLLM's rules only (wire.EngineAccepts), not switchyard's stricter ones: the
		// mock must take everything a real engine takes.
		if err := wire.EngineAccepts(&req); err != nil {
			return fmt.Errorf("%w: ADD %q: %w", ErrInputThreadDied, req.RequestID, err)
		}
		if err := e.decodePooling(&req); err != nil {
			return err
		}
		e.waveOnAdd(req.CurrentWave)
		return e.sched.AddAt(e.now(), &req)
	case wire.RequestAbort:
		ids, err := wire.DecodeAbort(frames[1])
		if err != nil {
			return fmt.Errorf("%w: ABORT: %w", ErrInputThreadDied, err)
		}
		e.sched.Abort(ids)
	case wire.RequestUtility:
		client, callID, method, args, err := wire.DecodeUtility(frames[1])
		if err != nil {
			return fmt.Errorf("%w: UTILITY: %w", ErrInputThreadDied, err)
		}
		return e.utility(client, callID, method, args)
	case wire.RequestStartDPWave:
		w, err := wire.DecodeStartDPWave(frames[1])
		if err != nil {
			return fmt.Errorf("mockengine: START_DP_WAVE: %w", err)
		}
		e.handleStartDPWave(w)
	}
	return nil
}

// Raw msgpack results of the utility calls the mock answers.
var (
	rawTrue  = wire.Raw{0xc3}
	rawFalse = wire.Raw{0xc2}
	rawNil   = wire.Raw{0xc0}
	rawTasks = wire.Raw(append([]byte{0x91, 0xa8}, "generate"...))
)

func (e *engine) utility(client int64, callID uint64, method string, args wire.Raw) error {
	u := wire.UtilityOutput{CallID: callID, HasResult: true, Result: rawNil}
	fail := func(msg string) {
		u.HasResult, u.Result = false, nil
		u.Failure = wire.SomeString("Call to " + method + " method failed: " + msg)
	}
	if res, failure, ok := e.loraUtility(method, args); ok {
		u.Result = res
		if failure != "" {
			fail(failure)
		}
		out := wire.EngineCoreOutputs{EngineIndex: int64(e.cfg.Rank), Timestamp: e.timestamp(), UtilityOutput: &u}
		return e.send(client, &out)
	}
	switch n, _ := wire.ArrayLen(args); {
	case !e.hasMethod(method):
		fail("'EngineCoreProc' object has no attribute '" + method + "'")
	case n > maxUtilityArgs:
		// vLLM's _convert_msgspec_args asserts the count before the method runs
		// (str(AssertionError()) is empty): nothing below happens.
		fail("")
	case method == "is_sleeping":
		u.Result = rawFalse
		if e.sleeping {
			u.Result = rawTrue
		}
	case method == "reset_prefix_cache":
		u.Result = e.resetPrefixCache(args)
	case method == "get_supported_tasks" && e.cfg.Pooling != nil:
		u.Result = e.cfg.Pooling.tasksRaw()
	case method == "get_supported_tasks":
		u.Result = rawTasks
	case method == "pd_stats":
		if b, err := msgpack.Marshal(e.sched.PDStats()); err == nil {
			u.Result = b
		}
	case method == "sleep":
		e.sleeping = true
	case method == "wake_up":
		e.sleeping = false
	}
	out := wire.EngineCoreOutputs{EngineIndex: int64(e.cfg.Rank), Timestamp: e.timestamp(), UtilityOutput: &u}
	return e.send(client, &out)
}

// maxUtilityArgs is more than any method the mock answers takes.
const maxUtilityArgs = 4

// served are the utility methods the mock answers in every layout.
var served = []string{"is_sleeping", "reset_prefix_cache", "get_supported_tasks", "sleep", "wake_up",
	"reset_mm_cache", "reset_encoder_cache", "execute_dummy_batch", "profile", "pd_stats"}

// releaseMethods are EngineCore methods that tell vLLM releases apart (the layout
// probes ask for them), by built-in layout, as vLLM's EngineCore has them.
var releaseMethods = map[string][]string{
	"v0.11":  {"save_tensorized_model", "execute_model_with_error_logging"},
	"v0.12":  {"log_error_detail"},
	"v0.15":  {"log_error_detail", "log_iteration_details"},
	"v0.18":  {"log_error_detail", "log_iteration_details", "is_scheduler_paused"},
	"v0.21":  {"log_error_detail", "log_iteration_details", "is_scheduler_paused", "get_kv_cache_group_metadata"},
	"newest": {"log_error_detail", "log_iteration_details", "is_scheduler_paused", "get_kv_cache_group_metadata"},
}

// hasMethod: what the engine of e's layout would find with getattr. A layout file's
// engine has its probe table's methods.
func (e *engine) hasMethod(m string) bool {
	l := e.cfg.Layout
	if slices.Contains(served, m) {
		return true
	}
	if ms, ok := releaseMethods[l.Name]; ok && l.Source == "built-in" {
		return slices.Contains(ms, m)
	}
	return slices.Contains(l.ProbeHas, m)
}

// send encodes and sends one message to outputs[client].
func (e *engine) send(client int64, o *wire.EngineCoreOutputs) error {
	if client < 0 || int(client) >= len(e.outs) {
		return fmt.Errorf("%w: client_index %d, %d output sockets", ErrNoOutputSocket, client, len(e.outs))
	}
	body, aux, err := e.cfg.Layout.AppendOutputs(e.buf[:0], o)
	if err != nil {
		return fmt.Errorf("mockengine: encoding outputs: %w", err)
	}
	e.buf = body
	frames := append([][]byte{body}, aux...)
	if err := e.outs[client].Send(frames...); err != nil {
		return fmt.Errorf("mockengine: sending outputs: %w", err)
	}
	return nil
}

// step runs one scheduler step and sends one EngineCoreOutputs per client, with the
// scheduler stats on the first. Faults trigger here.
func (e *engine) step(ctx context.Context) error {
	select {
	case k := <-e.cfg.FaultNow:
		now := max(e.steps, 1)
		switch k {
		case FaultDie:
			e.cfg.Faults.DieAfterSteps = now
		case FaultGarbage:
			e.cfg.Faults.GarbageAfterSteps = now
		case FaultStall:
			e.cfg.Faults.StallAfterSteps = now
		}
	default:
	}
	f := e.cfg.Faults
	switch n := e.steps; {
	case f.DieAfterSteps > 0 && n >= f.DieAfterSteps:
		return e.die(fmt.Errorf("%w: die after %d steps", ErrFault, n))
	case f.ExitAfterSteps > 0 && n >= f.ExitAfterSteps:
		e.log.Warn("mockengine: exiting without sentinel", "steps", n)
		return fmt.Errorf("%w: exit after %d steps", ErrFault, n)
	case f.StallAfterSteps > 0 && n >= f.StallAfterSteps:
		e.log.Warn("mockengine: stalling", "steps", n)
		<-ctx.Done() // stop reading and stepping; connections stay open
		return nil
	case f.GarbageAfterSteps > 0 && n >= f.GarbageAfterSteps:
		e.log.Warn("mockengine: sending garbage", "steps", n)
		for _, s := range e.outs {
			s.Send([]byte{0xc1, 0xde, 0xad})
		}
		e.steps++
		e.sched.StepAt(e.now(), nil) // the step's tokens are lost, as in a corrupted engine
		return nil
	}
	e.pending = e.sched.StepAt(e.now(), e.pending[:0])
	e.steps++
	e.publishKVEvents()
	for _, o := range e.pending {
		if o.ClientIndex < 0 || int(o.ClientIndex) >= len(e.outs) {
			return e.die(fmt.Errorf("%w: request %q has client_index %d, the engine has %d output sockets", ErrNoOutputSocket, o.RequestID, o.ClientIndex, len(e.outs)))
		}
	}
	stats := e.sched.Stats()
	if p, ok := e.sched.TakePrefixCacheStats(); ok {
		stats = withPrefixCacheStats(stats, p)
	}
	if e.cfg.MaxLoRAs > 0 {
		stats = e.sched.withLoRAStats(stats)
	}
	ts := e.timestamp()
	for client := range e.outs {
		out := wire.EngineCoreOutputs{EngineIndex: int64(e.cfg.Rank), Timestamp: ts}
		for _, o := range e.pending {
			if o.ClientIndex == int64(client) {
				out.Outputs = append(out.Outputs, o.EngineCoreOutput)
			}
		}
		if client == 0 {
			out.SchedulerStats = &stats
		}
		if len(out.Outputs) == 0 && out.SchedulerStats == nil {
			continue
		}
		if err := e.send(int64(client), &out); err != nil {
			return e.die(err)
		}
	}
	return nil
}
