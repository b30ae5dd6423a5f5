package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// A second SIGTERM during a graceful shutdown that would wait for a long request
// exits at once, with the status a death by SIGTERM gives (143), and says so.
func TestSecondSIGTERMForcesExit(t *testing.T) {
	s := startServe(t, "--step-ms", "5", "--shutdown-timeout", "120s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		// 8000 steps of 5 ms: 40 s, far past the few seconds the test allows.
		_, _, _ = s.post(ctx, `{"prompt": [1, 2], "max_tokens": 8000, "stream": true}`)
	}()
	eventually(t, 10*time.Second, "the long request in flight", func() bool {
		var inflight int64
		for _, e := range s.engines(t) {
			inflight += e.InFlight
		}
		return inflight == 1
	})
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.waitLog("shutting down", 5*time.Second)
	select {
	case <-s.done:
		t.Fatal("serve exited on the first SIGTERM with a request in flight and a 120 s --shutdown-timeout")
	case <-time.After(500 * time.Millisecond):
	}
	start := time.Now()
	code := s.stop(syscall.SIGTERM, 5*time.Second)
	took := time.Since(start)
	if code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit status %d after the second SIGTERM, want %d", code, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(s.log(), "forced shutdown") {
		t.Errorf("the forced exit is not logged:\n%s", s.log())
	}
	cancel()
	testwait.Closed(t, answered, "the long request's client to return")
	t.Logf("second SIGTERM: exited in %v with status %d", took.Round(time.Millisecond), code)
}
