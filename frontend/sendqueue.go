package frontend

import (
	"sync"

	"github.com/switchyard-llm/switchyard/wire"
)

// sendQueue is one engine's bounded queue of outgoing messages, shared fairly
// between the clients that submit to it. A full queue is backpressure, not a
// stuck engine: a submitter of an ADD waits for room (bounded by its context
// and Config.SendWait) instead of failing. While several clients wait, each
// may hold at most its fair share of the queue (capacity / clients with
// messages queued, waiting included), so one client's burst queues behind
// itself and another client's request gets the next free slot.
//
// ABORT, UTILITY and START_DP_WAVE messages never wait (the aborter and the
// control paths must not block) and may use a reserve above the capacity;
// when even that is full the engine is not draining at all.
//
// It has no goroutines and reads no clock; the engine's writer pops from it.
type sendQueue struct {
	mu       sync.Mutex
	items    []sendItem // FIFO; items[head:] are queued
	head     int
	cap      int // ADDs beyond this wait
	reserve  int // extra room for messages that never wait
	clients  map[uint64]int
	waiting  map[uint64]int // clients blocked in push, for the share
	room     chan struct{}  // closed and replaced when room may have appeared
	ready    chan struct{}  // capacity 1: wakes the writer
	closed   bool
	pressure int64 // pushes that had to wait, for metrics and tests
}

func newSendQueue(capacity int) *sendQueue {
	return &sendQueue{
		items:   make([]sendItem, 0, capacity),
		cap:     capacity,
		reserve: max(capacity/16, 16),
		clients: make(map[uint64]int),
		waiting: make(map[uint64]int),
		room:    make(chan struct{}),
		ready:   make(chan struct{}, 1),
	}
}

// queued is the number of messages queued.
func (q *sendQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}

// tryPush queues it for client if there is room and the client is within its
// share. It returns (ok, room): room is the channel to wait on when !ok, nil
// when the queue is closed.
func (q *sendQueue) tryPush(client uint64, it sendItem, wait bool) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false, nil
	}
	n := len(q.items) - q.head
	if !wait {
		if n >= q.cap+q.reserve {
			return false, q.room
		}
		q.appendLocked(0, it, false)
		return true, nil
	}
	if n >= q.cap || q.clients[client] >= q.shareLocked(client) {
		return false, q.room
	}
	q.appendLocked(client, it, true)
	return true, nil
}

// shareLocked is how many messages one client may have queued: the
// capacity split between the clients with messages queued or waiting.
func (q *sendQueue) shareLocked(client uint64) int {
	others := len(q.clients)
	if _, ok := q.clients[client]; ok {
		others--
	}
	for c := range q.waiting {
		if _, ok := q.clients[c]; !ok && c != client {
			others++
		}
	}
	return max(q.cap/(others+1), 1)
}

func (q *sendQueue) appendLocked(client uint64, it sendItem, counted bool) {
	it.client, it.counted = client, counted
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Reuse the consumed front instead of growing.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, it)
	if counted {
		q.clients[client]++
	}
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// setWaiting records that client waits (delta +1) or stopped waiting (-1).
func (q *sendQueue) setWaiting(client uint64, delta int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if delta > 0 {
		q.pressure++
	}
	if q.waiting[client] += delta; q.waiting[client] <= 0 {
		delete(q.waiting, client)
	}
}

// popBatch moves up to n queued messages to dst and wakes the waiters.
func (q *sendQueue) popBatch(dst []sendItem, n int) []sendItem {
	q.mu.Lock()
	defer q.mu.Unlock()
	end := min(q.head+n, len(q.items))
	for _, it := range q.items[q.head:end] {
		if it.counted {
			if q.clients[it.client]--; q.clients[it.client] <= 0 {
				delete(q.clients, it.client)
			}
		}
		dst = append(dst, it)
	}
	clear(q.items[q.head:end])
	q.head = end
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	if len(dst) > 0 {
		close(q.room)
		q.room = make(chan struct{})
	}
	return dst
}

// close refuses further pushes, wakes every waiter and returns the queued
// messages' buffers to the pool.
func (q *sendQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	for _, it := range q.items[q.head:] {
		wire.PutBuffer(it.body)
	}
	clear(q.items)
	q.items, q.head = nil, 0
	clear(q.clients)
	close(q.room)
}
