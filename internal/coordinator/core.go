package coordinator

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// EventType says what happened.
type EventType uint8

// Events the edge steps into the Coordinator.
const (
	// EventStats: engine Rank reported its load (scheduler_stats on the
	// coordinator PULL).
	EventStats EventType = iota + 1
	// EventWaveComplete: rank 0 found no unfinished request on any rank at
	// the end of wave Wave; every rank is now paused.
	EventWaveComplete
	// EventStartWave: engine Rank, while idle, got a request stamped with a
	// stale wave and started running in wave Wave; the others must follow.
	EventStartWave
	// EventRequestArrived: a frontend sent a request stamped with Wave to
	// Rank while it believed the engines paused (our OnAdd, or another API
	// server's FIRST_REQ). Rank is -1 when the target is unknown.
	EventRequestArrived
	// EventEngineReady: the frontend saw engine Rank's handshake READY, so
	// the engine has received our coordinator READY.
	EventEngineReady
	// EventSubscribed: a peer subscribed on the back XPUB (an engine's input
	// thread sent 01 and now blocks until READY).
	EventSubscribed
)

var eventNames = [...]string{"", "Stats", "WaveComplete", "StartWave", "RequestArrived", "EngineReady", "Subscribed"}

func (t EventType) String() string {
	if int(t) < len(eventNames) && t != 0 {
		return eventNames[t]
	}
	return fmt.Sprintf("EventType(%d)", t)
}

// Event is one input to [Coordinator.Step]. Only the fields its Type names
// are meaningful.
type Event struct {
	Type EventType
	Rank int
	Wave int64
	Load wire.EngineLoad // EventStats
}

// MessageType says where a message goes.
type MessageType uint8

// Messages the Coordinator asks its edge to deliver.
const (
	// MsgReady: send the single frame "READY" on the back XPUB.
	MsgReady MessageType = iota + 1
	// MsgStartWave: send START_DP_WAVE [0x02, [Wave, Exclude]] on the back
	// XPUB, waking every paused engine except Exclude.
	MsgStartWave
	// MsgPublish: send [Counts|nil, Wave, Running] on the front XPUB.
	MsgPublish
	// MsgLoad: hand Rank's Load to the dispatcher (the LoadSink).
	MsgLoad
	// MsgWaveState: the wave state changed to (Wave, Running); Completed when
	// a wave_complete ended the previous wave. The edge mirrors it into the
	// atomics OnAdd reads, and into metrics.
	MsgWaveState
)

var messageNames = [...]string{"", "Ready", "StartWave", "Publish", "Load", "WaveState"}

func (t MessageType) String() string {
	if int(t) < len(messageNames) && t != 0 {
		return messageNames[t]
	}
	return fmt.Sprintf("MessageType(%d)", t)
}

// Message is one output of Step or Tick. Only the fields its Type names are
// meaningful.
type Message struct {
	Type      MessageType
	Rank      int               // MsgLoad
	Wave      int64             // MsgStartWave, MsgPublish, MsgWaveState
	Running   bool              // MsgPublish, MsgWaveState
	Exclude   wire.OptInt       // MsgStartWave: the rank that already has the request
	Load      wire.EngineLoad   // MsgLoad
	Counts    []wire.EngineLoad // MsgPublish: a copy the receiver may keep; nil = wave state only
	Completed bool              // MsgWaveState
}

// Coordinator is vLLM's DP coordinator as a pure state machine: it does no IO
// and never reads the clock. Feed it engine events with Step and the passing
// of time with Tick; deliver the messages they return.
//
// The slice Step and Tick return is reused by the next call. Coordinator is
// not safe for concurrent use; one goroutine owns it (Node's loop).
type Coordinator struct {
	waves     bool
	publish   bool
	interval  time.Duration
	heartbeat time.Duration
	resend    time.Duration
	log       *slog.Logger

	counts       []wire.EngineLoad
	statsChanged bool
	wave         int64
	running      bool

	ready      []bool
	readyCount int

	ticked      bool      // Tick has run at least once
	lastPublish time.Time // valid once published
	published   bool
	nextReady   time.Time

	msgs []Message
}

