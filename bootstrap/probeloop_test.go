package bootstrap

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// TestProbeLoop runs the periodic prober on synctest's fake clock: a worker
// that stops answering is hidden after FailureThreshold intervals and
// forgotten after Retention.
func TestProbeLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig()
		cfg.ProbeInterval = 5 * time.Second
		cfg.Retention = time.Minute
		p := newFakeProber("10.0.0.1:5000")
		s, err := newServer(cfg, NewRegistry(cfg.Policy()), p, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		h := s.Handler()
		do(t, h, "POST", "/register", regBody("E", 0, 0, 0, "tcp://10.0.0.1:5000"))

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.probeLoop(ctx); close(done) }()
		synctest.Wait()
		if _, body := do(t, h, "GET", "/query", ""); body == `{}` {
			t.Fatal("live engine hidden")
		}

		p.set("10.0.0.1:5000", false)
		time.Sleep(2*cfg.ProbeInterval + time.Second) // two failed sweeps: suspect
		synctest.Wait()
		if _, body := do(t, h, "GET", "/query", ""); body == `{}` {
			t.Fatal("engine hidden before FailureThreshold sweeps")
		}
		time.Sleep(cfg.ProbeInterval) // third failure: dead
		synctest.Wait()
		if _, body := do(t, h, "GET", "/query", ""); body != `{}` {
			t.Fatalf("dead engine published: %s", body)
		}
		time.Sleep(cfg.Retention)
		synctest.Wait()
		if _, body := do(t, h, "GET", "/v2/engines", ""); body != `{"engines":[],"total":0}` {
			t.Fatalf("dead engine kept past retention: %s", body)
		}
		cancel()
		testwait.Recv(t, done, "the probe loop to end after cancel")
	})
}
