package httpapi

import (
	"io"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// Slots count choices; a client's fan-outs keep to its share (the limit over
// the clients holding slots plus one) except its first; single choices take
// whatever is free.
func TestSlotsCountChoices(t *testing.T) {
	s := newSlots(8)
	const a, b, c = 1, 2, 3
	if !s.take(a, 4, 4) {
		t.Fatal("a's first fan-out of 4 refused with 8 free")
	}
	if s.take(a, 4, 4) {
		t.Error("a's second fan-out admitted over its share of 8/2")
	}
	if !s.take(b, 2, 2) {
		t.Error("b's first fan-out refused with 4 free")
	}
	for range 2 {
		if !s.take(c, 1, 1) {
			t.Error("a single choice refused with slots free")
		}
	}
	if s.take(c, 1, 1) || s.inUse() != 8 {
		t.Errorf("admitted past the limit: %d in use", s.inUse())
	}
	s.put(a, 4, 4)
	s.put(b, 2, 2)
	s.put(c, 1, 1)
	s.put(c, 1, 1)
	if s.inUse() != 0 || len(s.by) != 0 {
		t.Errorf("after release: %d in use, %d clients", s.inUse(), len(s.by))
	}
}

// --max-concurrent-requests weighs a request by its choices: n above the whole
// limit is a 400, a fan-out that does not fit is a 503, one choice still fits.
func TestMaxConcurrentRequestsCountsChoices(t *testing.T) {
	f, ts := newLimitedAPI(t, APIConfig{MaxConcurrentRequests: 4})
	resp, body := post(t, ts, `{"prompt": [1], "n": 5}`)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "--max-concurrent-requests 4") {
		t.Errorf("n=5 over a limit of 4: %d %s", resp.StatusCode, body)
	}
	f.Hold.Store(true)
	first := make(chan int, 1)
	go func() {
		resp, err := testwait.HTTPClient.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [1], "max_tokens": 5, "n": 3}`))
		if err != nil {
			first <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	for range 3 {
		testwait.Recv(t, f.Adds, "the held fan-out's ADDs")
	}
	if resp, body := post(t, ts, `{"prompt": [1], "n": 2}`); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("n=2 with 1 of 4 slots free: %d %s", resp.StatusCode, body)
	}
	f.Hold.Store(false)
	if resp, body := post(t, ts, `{"prompt": [1], "max_tokens": 2}`); resp.StatusCode != 200 {
		t.Errorf("one choice with 1 of 4 slots free: %d %s", resp.StatusCode, body)
	}
	f.D.Close() // ends the held request
	testwait.Recv(t, first, "the held fan-out's answer")
}
