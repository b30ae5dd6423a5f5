package frontend

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
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
// ADD gets the next free slot, ahead of the burst's next ones. Run in a
// synctest bubble: synctest.Wait returns once every submitter is blocked.
func TestBurstQueuesBehindItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
		synctest.Wait() // the burst filled the queue and waits
		if n := e.sendq.queued(); n != 64 {
			t.Fatalf("%d queued, want 64", n)
		}
		otherDone := make(chan error, 1)
		go func() { otherDone <- e.enqueue(ctx, other, item(), true) }()
		synctest.Wait() // both wait
		// The writer frees one slot: it goes to the other client, not to the
		// burst, which is over its share (64/2) while the other waits.
		if got := e.sendq.popBatch(nil, 1); len(got) != 1 {
			t.Fatal("nothing to pop")
		}
		synctest.Wait()
		select {
		case err := <-otherDone:
			if err != nil {
				t.Fatalf("the other client's ADD failed: %v", err)
			}
		default:
			t.Fatal("the other client's ADD still waits after a slot freed")
		}
		// The burst goes on as the writer drains, and nothing of it fails.
		for {
			e.sendq.popBatch(nil, 64)
			synctest.Wait()
			select {
			case err := <-burstDone:
				if err != nil {
					t.Fatalf("burst: %v", err)
				}
				e.sendq.close()
				return
			default:
			}
		}
	})
}

// TestQueueWaitEnds: a waiting ADD ends with its context or SendWait
// (*QueueFullError, not a stuck engine), or with the engine going down.
func TestQueueWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := testEngine(t, 1)
		if err := e.enqueue(context.Background(), 1, item(), true); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		err := e.enqueue(ctx, 1, item(), true)
		var full *QueueFullError
		if !errors.As(err, &full) || !errors.Is(err, context.DeadlineExceeded) || errIs[*EngineStuckError](err) || errIs[*EngineDeadError](err) {
			t.Fatalf("wait past the context: %v", err)
		}
		start := time.Now()
		err = e.enqueue(context.Background(), 1, item(), true)
		if !errors.As(err, &full) || !errors.Is(err, ErrSendWait) || time.Since(start) != e.f.cfg.SendWait {
			t.Fatalf("wait past SendWait: %v after %v", err, time.Since(start))
		}
		var downErr error
		done := make(chan struct{})
		go func() { downErr = e.enqueue(context.Background(), 2, item(), true); close(done) }()
		synctest.Wait()
		e.f.markDown(e, Dead, ErrEngineLeft)
		testwait.Closed(t, done, "the waiting ADD to end")
		if !errIs[*EngineDeadError](downErr) {
			t.Fatalf("wait across engine down: %v", downErr)
		}
		e.sendq.close()
	})
}
