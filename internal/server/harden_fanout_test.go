package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
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

// A streaming client that never reads: its write times out, the connection is
// closed and its slot is free again for the next request.
func TestWriteTimeoutFreesSlot(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.HTTPWriteTimeout = 300 * time.Millisecond
		c.MaxConcurrentRequests = 16
		c.MockTokensPerStep = 8
	})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		_ = rc.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024) })
		return err
	}}
	conn, err := d.Dial("tcp", s.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt": [1, 2, 3], "max_tokens": 8000, "n": 16, "stream": true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	pollUntil(t, "the never-read stream's write to time out", func() bool { return s.httpLn.(*connLimiter).stalled.Load() > 0 })
	api := "http://" + s.HTTPAddr()
	pollUntil(t, "a request taking every slot after the stall", func() bool {
		// All 16 slots: admitted only once the stalled request let go of its own.
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, api+"/v1/completions",
			strings.NewReader(`{"prompt": [1], "max_tokens": 2, "n": 16}`))
		resp, err := testwait.HTTPClient.Do(req)
		if err != nil {
			return false
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// A built-in engine declared stalled is replaced by a fresh one on its rank,
// which rejoins and serves.
func TestBuiltinEngineRestartsAfterStall(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.EngineStallTimeout = 300 * time.Millisecond
		c.mockTweak = func(gen int, mc *mockengine.Config) {
			mc.Faults.StallAfterSteps = 0
			if mc.Rank == 0 && gen == 0 {
				mc.Faults.StallAfterSteps = 5
			}
		}
	})
	api := "http://" + s.HTTPAddr()
	pinned := func() int {
		req, _ := http.NewRequest(http.MethodPost, api+"/v1/completions", strings.NewReader(`{"prompt": [1, 2, 3], "max_tokens": 20}`))
		req.Header.Set(RankHeader, "0")
		resp, err := testwait.HTTPClient.Do(req)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := pinned(); code != http.StatusServiceUnavailable {
		t.Errorf("request on the stalling engine: %d, want 503 (stalled)", code)
	}
	pollUntil(t, "rank 0 restarted and serving", func() bool { return pinned() == 200 })
	if st := s.rankState(0); st != "ready" {
		t.Errorf("rank 0 is %q", st)
	}
}

// pollUntil polls cond every 50 ms until it holds, for up to testwait.Deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testwait.Deadline); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", testwait.Deadline, what)
		}
	}
}
