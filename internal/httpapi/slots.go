package httpapi

// --max-concurrent-requests counts choices, not HTTP requests: a request with
// n=k (times its prompts) becomes k engine requests, each holding a stream and
// a place in an engine's batch, so it takes k slots. Counting requests let 100
// requests with n=128 from one client put 12,800 requests on the engines while
// another client's 5-token completion waited seconds behind them.
//
// A request takes one slot while its body is read and the rest once its
// choices are known. One that weighs more than the whole limit can never be
// served and is a 400. A fan-out (k > 1) also keeps to its client's fair
// share, the limit divided by the clients holding slots plus one, so a client
// that comes next always finds room; a client's first fan-out is exempt (it
// could otherwise never run when k is above its share). Single-choice requests
// are admitted while any slot is free, as before. The client is the remote
// host, as for the engine queues' fair share (busy.go).

import (
	"fmt"
	"net/http"
	"sync"
)

// slots counts the choices (engine requests) being served, in all and per
// client, against --max-concurrent-requests.
type slots struct {
	max int64

	mu   sync.Mutex
	used int64
	by   map[uint64]int64 // fan-out choices held per client key
}

func newSlots(max int) *slots {
	return &slots{max: int64(max), by: make(map[uint64]int64)}
}

// inUse is the number of slots taken.
func (s *slots) inUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// take reserves n slots for a request of k choices of client, if they are
// free and, for a fan-out, within the client's share.
func (s *slots) take(client uint64, n, k int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used+n > s.max {
		return false
	}
	if k > 1 {
		holders := int64(len(s.by))
		if _, ok := s.by[client]; !ok {
			holders++
		}
		if held := s.by[client]; held > 0 && held+k > s.max/(holders+1) {
			return false
		}
		s.by[client] += k
	}
	s.used += n
	return true
}

// put frees what take reserved.
func (s *slots) put(client uint64, n, k int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used -= n
	if k > 1 {
		if s.by[client] -= k; s.by[client] <= 0 {
			delete(s.by, client)
		}
	}
}

// admitChoices takes the slots of a request of k choices from client that
// holds held slots already, all or none; release frees them. It answers the
// refusal itself.
func (a *API) admitChoices(w http.ResponseWriter, client uint64, k, held int) (release func(), ok bool) {
	if a.slots == nil || k <= held {
		return func() {}, true
	}
	if int64(k) > a.slots.max {
		writeError(w, badRequest("n", "n times the number of prompts is %d, more than --max-concurrent-requests %d (each choice is one engine request)", k, a.slots.max))
		return nil, false
	}
	n, kk := int64(k-held), int64(k)
	if !a.slots.take(client, n, kk) {
		w.Header().Set("Retry-After", "1")
		msg := fmt.Sprintf("too many concurrent requests (--max-concurrent-requests %d); retry later", a.slots.max)
		if k > 1 {
			msg = fmt.Sprintf("too many concurrent choices (--max-concurrent-requests %d counts choices, this request has %d, "+
				"and one client's fan-outs leave room for others); retry later", a.slots.max, k)
		}
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Message: msg})
		return nil, false
	}
	return func() { a.slots.put(client, n, kk) }, true
}
