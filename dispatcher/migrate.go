package dispatcher

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// Migration on death. When an engine is lost (EngineDown) or stalls (CheckStalls),
// each of its in-flight requests is resubmitted to a live rank the policy chooses,
// as a new engine request: prompt = the original prompt + every token already
// delivered, max_tokens and min_tokens reduced by as many, a fresh engine request
// id. The caller's request id, Stream and callback stay the same, so the client sees
// one continuous stream. Greedy decoding continues exactly as if the request had
// never moved; seeded sampling cannot resume the engine's random stream (the
// continuation is a valid sample, not the one an uninterrupted run would draw).
//
// Requests that cannot be continued faithfully fail with a *MigrationError naming
// why: structured outputs (the grammar state is lost), prompt_embeds, multimodal
// inputs, pooling, streaming-input sessions, prompt logprobs, a context that no
// longer fits any live engine's max_model_len, or Config.MaxMigrations moves
// already made. Pinned requests (data_parallel_rank) fail as before unless
// Config.MigratePinned.

// MigrationError is the Cause of a request whose engine was lost and that could not
// be moved to another: Reason says why, Cause is what happened to the engine
// (*EngineDownError or *EngineStalledError, reachable with errors.As).
type MigrationError struct {
	Rank   int
	Reason string
	Cause  error
}

func (e *MigrationError) Error() string {
	return fmt.Sprintf("%v; not migrated: %s", e.Cause, e.Reason)
}

func (e *MigrationError) Unwrap() error { return e.Cause }

// migration outcomes: the bounded `outcome` label of switchyard_migrations_total.
type moveOutcome uint8

const (
	moveMoved     moveOutcome = iota // resubmitted to another rank
	moveLimit                        // MaxMigrations moves already made
	moveUnmovable                    // cannot be continued faithfully
	moveNoEngine                     // no live rank could take it
	numMoveOutcomes
)

var moveOutcomeNames = [numMoveOutcomes]string{"moved", "limit", "unmovable", "no_engine"}

// migrating reports whether migration is on for a request submitted as req:
// Config.MaxMigrations > 0, and not pinned unless Config.MigratePinned. Only
// those requests keep what a move needs (their request and delivered tokens).
func (d *Dispatcher) migrating(req *wire.EngineCoreRequest) bool {
	return d.cfg.MaxMigrations > 0 && (!req.DataParallelRank.Valid || d.cfg.MigratePinned)
}

// unmovable names what stops req from being continued faithfully elsewhere, or "".
func unmovable(req *wire.EngineCoreRequest) string {
	sp := req.Sampling
	switch {
	case sp == nil || req.IsPooling():
		return "pooling requests cannot be resumed"
	case sp.StructuredOutputs != nil:
		return "structured outputs: the grammar state is lost with the engine"
	case req.PromptEmbeds != nil:
		return "prompt_embeds cannot be extended with the generated tokens"
	case req.MMFeatures != nil:
		return "multimodal inputs cannot be resubmitted"
	case req.Resumable:
		return "streaming-input sessions cannot be resumed"
	case sp.PromptLogprobs.Valid:
		return "prompt logprobs would be computed again over the continued prompt"
	}
	return ""
}

// continuation builds the engine request that carries r on from where it stopped:
// r's original request with prompt + delivered tokens and the token budgets reduced.
// It allocates (the new prompt, params and id); only moves take this path.
// Caller holds r.mu.
func (d *Dispatcher) continuation(r *request) (*wire.EngineCoreRequest, string) {
	orig, err := r.orig.request()
	if err != nil {
		return nil, "the request as submitted could not be decoded again: " + err.Error()
	}
	req := *orig // shallow: the fields replaced below are the ones that change
	gen := int64(len(r.tokens))
	prompt := make([]int64, 0, len(req.PromptTokenIDs)+len(r.tokens))
	req.PromptTokenIDs = append(append(prompt, req.PromptTokenIDs...), r.tokens...)
	sp := *req.Sampling
	if sp.MaxTokens.Valid {
		sp.MaxTokens.Value -= gen
		if sp.MaxTokens.Value <= 0 {
			return nil, "every token was generated but the final output was lost"
		}
	}
	sp.MinTokens = max(0, sp.MinTokens-gen)
	req.Sampling = &sp
	req.DataParallelRank = wire.OptInt{} // a pinned rank is gone (MigratePinned)
	req.RequestID = r.id + "#m" + strconv.FormatUint(d.moveSeq.Add(1), 10)
	return &req, ""
}

