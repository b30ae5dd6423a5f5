package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// A pyzmq client against --client-token: without AUTH, and with a wrong
// token, its ADD is refused with Unauthenticated and starts nothing; with the
// token it is served.
func TestPythonClientToken(t *testing.T) {
	py := pytest.Find(t, "zmq", "msgpack")
	s := startServe(t, "--step-ms", "2", "--client-token", "tok-123")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/client_auth.py", s.client, "tok-123").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("client_auth.py: %v\n%s\n%s", err, out, stderr)
	}
	var r map[string]map[string]any
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("client_auth.py printed %s: %v", out, err)
	}
	for _, k := range []string{"anonymous", "wrong_auth", "wrong_add"} {
		if r[k]["type"] != "Unauthenticated" {
			t.Errorf("%s: %v, want an Unauthenticated error", k, r[k])
		}
	}
	if a := r["authenticated"]; a["tokens"] != 5.0 || a["finish"] != 1.0 {
		t.Errorf("authenticated: %v, want 5 tokens and LENGTH (1)", a)
	}
	// Only the authenticated request reached an engine.
	code, body := s.get(t, "/metrics")
	if code != 200 || !strings.Contains(string(body), "vllm:request_success_total") {
		t.Fatalf("/metrics: %d", code)
	}
	var started float64
	for _, e := range s.engines(t) {
		started += float64(e.InFlight)
	}
	if started != 0 {
		t.Errorf("%v requests still in flight", started)
	}
	if n := countSuccess(string(body)); n != 1 {
		t.Errorf("engines finished %v requests, want 1 (the authenticated one)", n)
	}
}

// countSuccess sums vllm:request_success_total over its label sets.
func countSuccess(metrics string) float64 {
	var n float64
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "vllm:request_success_total") {
			var v float64
			f := strings.Fields(l)
			if len(f) >= 2 && json.Unmarshal([]byte(f[len(f)-1]), &v) == nil {
				n += v
			}
		}
	}
	return n
}

// serve refuses to start with --api-key and a non-loopback --client-address
// but no --client-token, naming the flag; loopback or a token starts.
func TestServeRefusesOpenClientProtocol(t *testing.T) {
	out, err := testwait.Command(t, testwait.Deadline, binary, "serve", "--api-key", "k", "--admin-token", "a",
		"--http-address", "127.0.0.1:0", "--client-address", "tcp://0.0.0.0:0").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--client-token") || !strings.Contains(string(out), "not loopback") {
		t.Fatalf("serve with --api-key on tcp://0.0.0.0 without --client-token: %v\n%s", err, out)
	}
	s := startServe(t, "--api-key", "k", "--admin-token", "a", "--client-token", "t", "--client-address", "tcp://0.0.0.0:0")
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("serve with --client-token on tcp://0.0.0.0 exited %d", code)
	}
}
