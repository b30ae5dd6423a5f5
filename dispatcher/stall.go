package dispatcher

import (
	"fmt"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// Liveness from outputs. An engine can stay connected and stop producing: its
// sockets are fine, so the frontend sees nothing wrong, yet its requests hang
// and least-loaded keeps sending it new work once its in-flight count drops.
// An engine with requests in flight that has sent neither an output nor
// scheduler stats for Config.StallTimeout is stalled: it gets no new work,
// its in-flight requests move to another rank (migrate.go) or fail with
// *EngineStalledError (and are aborted at it, in case it wakes up), and it is routable again as soon as it speaks.
//
// The rule is a pure function of the clock readings below; CheckStalls feeds
// it the time, and a ticker in the dispatcher (or a test) calls it.

// stallVerdict says what CheckStalls does with one engine.
type stallVerdict int

const (
	stallNone    stallVerdict = iota
	stallIdle                 // nothing in flight: the silence clock restarts
	stallStalled              // newly stalled
)

// judgeStall applies the rule at now (unix nanoseconds). heard is the last
// output or stats from the engine, idle the last moment it was known to have
// nothing in flight (a check that found it idle, or the admission that made
// it busy): it owes nothing before work reaches it.
func judgeStall(now, heard, idle, inFlight int64, stalled bool, timeout time.Duration) stallVerdict {
	if inFlight == 0 {
		return stallIdle
	}
	if stalled || timeout <= 0 {
		return stallNone
	}
	if now-max(heard, idle) > int64(timeout) {
		return stallStalled
	}
	return stallNone
}

// EngineStalledError is the cause of a request failed because its engine
// stopped producing: connected, requests in flight, and no output or
// scheduler stats for Silent.
type EngineStalledError struct {
	Rank   int
	Silent time.Duration
}

func (e *EngineStalledError) Error() string {
	return fmt.Sprintf("engine rank %d stalled: no output or scheduler stats for %v with requests in flight (--engine-stall-timeout)",
		e.Rank, e.Silent.Round(time.Millisecond))
}

// CheckStalls applies the stall rule to every engine at now and returns the
// ranks it newly marked stalled. The dispatcher's watchdog calls it every
// StallTimeout/4; tests call it with their own clock.
func (d *Dispatcher) CheckStalls(now time.Time) []int {
	ns := now.UnixNano()
	var out []int
	for _, e := range d.engines.Load().list {
		if !e.up.Load() {
			continue
		}
		if e.stalled.Load() {
			d.probeStalled(e, ns)
		}
		heard := e.lastHeard.Load()
		switch judgeStall(ns, heard, e.idleAt.Load(), e.inFlight.Load(), e.stalled.Load(), d.cfg.StallTimeout) {
		case stallIdle:
			e.idleAt.Store(ns)
		case stallStalled:
			if !e.stalled.CompareAndSwap(false, true) {
				continue
			}
			silent := time.Duration(ns - max(heard, e.idleAt.Load()))
			out = append(out, e.rank)
			d.m.stalls.Inc()
			d.log.Warn("dispatcher: engine stalled: no new work until it sends outputs again; failing its in-flight requests",
				"rank", e.rank, "silent", silent, "in_flight", e.inFlight.Load(), "stall_timeout", d.cfg.StallTimeout)
			cause := &EngineStalledError{Rank: e.rank, Silent: silent}
			for _, r := range d.table.All() {
				// Moved or failed (r's own lock decides whether it is e's); the
				// engine may still hold the request: abort it there too.
				d.rescue(r, e, cause, outcomeStalled, true)
			}
			d.kickAborter()
			d.probeStalled(e, ns)
		}
	}
	return out
}

// stallProbeMethod is the utility a stalled engine is asked, to make it
// speak: once its requests have failed it has nothing else to say, and an
// idle engine sends nothing. vLLM's EngineCore answers every utility call,
// this cheap one included.
const stallProbeMethod = "is_sleeping"

// stallProbeCallID tags probe calls; real calls count up from 1, so the
// reply to a probe is never taken for theirs (it is dropped after it has
// made the engine heard).
const stallProbeCallID = 1 << 62

// probeStalled asks a stalled engine to speak, at most once per
// StallTimeout.
func (d *Dispatcher) probeStalled(e *engine, ns int64) {
	if last := e.probedAt.Load(); last != 0 && ns-last < int64(d.cfg.StallTimeout) {
		return
	}
	e.probedAt.Store(ns)
	body, err := wire.AppendUtility(wire.GetBuffer(), d.cfg.ClientIndex, stallProbeCallID, stallProbeMethod, []byte{0x90})
	if err == nil {
		err = d.sender.Send(e.rank, wire.RequestUtility, body, nil)
	} else {
		wire.PutBuffer(body)
	}
	if err != nil {
		d.log.Debug("dispatcher: probe of a stalled engine not sent", "rank", e.rank, "err", err)
	}
}

// heard records that rank sent an output or stats at ns; a stalled engine is
// routable again.
func (d *Dispatcher) heard(e *engine, ns int64) {
	e.lastHeard.Store(ns)
	if e.stalled.Load() && e.stalled.CompareAndSwap(true, false) {
		d.log.Info("dispatcher: stalled engine speaks again; routing to it", "rank", e.rank)
	}
}

// runStallWatch ticks CheckStalls until Close.
func (d *Dispatcher) runStallWatch() {
	defer close(d.stallDone)
	t := time.NewTicker(max(d.cfg.StallTimeout/4, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			d.CheckStalls(d.cfg.Now())
		case <-d.stop:
			return
		}
	}
}
