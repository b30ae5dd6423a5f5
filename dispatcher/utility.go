package dispatcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// UtilityResult is one engine's answer to a utility call.
type UtilityResult struct {
	Rank  int
	Raw   wire.Raw // the result value as raw msgpack; nil when the call failed or returned None
	Value any      // Raw decoded with vmihailenco/msgpack/v5
	Err   error    // *UtilityCallError, or nil
}

// UtilityResults are the per-engine answers to one CallUtility, in rank order.
type UtilityResults struct {
	Method  string
	Results []UtilityResult
}

// Err joins the per-engine failures; nil when every engine answered successfully.
func (u UtilityResults) Err() error {
	var errs []error
	for _, r := range u.Results {
		if r.Err != nil {
			errs = append(errs, r.Err)
		}
	}
	return errors.Join(errs...)
}

// Consensus returns the value every engine agreed on. It fails with the first
// engine's error if any failed, ErrNoEngines if none answered, and
// *InconsistentUtilityResults when engines answered differently.
func (u UtilityResults) Consensus() (any, error) {
	if len(u.Results) == 0 {
		return nil, ErrNoEngines
	}
	for _, r := range u.Results {
		if r.Err != nil {
			return nil, r.Err
		}
	}
	first := u.Results[0]
	for _, r := range u.Results[1:] {
		// Equal bytes are equal values; equal values may still differ in encoding
		// width (an int as fixint or int64), so fall back to comparing them decoded.
		if !bytes.Equal(r.Raw, first.Raw) && !reflect.DeepEqual(r.Value, first.Value) {
			e := &InconsistentUtilityResults{Method: u.Method}
			for _, r := range u.Results {
				e.Ranks = append(e.Ranks, r.Rank)
				e.Values = append(e.Values, r.Value)
			}
			return nil, e
		}
	}
	return first.Value, nil
}

// CallUtility calls method on every ready engine and waits for all of them (up to
// Config.UtilityTimeout or ctx). args are encoded with vmihailenco/msgpack/v5 as the
// call's argument array. The error is nil only when every engine answered without a
// failure; otherwise it is *UtilityTimeoutError (naming the ranks that did not
// answer), ctx.Err(), or the joined *UtilityCallError of the engines that failed. The
// results hold whatever arrived in every case.
func (d *Dispatcher) CallUtility(ctx context.Context, method string, args ...any) (UtilityResults, error) {
	res := UtilityResults{Method: method}
	if d.closed.Load() {
		return res, ErrClosed
	}
	if args == nil {
		args = []any{} // the engine unpacks args with *: always an array
	}
	raw, err := msgpack.Marshal(args)
	if err != nil {
		return res, fmt.Errorf("dispatcher: encoding arguments of %q: %w", method, err)
	}
	return d.callUtility(ctx, method, raw)
}

// CallUtilityRaw is CallUtility with the argument array already encoded: args
// (one msgpack array; nil or empty means none) reach every engine byte for byte,
// so a relay keeps what a decode and re-encode would change (map order, int
// keys, ext values). wire.AppendUtility's checks apply.
func (d *Dispatcher) CallUtilityRaw(ctx context.Context, method string, args wire.Raw) (UtilityResults, error) {
	if d.closed.Load() {
		return UtilityResults{Method: method}, ErrClosed
	}
	return d.callUtility(ctx, method, args)
}

// UtilityArgs encodes a call's argument array for one engine, in its wire layout
// (nil: the native one): for arguments that are array_like structs, whose field
// order is the engine's release's.
type UtilityArgs func(rank int, layout *wire.Layout) (wire.Raw, error)

// CallUtilityEach is CallUtility with each engine's arguments encoded for it by
// args, to those of ranks that are ready (nil ranks: every ready engine; none
// ready: ErrNoEngines). An encoding error fails that engine's slot, unsent.
func (d *Dispatcher) CallUtilityEach(ctx context.Context, method string, ranks []int, args UtilityArgs) (UtilityResults, error) {
	if d.closed.Load() {
		return UtilityResults{Method: method}, ErrClosed
	}
	return d.callUtilityTo(ctx, method, ranks, args)
}

func (d *Dispatcher) callUtility(ctx context.Context, method string, raw wire.Raw) (UtilityResults, error) {
	return d.callUtilityTo(ctx, method, nil, func(int, *wire.Layout) (wire.Raw, error) { return raw, nil })
}

func (d *Dispatcher) callUtilityTo(ctx context.Context, method string, only []int, argsFor UtilityArgs) (UtilityResults, error) {
	res := UtilityResults{Method: method}
	var ranks []int
	var layouts []*wire.Layout // layouts[i] is ranks[i]'s
	for _, e := range d.engines.Load().list {
		if e.up.Load() && (only == nil || slices.Contains(only, e.rank)) {
			ranks = append(ranks, e.rank)
			layouts = append(layouts, e.layout.Load())
		}
	}
	if len(ranks) == 0 {
		return res, ErrNoEngines
	}
	g, ids := d.util.start(method, ranks)
	for i, rank := range ranks {
		lay := layouts[i]
		if lay == nil {
			lay = wire.Native()
		}
		raw, err := argsFor(rank, lay)
		var body []byte
		if err == nil {
			body, err = wire.AppendUtility(wire.GetBuffer(), d.cfg.ClientIndex, ids[i], method, raw)
		}
		if err == nil {
			err = d.sender.Send(rank, wire.RequestUtility, body, nil)
		} else if body != nil {
			wire.PutBuffer(body)
		}
		if err != nil {
			d.util.settle(ids[i], &UtilityCallError{Method: method, Rank: rank, Cause: err})
		}
	}
	timer := time.NewTimer(d.cfg.UtilityTimeout)
	defer timer.Stop()
	select {
	case <-g.done:
		res.Results = g.results
	case <-ctx.Done():
		res.Results, _ = d.util.cancel(g)
		decodeValues(method, res.Results)
		return res, ctx.Err()
	case <-timer.C:
		var missing []int
		res.Results, missing = d.util.cancel(g)
		decodeValues(method, res.Results)
		return res, &UtilityTimeoutError{Method: method, Timeout: d.cfg.UtilityTimeout, MissingRanks: missing}
	}
	decodeValues(method, res.Results)
	return res, res.Err()
}