// owns reports whether e holds r under id (r has not moved or ended).
func (r *request) owns(e *engine, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.done && r.eng == e && r.engID == id
}

// rescue ends r's stay on e, which was lost with cause (oc says how to count a
// failure): r moves to another rank when it can, else it fails as it would have
// without migration, its cause a *MigrationError when a move was tried. abortOld
// also aborts r at e (a stalled engine may wake up and still hold it).
func (d *Dispatcher) rescue(r *request, e *engine, cause error, oc outcome, abortOld bool) {
	start := d.cfg.Now()
	r.mu.Lock()
	if r.done || r.eng != e {
		r.mu.Unlock()
		return
	}
	if !r.migrating {
		d.endLocked(r, cause, oc, abortOld) // unlocks
		return
	}
	causeLabel := "engine_down"
	if oc == outcomeStalled {
		causeLabel = "engine_stalled"
	}
	why, mo := "", moveMoved
	var req *wire.EngineCoreRequest
	switch {
	case d.closed.Load():
		// Drain does not stop a move: the request is in flight, and Drain waits
		// for it to finish wherever it runs.
		why, mo = "the dispatcher is closed", moveNoEngine
	case r.moves >= d.cfg.MaxMigrations:
		why, mo = fmt.Sprintf("moved %d times already (--max-migrations %d)", r.moves, d.cfg.MaxMigrations), moveLimit
	default:
		if why = r.orig.unmovable(); why != "" {
			mo = moveUnmovable
		} else if req, why = d.continuation(r); why != "" {
			mo = moveUnmovable
		}
	}
	if why == "" {
		oldID := r.engID
		if err := d.moveLocked(r, e, req, start); err != nil {
			why, mo = err.Error(), moveNoEngine
		} else {
			d.m.migrations.WithLabelValues(causeLabel, moveOutcomeNames[moveMoved]).Inc()
			to, newID, delivered := r.eng.rank, r.engID, len(r.tokens)
			r.mu.Unlock()
			e.inFlight.Add(-1)
			e.ended.Add(1)
			if abortOld {
				d.aborts.addID(e, r, oldID, false)
			}
			d.noteIdle()
			d.log.Debug("dispatcher: request migrated", "id", r.id, "from", e.rank, "to", to, "engine_id", newID, "delivered", delivered)
			return
		}
	}
	d.m.migrations.WithLabelValues(causeLabel, moveOutcomeNames[mo]).Inc()
	d.endLocked(r, &MigrationError{Rank: e.rank, Reason: why, Cause: cause}, oc, abortOld)
}

// moveLocked admits req (r's continuation) at the best live rank other than from:
// a rank that is down, refuses the frame or has no place in its wire layout for a
// field of req is skipped. On success r is on its new rank under req's id.
// Caller holds r.mu.
func (d *Dispatcher) moveLocked(r *request, from *engine, req *wire.EngineCoreRequest, start time.Time) error {
	skip := []*engine{from}
	var last error
	for {
		t, err := d.choose(req, skip, start)
		if err != nil {
			if last != nil && errors.Is(err, ErrNoEngines) {
				return last
			}
			return err
		}
		skip = append(skip, t)
		if last = d.admitMove(r, t, req, start); last == nil {
			return nil
		}
	}
}