// New returns a Coordinator for cfg (only Engines, EnableWaves,
// PublishAddress != "", the intervals and Logger matter here).
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{
		waves:     cfg.EnableWaves,
		publish:   cfg.PublishAddress != "",
		interval:  cfg.PublishInterval,
		heartbeat: cfg.HeartbeatInterval,
		resend:    cfg.ReadyResend,
		log:       lg,
		counts:    make([]wire.EngineLoad, cfg.Engines),
		ready:     make([]bool, cfg.Engines),
		msgs:      make([]Message, 0, 8),
	}, nil
}

// Wave returns current_wave and engines_running.
func (c *Coordinator) Wave() (current int64, running bool) { return c.wave, c.running }

// Engines returns the number of ranks.
func (c *Coordinator) Engines() int { return len(c.counts) }

// Counts returns a copy of the per-engine load.
func (c *Coordinator) Counts() []wire.EngineLoad { return append([]wire.EngineLoad(nil), c.counts...) }

// AllReady reports whether every engine has been reported ready (READY is no
// longer re-sent).
func (c *Coordinator) AllReady() bool { return c.readyCount == len(c.ready) }

func (c *Coordinator) validRank(r int) bool { return r >= 0 && r < len(c.counts) }

// Step applies one event and returns the messages to deliver.
func (c *Coordinator) Step(ev Event) []Message {
	c.msgs = c.msgs[:0]
	switch ev.Type {
	case EventStats:
		c.stepStats(ev)
	case EventWaveComplete:
		c.stepWaveComplete(ev)
	case EventStartWave:
		c.stepStartWave(ev)
	case EventRequestArrived:
		c.stepRequestArrived(ev)
	case EventEngineReady:
		if c.validRank(ev.Rank) && !c.ready[ev.Rank] {
			c.ready[ev.Rank] = true
			c.readyCount++
		}
	case EventSubscribed:
		// vLLM sends READY once, after the last expected subscription, and
		// again for each later one (a new elastic-EP engine). Answering every
		// subscription at once gets each engine going without waiting for the
		// others or for the resend timer; engines ignore the extra READY.
		c.msgs = append(c.msgs, Message{Type: MsgReady})
	default:
		c.log.Warn("coordinator: unknown event", "type", ev.Type)
	}
	return c.msgs
}

func (c *Coordinator) stepStats(ev Event) {
	if !c.validRank(ev.Rank) {
		// vLLM's coordinator would die on the IndexError; one bad engine must
		// not take the load view of the others with it.
		c.log.Warn("coordinator: stats from unknown engine", "rank", ev.Rank, "engines", len(c.counts))
		return
	}
	c.counts[ev.Rank] = ev.Load
	c.statsChanged = true
	c.msgs = append(c.msgs, Message{Type: MsgLoad, Rank: ev.Rank, Load: ev.Load})
}

// stepWaveComplete: rank 0 reports wave w done; every rank has paused and
// moved to w+1. A report for a wave we already left is a late duplicate.
func (c *Coordinator) stepWaveComplete(ev Event) {
	if !c.waves {
		return
	}
	if c.wave > ev.Wave {
		return
	}
	c.log.Debug("coordinator: wave complete", "wave", ev.Wave, "next", ev.Wave+1)
	c.wave = ev.Wave + 1
	c.running = false
	c.changed(true)
}

// stepStartWave: an idle engine got a request from a wave it had already
// left (the frontend stamped it before learning of the wave_complete), so it
// started wave w alone; wake the others unless they are already in w.
func (c *Coordinator) stepStartWave(ev Event) {
	if !c.waves {
		return
	}
	if ev.Wave < c.wave || (ev.Wave == c.wave && c.running) {
		return
	}
	c.log.Debug("coordinator: engine started wave", "wave", ev.Wave, "rank", ev.Rank)
	c.wave = ev.Wave
	c.running = true
	c.startWave(ev.Wave, ev.Rank)
	c.changed(false)
}

// stepRequestArrived: a request reached paused engines. The target wakes by
// itself (it has work); the others need START_DP_WAVE so they join the
// lockstep with dummy batches. When the request's wave is stale the target
// will not treat it as current, so everyone is woken.
func (c *Coordinator) stepRequestArrived(ev Event) {
	if !c.waves || c.running {
		return
	}
	exclude := ev.Rank
	if ev.Wave < c.wave {
		exclude = -1
	}
	c.running = true
	c.startWave(c.wave, exclude)
	c.changed(false)
}

