package bootstrap

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/pytest"
)

// TestPythonMooncakeClient runs testdata/mooncake_client.py, which makes
// exactly the calls of vLLM's Mooncake connector (register with retries,
// query, int() keys, TP size from len(worker_addr)), against the handler
// with the real TCP prober.
func TestPythonMooncakeClient(t *testing.T) {
	py := pytest.Find(t, "requests")
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
