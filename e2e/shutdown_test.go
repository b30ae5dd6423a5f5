package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// SIGTERM under load: short requests finish, long ones are aborted with a reason
// once --shutdown-timeout passes, every request gets an answer, and the process
// exits 0.
func TestSIGTERMDuringLoad(t *testing.T) {
	s := startServe(t, "--step-ms", "2", "--shutdown-timeout", "1s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type result struct {
		long, stream bool
		code         int
		body         []byte
		err          error
	}
	const n = 16
	results := make(chan result, n)
	for i := range n {
		long, stream := i%2 == 0, i%4 < 2
		// Short: ~200 steps of 2 ms, well inside the timeout. Long: never ends alone.
		body := `{"prompt": [1, 2], "max_tokens": 200`
		if long {
			body = `{"prompt": [1, 2], "max_tokens": 8000` // 16 s at 2 ms a step; the context is 8192
		}
		if stream {
			body += `, "stream": true`
		}
		body += `}`
		go func() {
			resp, b, err := s.post(ctx, body)
			r := result{long: long, stream: stream, body: b, err: err}
			if resp != nil {
				r.code = resp.StatusCode
			}
			results <- r
		}()
	}
	eventually(t, 10*time.Second, "every request in flight", func() bool {
		var inflight int64
		for _, e := range s.engines(t) {
			inflight += e.InFlight
		}
		return inflight == n
	})
	_ = s.cmd.Process.Signal(syscall.SIGTERM)

	for range n {
		r := testwait.Recv(t, results, "an answer to a request in flight at SIGTERM")
		switch {
		case r.err != nil:
			t.Errorf("request (long=%v stream=%v) got no answer: %v", r.long, r.stream, r.err)
		case !r.long && r.stream:
			f := foldStream(t, r.body)
			if r.code != 200 || len(f.tokens[0]) != 200 || f.finish[0] != "length" || !f.done {
				t.Errorf("short stream: %d %+v", r.code, f)
			}
		case !r.long:
			var c completion
			if r.code != 200 || json.Unmarshal(r.body, &c) != nil || len(c.Choices[0].TokenIDs) != 200 {
				t.Errorf("short request: %d %s", r.code, r.body)
			}
		case r.stream:
			f := foldStream(t, r.body)
			if r.code != 200 || f.finish[0] != "abort" || len(f.errors) != 1 || !strings.Contains(f.errors[0], "shutting down") || !f.done {
				t.Errorf("long stream: %d finish %q errors %q done %v", r.code, f.finish[0], f.errors, f.done)
			}
		default:
			if r.code != 503 || !strings.Contains(string(r.body), "shutting down") {
				t.Errorf("long request: %d %s", r.code, r.body)
			}
		}
	}
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if code := s.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0", code)
	}
	s.waitLog("shutdown timeout reached; aborting in-flight requests", time.Second)
	s.waitLog("stopped", time.Second)
}
