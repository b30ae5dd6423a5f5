package frontend

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

func item() sendItem { return sendItem{typ: wire.RequestAdd, body: wire.GetBuffer()} }

func TestSendQueueShare(t *testing.T) {
	q := newSendQueue(8)
	const a, b = 1, 2
	for i := range 8 {
		if ok, _ := q.tryPush(a, item(), true); !ok {
			t.Fatalf("push %d refused", i)
		}
	}
	// Full: both wait.
	if ok, room := q.tryPush(a, item(), true); ok || room == nil {
		t.Fatal("push into a full queue accepted")
	}
	q.setWaiting(a, 1)
	q.setWaiting(b, 1)
	// Non-ADDs never wait: they use the reserve.
	if ok, _ := q.tryPush(0, sendItem{typ: wire.RequestAbort, body: wire.GetBuffer()}, false); !ok {
		t.Fatal("abort refused by a queue full of ADDs")
	}
	got := q.popBatch(nil, 3) // two ADDs and... the writer drains in order
	if len(got) != 3 {
		t.Fatalf("popped %d", len(got))
	}
	// The burst client is over its share (8/2) while b waits: b gets the room.
	if ok, _ := q.tryPush(a, item(), true); ok {
		t.Fatal("the burst client took the free slot ahead of a waiting client")
	}
	if ok, _ := q.tryPush(b, item(), true); !ok {
		t.Fatal("the waiting client did not get the free slot")
	}
	q.setWaiting(b, -1)
	q.close()
	if ok, room := q.tryPush(a, item(), true); ok || room != nil {
		t.Fatal("push into a closed queue")
	}
}

func TestSendQueueReserveBounded(t *testing.T) {
	q := newSendQueue(16)
	n := 0
	for {
		ok, _ := q.tryPush(0, sendItem{typ: wire.RequestAbort, body: wire.GetBuffer()}, false)
		if !ok {
			break
		}
		n++
	}
	if n != q.cap+q.reserve {
		t.Fatalf("%d non-waiting messages queued, want %d", n, q.cap+q.reserve)
	}
	q.close()
}

// testEngine is a Ready engine without sockets or writer: the test pops its
// queue by hand.
func testEngine(t *testing.T, queue int) *engine {
	t.Helper()
	cfg := DefaultConfig()
	cfg.SendQueue = queue
	f, err := New(cfg, newRecorder())
	if err != nil {
		t.Fatal(err)
	}
	e := f.newEngine(0, 0, nil, nil, true, nil)
	e.st.Store(int32(Ready))
	return e
}

// TestBurstQueuesBehindItself: one client's burst fills an engine's queue;
// it used to make every other submitter fail with "send queue full" (the
// engine declared stuck). Now the burst waits for room, and another client's
// ADD gets a slot as soon as one frees, ahead of the burst's next ones.
func TestBurstQueuesBehindItself(t *testing.T) {
	e := testEngine(t, 64)
	ctx := context.Background()
	const burst, other = 1, 2
	burstDone := make(chan error, 1)
	go func() {
		for range 1000 {
			if err := e.enqueue(ctx, burst, item(), true); err != nil {
				burstDone <- err
				return
			}
		}
		burstDone <- nil
	}()
	for e.sendq.queued() < 64 { // the burst filled the queue and waits
		time.Sleep(time.Millisecond)
	}
	otherDone := make(chan error, 1)
	go func() { otherDone <- e.enqueue(ctx, other, item(), true) }()
	for {
		e.sendq.mu.Lock()
		_, waiting := e.sendq.waiting[other]
		e.sendq.mu.Unlock()
		if waiting {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// The writer frees one slot at a time; the other client's ADD is queued
	// within the first share's worth of pops, not after the burst's 1,000.
	popped := 0
	for {
		select {
		case err := <-otherDone:
			if err != nil {
				t.Fatalf("the other client's ADD failed: %v", err)
			}
			if popped > 64 {
				t.Fatalf("the other client waited %d pops, behind the burst", popped)
			}
			for {
				got := e.sendq.popBatch(nil, 64)
				select {
				case err := <-burstDone:
					if err != nil {
						t.Fatalf("burst: %v", err)
					}
					return
				default:
				}
				if len(got) == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		default:
		}
		if len(e.sendq.popBatch(nil, 1)) == 1 {
			popped++
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestQueueWaitEnds: a waiting ADD ends with its context (*QueueFullError,
// not a stuck engine) or with the engine going down.
func TestQueueWaitEnds(t *testing.T) {
	e := testEngine(t, 1)
	if err := e.enqueue(context.Background(), 1, item(), true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	err := e.enqueue(ctx, 1, item(), true)
	var full *QueueFullError
	if !errors.As(err, &full) || errIs[*EngineStuckError](err) || errIs[*EngineDeadError](err) {
		t.Fatalf("wait past the context: %v", err)
	}
	var wg sync.WaitGroup
	var downErr error
	wg.Go(func() { downErr = e.enqueue(context.Background(), 2, item(), true) })
	for {
		e.sendq.mu.Lock()
		n := len(e.sendq.waiting)
		e.sendq.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	e.f.markDown(e, Dead, ErrEngineLeft)
	wg.Wait()
	if !errIs[*EngineDeadError](downErr) {
		t.Fatalf("wait across engine down: %v", downErr)
	}
	e.sendq.close()
}
