package dispatcher

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-llm/switchyard/wire"
)

// TestCollectMergesAndWakesOnce: a collecting stream's reader is not woken by plain
// outputs, which merge into one; an output with extras (logprobs) starts a new one;
// the final output wakes the reader, and the tokens and finish are exactly those sent.
func TestCollectMergesAndWakesOnce(t *testing.T) {
	h := newHarness(t, Config{StreamBuffer: 4}, 0)
	s, err := h.d.Submit(context.Background(), mkReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	s.Collect()
	woken := make(chan struct{})
	go func() {
		defer close(woken)
		<-s.r.notify // what Recv waits on
	}()
	for i := range int64(10) { // more than the buffer: merged, so no slow consumer
		h.d.HandleOutputs(0, batch(0, tokOut("a", 10+i)))
	}
	select {
	case <-woken:
		t.Fatal("a plain output woke the collecting reader")
	case <-time.After(20 * time.Millisecond):
	}
	lp := tokOut("a", 20)
	lp.NewLogprobs = &wire.LogprobsLists{}
	h.d.HandleOutputs(0, batch(0, lp, tokOut("a", 21)))
	h.d.HandleOutputs(0, batch(0, finOut("a", wire.FinishLength, 22)))
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the final output did not wake the reader")
	}
	outs, err := recvAll(t, s)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {20}, {21, 22}}
	if diff := cmp.Diff(want, tokens(outs)); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
	if outs[1].Logprobs == nil {
		t.Error("the logprobs output lost its logprobs")
	}
	if outs[0].Finish != wire.FinishNone || outs[2].Finish != wire.FinishLength {
		t.Errorf("finishes %v %v", outs[0].Finish, outs[2].Finish)
	}
}

// TestRequestStaysInItsSizeClass: the request struct is allocated per request; 416
// bytes is a Go size class, and one byte more costs 32 per request in flight (the
// memory target is per in-flight request).
func TestRequestStaysInItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(request{}); n > 416 {
		t.Errorf("request is %d bytes, more than the 416-byte size class", n)
	}
}

// TestChooseManyEnginesDoesNotAllocate: above 32 engines the loads come from a
// pool; a fresh slice per request was kilobytes of heap each time (bench
// --scale engines: 2.4 KB per request at 32 engines, 7.4 KB at 64).
func TestChooseManyEnginesDoesNotAllocate(t *testing.T) {
	d, err := New(Config{}, nopSender{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for r := range 64 {
		d.EngineUp(r)
	}
	req := mkReq("x")
	now := time.Now()
	d.choose(req, nil, now) // the pool's first slice
	if n := testing.AllocsPerRun(100, func() { _, _ = d.choose(req, nil, now) }); n != 0 {
		t.Errorf("choose among 64 engines: %v allocations, want 0", n)
	}
}
