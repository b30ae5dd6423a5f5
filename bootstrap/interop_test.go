package bootstrap

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPythonMooncakeClient runs testdata/mooncake_client.py, which makes
// exactly the calls of vLLM's Mooncake connector (register with retries,
// query, int() keys, TP size from len(worker_addr)), against the handler
// with the real TCP prober.
func TestPythonMooncakeClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found; install it (and python3-requests) to run the vLLM interop test")
	}
	if out, err := exec.Command(py, "-c", "import requests").CombinedOutput(); err != nil {
		t.Skipf("python3 cannot import requests (apt-get install python3-requests): %v: %s", err, out)
	}
	cfg := testConfig()
	s, err := newServer(cfg, NewRegistry(cfg.Policy()), TCPProber{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	defer ts.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "testdata/mooncake_client.py", ts.URL+"/").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "OK") {
		t.Fatalf("python client: %v\n%s", err, out)
	}
}
