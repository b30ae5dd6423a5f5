package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/etcdtest"
)

// SIGTERM while etcd is gone: a scale-out frontend whose etcd was killed
// (connections refused) or paused with SIGSTOP (connections open, nothing
// answers) still exits 0 within --shutdown-timeout and a few seconds. The
// outage lasts past the lease TTL, so the frontend has lost its session and
// is asking etcd for a new one when the signal comes.
func TestShutdownDuringEtcdOutage(t *testing.T) {
	for _, how := range []string{"killed", "paused"} {
		t.Run(how, func(t *testing.T) {
			etcd := etcdtest.Start(t, 1)
			const shutdownTimeout = time.Second
			s := startServe(t,
				"--etcd-endpoints", etcd.Endpoints()[0], "--etcd-prefix", "/outage/", "--frontend-name", "fe0",
				"--etcd-lease-ttl", "1", "--handshake-address", "tcp://"+freeLoopback(t),
				"--input-address", "tcp://"+freeLoopback(t), "--output-address", "tcp://"+freeLoopback(t),
				"--shutdown-timeout", shutdownTimeout.String())
			s.waitLog("cluster: elected leader: owning the engine handshake and the DP coordinator", 30*time.Second)
			if how == "killed" {
				etcd.Kill(0)
			} else {
				etcd.Pause(0)
				defer etcd.Resume(0)
			}
			// Past the TTL: the session is gone and the member retries it.
			s.waitLog("cluster: no longer leader", 30*time.Second)
			time.Sleep(2 * time.Second)
			began := time.Now()
			// The exit bound: the drain's own timeout, the lease revoke and
			// the resignation (each bounded), and the process's teardown.
			const bound = shutdownTimeout + 8*time.Second
			if code := s.stop(syscall.SIGTERM, bound); code != 0 {
				t.Errorf("exit code %d after SIGTERM with etcd %s, want 0", code, how)
			}
			t.Logf("etcd %s: serve exited %v after SIGTERM (bound %v)", how, time.Since(began).Round(time.Millisecond), bound)
		})
	}
}

// A second serve with a live frontend's --frontend-name (its own addresses,
// as on another host) fails to start, naming the holder; the first keeps
// serving.
func TestScaleOutFrontendNameHeld(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	args := func() []string {
		return []string{"--etcd-endpoints", etcd.Endpoints()[0], "--etcd-prefix", "/names/", "--frontend-name", "fe0",
			"--handshake-address", "tcp://127.0.0.1:29999",
			"--input-address", "tcp://" + freeLoopback(t), "--output-address", "tcp://" + freeLoopback(t)}
	}
	first := startServe(t, args()...)
	second := start(t, "second serve", append([]string{"serve", "--http-address", "127.0.0.1:0", "--client-address", "tcp://127.0.0.1:0"}, args()...)...)
	select {
	case <-second.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the second frontend named fe0 did not stop")
	}
	if second.cmd.ProcessState.ExitCode() == 0 || !strings.Contains(second.log(), `frontend name "fe0" is held by a live frontend`) {
		t.Errorf("second frontend: exit %d, log:\n%s", second.cmd.ProcessState.ExitCode(), second.log())
	}
	if code, _ := first.get(t, "/health"); code != 200 && code != 503 {
		t.Errorf("the first frontend's /health: %d", code)
	}
}
