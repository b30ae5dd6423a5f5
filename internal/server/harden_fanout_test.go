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

	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

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
	pollUntil(t, "the never-read stream's write to time out", func() bool { return s.http.StalledWrites() > 0 })
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
		req.Header.Set(httpapi.RankHeader, "0")
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