// admitMove sends req to t for r. Caller holds r.mu.
func (d *Dispatcher) admitMove(r *request, t *engine, req *wire.EngineCoreRequest, start time.Time) error {
	capped, err := capMaxTokens(req.Sampling, promptLen(req), t.maxModelLen.Load())
	if err != nil {
		return err
	}
	// A fresh id must never collide with a live one: draw another on a clash.
	for {
		if _, dup := d.table.LoadOrStore(req.RequestID, r); !dup {
			break
		}
		req.RequestID = r.id + "#m" + strconv.FormatUint(d.moveSeq.Add(1), 10)
	}
	undo := func() { d.table.Delete(req.RequestID) }
	if !t.up.Load() {
		undo()
		return &EngineDownError{Rank: t.rank, Cause: engineCause(t)}
	}
	out := *req
	out.Sampling = capped
	_, body, aux, err := d.encodeAdd(&out, t, start)
	if err != nil {
		wire.PutBuffer(body)
		undo()
		return fmt.Errorf("encoding for rank %d: %w", t.rank, err)
	}
	if t.inFlight.Add(1) == 1 {
		t.idleAt.Store(start.UnixNano())
	}
	t.admitted.Add(1)
	// r is on t before the ADD leaves: t's first output may arrive at once (it
	// waits for r.mu, which is held, and then finds r where it belongs).
	from, fromID := r.eng, r.engID
	r.eng, r.engID = t, req.RequestID
	if err := d.sender.Send(t.rank, wire.RequestAdd, body, aux); err != nil {
		r.eng, r.engID = from, fromID
		t.inFlight.Add(-1)
		undo()
		return fmt.Errorf("rank %d refused the ADD: %w", t.rank, err)
	}
	if fromID != r.id {
		d.table.Delete(fromID) // the lost engine's id for it
	}
	r.moves++
	r.movedAt = start
	r.vs.Moved()
	return nil
}

// endLocked ends r with a *RequestFailedError of cause; abort also queues an ABORT
// at its engine (which may still hold it). It unlocks r.mu.
func (d *Dispatcher) endLocked(r *request, cause error, oc outcome, abort bool) {
	r.done = true
	err := &RequestFailedError{ID: r.id, Rank: r.eng.rank, Cause: cause}
	if abort {
		r.aborting = true
	} else {
		d.unlist(r)
	}
	if r.deliver != nil {
		r.deliver(r.eng.rank, nil, err)
	} else {
		r.err = err
	}
	stop := r.stopWatch
	r.mu.Unlock()
	d.settle(r, stop, oc, abort, false)
}

// unlist frees r's ids in the table: its own and, after a move, its engine id.
func (d *Dispatcher) unlist(r *request) {
	d.table.Delete(r.id)
	if r.engID != r.id {
		d.table.Delete(r.engID)
	}
}

// MigrateEngine moves rank's in-flight requests to other ranks now, as a move after
// a death does (prompt + delivered tokens, a fresh engine id, the client's stream
// unchanged), and aborts them at rank, which is alive: the second half of draining
// it for maintenance with zero failed requests. A request that cannot move
// (migration off, over its limit, unmovable, no other rank takes it) stays and
// finishes where it is. Call DrainEngine first, or new requests keep arriving.
func (d *Dispatcher) MigrateEngine(rank int) (moved, stayed int, err error) {
	e := d.engines.Load().find(rank)
	if e == nil {
		return 0, 0, &UnknownRankError{Rank: rank}
	}
	for _, r := range d.table.All() {
		switch d.relocate(r, e) {
		case relocMoved:
			moved++
		case relocStayed:
			stayed++
		}
	}
	d.kickAborter()
	d.log.Info("dispatcher: engine's requests moved away", "rank", rank, "moved", moved, "stayed", stayed)
	return moved, stayed, nil
}

type relocation int

const (
	relocElsewhere relocation = iota // not on the engine (moved or ended already)
	relocMoved
	relocStayed
)

// relocate moves r off e, which is alive, if r is on e and can move.
func (d *Dispatcher) relocate(r *request, e *engine) relocation {
	start := d.cfg.Now()
	r.mu.Lock()
	if r.done || r.eng != e {
		r.mu.Unlock()
		return relocElsewhere
	}
	var req *wire.EngineCoreRequest
	why := ""
	switch {
	case !r.migrating:
		why = "migration is off for it"
	case r.moves >= d.cfg.MaxMigrations:
		why = "over --max-migrations"
	default:
		if why = r.orig.unmovable(); why == "" {
			req, why = d.continuation(r)
		}
	}
	oldID := r.engID
	if why != "" || d.moveLocked(r, e, req, start) != nil {
		r.mu.Unlock()
		d.m.migrations.WithLabelValues("drain", moveOutcomeNames[moveUnmovable]).Inc()
		return relocStayed
	}
	d.m.migrations.WithLabelValues("drain", moveOutcomeNames[moveMoved]).Inc()
	r.mu.Unlock()
	e.inFlight.Add(-1)
	e.ended.Add(1)
	d.aborts.addID(e, r, oldID, false) // e is alive and still runs the old id
	d.noteIdle()
	return relocMoved
}
