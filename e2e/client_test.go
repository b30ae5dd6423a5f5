package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/pytest"
)

// A Python pyzmq client speaks the client protocol end to end.
func TestPythonClient(t *testing.T) {
	py := pytest.Find(t, "zmq", "msgpack")
	s := startServe(t, "--step-ms", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/client.py", s.client)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("client.py: %v\n%s\n%s", err, out, stderr)
	}
	var r struct {
		Tokens      map[string]int `json:"tokens"`
		Finish      map[string]int `json:"finish"`
		Rejected    map[string]any `json:"rejected"`
		Aborted     int            `json:"aborted"`
		Utility     map[string]any `json:"utility"`
		GoneStarted bool           `json:"gone_started"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client.py printed %s: %v", out, err)
	}
	if r.Tokens["py-1"] != 6 || r.Tokens["py-2"] != 3 || r.Finish["py-1"] != 1 || r.Finish["py-2"] != 1 {
		t.Errorf("tokens %v finish %v; want 6 and 3 tokens, both LENGTH (1)", r.Tokens, r.Finish)
	}
	if r.Rejected["type"] != "InvalidDataParallelRank" || r.Rejected["request_id"] != "py-bad" ||
		r.Rejected["message"] != "data parallel rank 7 is not connected to this frontend; connected ranks: [0, 1]" {
		t.Errorf("rejection %v", r.Rejected)
	}
	if ranks, _ := r.Rejected["connected_ranks"].([]any); len(ranks) != 2 {
		t.Errorf("connected_ranks %v", r.Rejected["connected_ranks"])
	}
	if r.Aborted != 2 {
		t.Errorf("aborted request finished with %d, want ABORT (2)", r.Aborted)
	}
	if r.Utility["call_id"] != 77.0 || r.Utility["failure"] != nil {
		t.Errorf("utility reply %v", r.Utility)
	}
	if !r.GoneStarted {
		t.Error("the disappearing client's request never started")
	}
	// The client that disappeared had its request aborted: nothing stays in flight.
	eventually(t, 10*time.Second, "the gone client's request aborted", func() bool {
		for _, e := range s.engines(t) {
			if e.InFlight != 0 {
				return false
			}
		}
		return true
	})
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}
