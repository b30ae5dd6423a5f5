package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// --help names every flag of serve with its environment variable.
func TestServeHelp(t *testing.T) {
	out, err := testwait.Command(t, testwait.Deadline, binary, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--handshake-address", "--data-parallel-size", "--mock-engines", "--http-address", "--client-address",
		"--bootstrap-address", "--lb-policy", "--shutdown-timeout", "--enable-wave-coordination",
		"--step-ms", "--tokens-per-step", "--eos-token-id", "--coordinator-publish-address", "--log-format",
		"--input-address", "--output-address", "--data-parallel-start-rank", "--data-parallel-size-local",
		"--external-coordinator-address", "--vocab-size", "--max-logprobs", "--allow-utility-method",
		"--api-key", "--max-body-bytes", "--http-header-timeout", "--http-body-timeout", "--http-idle-timeout",
		"--max-connections", "--max-concurrent-requests", "--client-max-frame-bytes", "--client-max-message-bytes", "--client-max-connections",
		"SWITCHYARD_API_KEY", "VLLM_API_KEY",
		"SWITCHYARD_HTTP_ADDRESS", "SWITCHYARD_HANDSHAKE_ADDRESS", "SWITCHYARD_LOG_FORMAT", "SWITCHYARD_EOS_TOKEN_ID",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("serve --help does not mention %s", want)
		}
	}
	out, _ = testwait.Command(t, testwait.Deadline, binary, "serve", "--lb-policy", "nope").CombinedOutput()
	if !strings.Contains(string(out), "--lb-policy") {
		t.Errorf("a bad --lb-policy is not named: %s", out)
	}
}

// Deployments configure serve through SWITCHYARD_* variables.
func TestServeFromEnvironment(t *testing.T) {
	p := startEnv(t, "serve", []string{
		"SWITCHYARD_HTTP_ADDRESS=127.0.0.1:0", "SWITCHYARD_CLIENT_ADDRESS=tcp://127.0.0.1:0",
		"SWITCHYARD_MOCK_ENGINES=1", "SWITCHYARD_LB_POLICY=round-robin",
	}, "serve")
	line := p.waitLog("serving", serveStartWait)
	if line["engines"] != 1.0 || line["lb_policy"] != "round-robin" {
		t.Errorf("serving with %v engines, policy %v; want 1, round-robin", line["engines"], line["lb_policy"])
	}
	if code := p.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// `switchyard registry` runs the bootstrap registry alone.
func TestRegistryAlone(t *testing.T) {
	p := start(t, "registry", "registry", "--address", "127.0.0.1:0")
	addr := p.waitLog("bootstrap registry serving", 10*time.Second)["address"].(string)
	resp, err := httpc.Get("http://" + addr + "/query")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/query: %v %v", err, resp)
	}
	resp.Body.Close()
	if code := p.stop(syscall.SIGTERM, 10*time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// A mock engine pointed at serve's msgpack client port (the mistake the old equal
// defaults invited) fails at once and says which address it should have used.
func TestMockEngineAtClientPort(t *testing.T) {
	s := startServe(t, "--mock-engines", "1")
	if s.client == "" {
		t.Fatal("serve logged no client address")
	}
	cmd := exec.Command(binary, "mock-engine", "--handshake-address", s.client)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		testwait.Recv(t, done, "mock-engine to be reaped after the kill")
		t.Fatalf("mock-engine at the client port did not exit: %s", out)
	}
	if err == nil {
		t.Fatalf("mock-engine at the client port succeeded: %s", out)
	}
	if !strings.Contains(string(out), "msgpack client port") || !strings.Contains(string(out), "--handshake-address") {
		t.Errorf("the failure does not say what is wrong: %s", out)
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("serve exit code %d", code)
	}
}

// mock-engine's default handshake address is not serve's default client address.
func TestMockEngineDefaultAddress(t *testing.T) {
	out, _ := testwait.Command(t, testwait.Deadline, binary, "mock-engine", "--help").CombinedOutput()
	if !strings.Contains(string(out), "tcp://127.0.0.1:29550") {
		t.Errorf("mock-engine --help does not show the default handshake address tcp://127.0.0.1:29550:\n%s", out)
	}
}

// A bench run whose stderr is a log file writes no progress-bar frames into it.
func TestBenchLogHasNoProgressFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a short benchmark")
	}
	log, err := os.Create(filepath.Join(t.TempDir(), "bench.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := testwait.Command(t, time.Minute, binary, "bench", "--duration", "300ms", "--warmup", "0", "--rate", "200",
		"--engines", "1", "--no-baseline")
	cmd.Stderr = log
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	b, err := os.ReadFile(log.Name())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "\r") {
		t.Errorf("the redirected log has \\r frames:\n%q", b)
	}
	// One run judges nothing; --repeat 2 does.
	if strings.Contains(string(out), "met  ") || strings.Contains(string(out), "MISSED") {
		t.Errorf("a single run is judged:\n%s", out)
	}
	out, err = testwait.Command(t, time.Minute, binary, "bench", "--duration", "200ms", "--warmup", "0", "--rate", "200",
		"--engines", "1", "--repeat", "2").Output()
	if err != nil || !strings.Contains(string(out), "2 runs: the figures below are the last run's") {
		t.Errorf("bench --repeat 2: %v\n%s", err, out)
	}
}