func decodeValues(method string, rs []UtilityResult) {
	for i := range rs {
		if rs[i].Raw != nil && rs[i].Err == nil {
			// An engine's result is input too: the reflection decoder recurses
			// once per nesting level with no bound of its own, so a deeply
			// nested result would exhaust the stack and crash the process.
			err := wire.CheckMsgpackDepth(rs[i].Raw, wire.MaxMsgpackDepth)
			if err == nil {
				err = msgpack.Unmarshal(rs[i].Raw, &rs[i].Value)
			}
			if err != nil {
				rs[i].Err = &UtilityCallError{Method: method, Rank: rs[i].Rank,
					Cause: fmt.Errorf("decoding result: %w", err)}
			}
		}
	}
}

// utilityTable tracks utility calls in flight by call id. Ids come from a counter
// starting at 1 (as Rust's client does), one per engine per call, so a reply is
// matched by id alone; ids we never issued (engine pushes use -1 and -2) are ignored.
type utilityTable struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]pendingCall
}

type pendingCall struct {
	g   *utilityGroup
	idx int // into g.results
}

// utilityGroup is one CallUtility: a slot per engine, closed done when all answered.
type utilityGroup struct {
	method    string
	ids       []uint64
	results   []UtilityResult
	answered  []bool
	remaining int
	done      chan struct{}
}

func (t *utilityTable) init() { t.calls = make(map[uint64]pendingCall) }

// start registers a call to ranks and returns its group and one call id per rank.
func (t *utilityTable) start(method string, ranks []int) (*utilityGroup, []uint64) {
	g := &utilityGroup{
		method:    method,
		ids:       make([]uint64, len(ranks)),
		results:   make([]UtilityResult, len(ranks)),
		answered:  make([]bool, len(ranks)),
		remaining: len(ranks),
		done:      make(chan struct{}),
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, r := range ranks {
		t.next++
		g.ids[i] = t.next
		g.results[i].Rank = r
		t.calls[t.next] = pendingCall{g: g, idx: i}
	}
	return g, g.ids
}

// answerLocked fills one slot and closes done when it was the last. Caller holds t.mu.
func (t *utilityTable) answerLocked(id uint64, fill func(g *utilityGroup, r *UtilityResult)) bool {
	pc, ok := t.calls[id]
	if !ok {
		return false
	}
	delete(t.calls, id)
	fill(pc.g, &pc.g.results[pc.idx])
	pc.g.answered[pc.idx] = true
	pc.g.remaining--
	if pc.g.remaining == 0 {
		close(pc.g.done)
	}
	return true
}

// resolve matches an engine's reply to its call; it reports false for an id we did not
// issue or no longer wait for. The result bytes are copied: u is reused by the caller.
func (t *utilityTable) resolve(rank int, u *wire.UtilityOutput) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.answerLocked(u.CallID, func(g *utilityGroup, r *UtilityResult) {
		if u.Failure.Valid {
			r.Err = &UtilityCallError{Method: g.method, Rank: rank, Msg: strings.Clone(u.Failure.Value)}
			return
		}
		if u.HasResult && u.Result != nil {
			r.Raw = append(wire.Raw(nil), u.Result...)
		}
	})
}

// settle fails one slot (the engine could not be reached).
func (t *utilityTable) settle(id uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answerLocked(id, func(_ *utilityGroup, r *UtilityResult) { r.Err = err })
}

// failRank fails every slot waiting on rank.
func (t *utilityTable) failRank(rank int, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, pc := range t.calls {
		if pc.g.results[pc.idx].Rank == rank {
			t.answerLocked(id, func(g *utilityGroup, r *UtilityResult) {
				r.Err = &UtilityCallError{Method: g.method, Rank: rank, Cause: cause}
			})
		}
	}
}

// cancel stops waiting for g and returns a copy of what arrived plus the ranks that
// did not answer.
func (t *utilityTable) cancel(g *utilityGroup) ([]UtilityResult, []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var missing []int
	var got []UtilityResult
	for i, id := range g.ids {
		delete(t.calls, id)
		if g.answered[i] {
			got = append(got, g.results[i])
		} else {
			missing = append(missing, g.results[i].Rank)
		}
	}
	return got, missing
}

// closeAll fails every waiting slot with err.
func (t *utilityTable) closeAll(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id := range t.calls {
		t.answerLocked(id, func(g *utilityGroup, r *UtilityResult) {
			r.Err = &UtilityCallError{Method: g.method, Rank: r.Rank, Cause: err}
		})
	}
}

// pending counts call ids still waited for.
func (t *utilityTable) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}
