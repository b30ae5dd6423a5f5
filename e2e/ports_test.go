package e2e

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// serve on a port that is already taken (8000 is vLLM's default too) exits
// non-zero with an error naming the address, does not panic, and leaves no
// ipc directory behind.
func TestServePortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tmp := t.TempDir()
	cmd := exec.Command(binary, "serve", "--http-address", ln.Addr().String(), "--client-address", "tcp://127.0.0.1:0")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	done := make(chan struct{})
	var out []byte
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		testwait.Recv(t, done, "serve to be reaped after the kill")
		t.Fatal("serve did not exit on a taken port")
	}
	if err == nil || cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("exit code %d, want non-zero", cmd.ProcessState.ExitCode())
	}
	s := string(out)
	if strings.Contains(s, "panic") || strings.Contains(s, "SIGSEGV") {
		t.Errorf("serve panicked:\n%s", s)
	}
	if !strings.Contains(s, ln.Addr().String()) || !strings.Contains(s, "address already in use") {
		t.Errorf("the error does not name the taken address:\n%s", s)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left behind in TMPDIR: %v", ents)
	}
}
