package kvsub

// verdict is what a message's seq means for the rank's index.
type verdict uint8

const (
	// inOrder: the next message (or the first one seen); apply it.
	inOrder verdict = iota
	// gap: messages [want, seq) were lost (PUB drops past its high-water mark);
	// replay them before applying this one, or clear the index.
	gap
	// wentBack: the seq restarted (the engine restarted): the index is stale.
	wentBack
)

// tracker follows one rank's sequence numbers. It is a plain value, owned by the
// rank's goroutine, and does no IO.
type tracker struct {
	started bool
	next    uint64 // the seq expected next
	// skipBelow: after a catch-up replay, SUB messages below it were applied
	// already; the window closes at the first in-order message.
	skipBelow uint64
	// reconnected: the publisher's connection ended since the last message.
	reconnected bool
}

// caughtUp records that a replay applied everything before next.
func (t *tracker) caughtUp(next uint64) {
	t.started = true
	t.next, t.skipBelow = next, next
}

// duplicate reports whether seq was applied by a catch-up replay already.
func (t *tracker) duplicate(seq uint64) bool {
	if seq < t.skipBelow {
		return true
	}
	t.skipBelow = 0
	return false
}

// observe classifies seq and moves the expectation past it. For a gap, want is the
// first missing seq.
func (t *tracker) observe(seq uint64) (v verdict, want uint64) {
	switch {
	case !t.started:
		t.started = true
		v = inOrder
	case seq == t.next:
		v = inOrder
	case seq > t.next:
		v, want = gap, t.next
	default:
		v = wentBack
	}
	t.next = seq + 1
	return v, want
}

// last is the seq of the last message observed, -1 before any.
func (t *tracker) last() int64 {
	if !t.started {
		return -1
	}
	return int64(t.next - 1)
}