func (c *Coordinator) startWave(wave int64, exclude int) {
	m := Message{Type: MsgStartWave, Wave: wave}
	if c.validRank(exclude) {
		m.Exclude = wire.SomeInt(int64(exclude))
	}
	c.msgs = append(c.msgs, m)
}

// changed reports a wave-state change to the edge and, like vLLM, publishes
// it to the other frontends at once (counts nil) instead of waiting for the
// next load publish.
func (c *Coordinator) changed(completed bool) {
	c.msgs = append(c.msgs, Message{Type: MsgWaveState, Wave: c.wave, Running: c.running, Completed: completed})
	if c.publish {
		c.msgs = append(c.msgs, Message{Type: MsgPublish, Wave: c.wave, Running: c.running})
	}
}

// Tick tells the Coordinator the time is now and returns what is due: READY
// re-sends until every engine is ready, and load publishes (at most every
// PublishInterval while stats change, else every HeartbeatInterval).
func (c *Coordinator) Tick(now time.Time) []Message {
	c.msgs = c.msgs[:0]
	c.ticked = true
	if !c.AllReady() && !now.Before(c.nextReady) {
		c.msgs = append(c.msgs, Message{Type: MsgReady})
		c.nextReady = now.Add(c.resend)
	}
	if c.publish {
		since := now.Sub(c.lastPublish)
		if !c.published || (c.statsChanged && since >= c.interval) || since >= c.heartbeat {
			c.msgs = append(c.msgs, Message{Type: MsgPublish, Counts: c.Counts(), Wave: c.wave, Running: c.running})
			c.lastPublish = now
			c.published = true
			c.statsChanged = false
		}
	}
	return c.msgs
}

// Deadline returns when Tick next has something to do; ok is false when
// nothing is scheduled (no READY pending, no publisher). A zero time with ok
// means "now" (Tick has not run yet).
func (c *Coordinator) Deadline() (t time.Time, ok bool) {
	if !c.ticked {
		return time.Time{}, true
	}
	if !c.AllReady() {
		t, ok = c.nextReady, true
	}
	if c.publish {
		p := c.lastPublish.Add(c.heartbeat)
		if c.statsChanged {
			p = c.lastPublish.Add(c.interval)
		}
		if !ok || p.Before(t) {
			t, ok = p, true
		}
	}
	return t, ok
}

// OutputsEvents turns one EngineCoreOutputs from the coordinator PULL into
// events, appended to dst. As in vLLM, wave_complete wins over start_wave in
// the same message. Request outputs and utility replies do not belong on
// this socket; they are reported in ignored (and otherwise dropped) so the
// edge can log them, while the stats they came with are still used.
func OutputsEvents(dst []Event, o *wire.EngineCoreOutputs) (evs []Event, ignored bool) {
	rank := int(o.EngineIndex)
	if s := o.SchedulerStats; s != nil {
		dst = append(dst, Event{Type: EventStats, Rank: rank, Load: wire.EngineLoad{
			Waiting: s.NumWaitingReqs, Running: s.NumRunningReqs, KVCacheUsage: s.KVCacheUsage,
		}})
	}
	switch {
	case o.WaveComplete.Valid:
		dst = append(dst, Event{Type: EventWaveComplete, Rank: rank, Wave: o.WaveComplete.Value})
	case o.StartWave.Valid:
		dst = append(dst, Event{Type: EventStartWave, Rank: rank, Wave: o.StartWave.Value})
	}
	return dst, len(o.Outputs) > 0 || o.UtilityOutput != nil
}

// FirstReqEvent turns another frontend's FIRST_REQ into an event. Python
// frontends name the target by its 2-byte identity, which vLLM's coordinator
// passes through as exclude (and no engine ever matches it); we map it back
// to the rank so the exclusion works.
func FirstReqEvent(f wire.FirstReq) Event {
	rank := int(f.EngineIndex)
	if f.HasIdentity {
		rank = f.Identity.Rank()
	}
	return Event{Type: EventRequestArrived, Rank: rank, Wave: f.Wave}
}
