package dispatcher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

func TestJudgeStall(t *testing.T) {
	const s = int64(time.Second)
	timeout := 5 * time.Second
	for _, tt := range []struct {
		name                       string
		now, heard, idle, inFlight int64
		stalled                    bool
		want                       stallVerdict
	}{
		{"idle engine owes nothing", 100 * s, 0, 0, 0, false, stallIdle},
		{"busy and heard lately", 100 * s, 97 * s, 0, 3, false, stallNone},
		{"busy and silent past the timeout", 100 * s, 90 * s, 0, 3, false, stallStalled},
		{"silence counts from the last idle check", 100 * s, 10 * s, 98 * s, 1, false, stallNone},
		{"exactly the timeout is not past it", 100 * s, 95 * s, 0, 1, false, stallNone},
		{"already stalled", 100 * s, 10 * s, 0, 1, true, stallNone},
		{"stalled and drained restarts the idle clock", 100 * s, 10 * s, 0, 0, true, stallIdle},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := judgeStall(tt.now, tt.heard, tt.idle, tt.inFlight, tt.stalled, timeout); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	if got := judgeStall(100*s, 0, 0, 1, false, 0); got != stallNone {
		t.Fatalf("timeout 0 (off): %v", got)
	}
}

// fakeClock is an injected Config.Now.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// TestStalledEngine: a connected engine with a request in flight that says
// nothing for StallTimeout used to stay routable for ever while its requests
// hung. Now it is stalled: its request fails with a clear cause (and is
// aborted at it), new work goes elsewhere, and it is routable again once it
// speaks. The clock is injected; CheckStalls is called by hand.
func TestStalledEngine(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1700000000, 0)}
	// The watchdog ticks every StallTimeout/4 of real time; the test is done
	// long before, and checks state rather than who marked it.
	h := newHarness(t, Config{Now: clk.Now, StallTimeout: 5 * time.Second}, 0, 1)
	d := h.d
	d.CheckStalls(clk.Now()) // both idle
	clk.advance(time.Second)
	a, err := d.Submit(context.Background(), pinned("a", 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Submit(context.Background(), pinned("b", 1))
	if err != nil {
		t.Fatal(err)
	}
	clk.advance(4 * time.Second)
	d.HandleOutputs(1, batch(1, tokOut("b", 7)))
	if got := d.CheckStalls(clk.advance(time.Second)); len(got) != 0 {
		t.Fatalf("stalled %v 5s after rank 0 got work, want none yet", got)
	}
	d.CheckStalls(clk.advance(3 * time.Second))
	// Rank 0: busy since t+1s and silent for 8s.
	st := d.Engines()
	if st[0].State != EngineStateStalled || st[1].State != EngineStateUp {
		t.Fatalf("states %v %v, want stalled, up", st[0].State, st[1].State)
	}
	_, err = recvAll(t, a)
	var failed *RequestFailedError
	var stalled *EngineStalledError
	if !errors.As(err, &failed) || !errors.As(err, &stalled) || stalled.Rank != 0 || stalled.Silent < 5*time.Second {
		t.Fatalf("a ended with %v, want a stall of rank 0", err)
	}
	if ab := h.s.next(t, wire.RequestAbort); len(ab.ids) != 1 || ab.ids[0] != "a" || ab.rank != 0 {
		t.Fatalf("ABORT %+v, want a on rank 0", ab)
	}
	// It is asked to speak (a utility call every vLLM engine answers): once
	// its requests have failed it would have nothing else to say.
	if u := h.s.sent(wire.RequestUtility); len(u) != 1 || u[0].rank != 0 || u[0].method != stallProbeMethod {
		t.Fatalf("probes %+v, want one %s on rank 0", u, stallProbeMethod)
	}
	// b on the healthy rank is untouched.
	d.HandleOutputs(1, batch(1, finOut("b", wire.FinishLength, 8)))
	if _, err := recvAll(t, b); err != nil {
		t.Fatalf("b: %v", err)
	}
	// No new work for rank 0: unpinned requests go to rank 1, pinned ones
	// are refused.
	for _, id := range []string{"c1", "c2", "c3"} {
		s, err := d.Submit(context.Background(), mkReq(id))
		if err != nil || s.Rank() != 1 {
			t.Fatalf("%s: rank %v err %v", id, s, err)
		}
	}
	var bad *InvalidDataParallelRank
	if _, err := d.Submit(context.Background(), pinned("p", 0)); !errors.As(err, &bad) {
		t.Fatalf("pinned to a stalled rank: %v", err)
	}
	// It answers the probe: routable again.
	d.HandleOutputs(0, &wire.EngineCoreOutputs{UtilityOutput: &wire.UtilityOutput{CallID: stallProbeCallID}})
	if st := d.Engines(); st[0].State != EngineStateUp {
		t.Fatalf("rank 0 %v after speaking", st[0].State)
	}
	if s, err := d.Submit(context.Background(), pinned("p2", 0)); err != nil || s.Rank() != 0 {
		t.Fatalf("pinned after recovery: %v", err)
	}
	// An idle engine is never stalled, however long it is quiet.
	d.HandleOutputs(0, batch(0, finOut("p2", wire.FinishLength, 1)))
	for _, id := range []string{"c1", "c2", "c3"} {
		d.HandleOutputs(1, batch(1, finOut(id, wire.FinishLength, 1)))
	}
	d.CheckStalls(clk.advance(time.Hour))
	if got := d.CheckStalls(clk.advance(time.Hour)); len(got) != 0 {
		t.Fatalf("idle engines stalled: %v", got)
	}
}
