package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// smokeConfig is a run of a fraction of a second: enough for every code path, no
// timing assertions (2 shared cores make timings noise).
func smokeConfig(transport string) Config {
	c := DefaultConfig()
	c.Engines = 2
	c.Transport = transport
	c.Rate = 400
	c.Duration = 300 * time.Millisecond
	c.Warmup = 100 * time.Millisecond
	c.OutputTokens = 4
	c.TokensPerStep = 2
	c.StepTime = time.Millisecond
	return c
}

func forEachTransport(t *testing.T, body func(t *testing.T, transport string)) {
	for _, tr := range []string{"ipc", "tcp"} {
		t.Run(tr, func(t *testing.T) { body(t, tr) })
	}
}

func TestRelayPhaseSmoke(t *testing.T) { phaseSmoke(t, "relay", startRelaySystem) }

// The embedded switchyard phase, as the default run measures it: a switchyard
// server on the bench engines, driven over the client protocol.
func TestSwitchyardPhaseSmoke(t *testing.T) { phaseSmoke(t, "switchyard", startSystem) }

// phaseSmoke runs one short phase of the system start makes, over ipc and tcp: it
// serves every request on both ranks, times every request's dispatch and return,
// and measures its CPU and allocations.
func phaseSmoke(t *testing.T, name string, start func(context.Context, Config) (system, error)) {
	forEachTransport(t, func(t *testing.T, tr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg := smokeConfig(tr)
		p, err := runPhase(ctx, cfg, Options{}, func(ctx context.Context) (system, error) { return start(ctx, cfg) })
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != name || p.Requests == 0 || p.Failed != 0 || p.Unmatched != 0 {
			t.Fatalf("%s: requests %d failed %d unmatched %d, want %s: some, none, none", p.Name, p.Requests, p.Failed, p.Unmatched, name)
		}
		if p.Dispatch.Count != p.Requests || p.Return.Count != p.Requests || p.ITL.Count == 0 {
			t.Errorf("dispatch %d, return %d, itl %d samples for %d requests", p.Dispatch.Count, p.Return.Count, p.ITL.Count, p.Requests)
		}
		var sum int64
		for _, n := range p.PerRank {
			if n == 0 {
				t.Errorf("a rank served nothing: %v", p.PerRank)
			}
			sum += n
		}
		if sum != p.Requests || len(p.PerRank) != 2 {
			t.Errorf("per-rank %v does not add up to %d", p.PerRank, p.Requests)
		}
		if p.AllocsPerRequest <= 0 || p.CPUSecondsPer1kRequests <= 0 {
			t.Errorf("allocs/request %.1f, CPU s/1k %.3f: want both measured", p.AllocsPerRequest, p.CPUSecondsPer1kRequests)
		}
		t.Logf("%s over %s: %d req, dispatch p50 %.0f µs, return p50 %.0f µs", name, tr, p.Requests, p.Dispatch.P50US, p.Return.P50US)
	})
}

// --relay-work holds the relay for its busy time on every message, each way: a
// request's dispatch and return each take at least that long.
func TestRelayWork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := smokeConfig("ipc")
	cfg.RelayWork = 2 * time.Millisecond
	p, err := runPhase(ctx, cfg, Options{}, func(ctx context.Context) (system, error) { return startRelaySystem(ctx, cfg) })
	if err != nil {
		t.Fatal(err)
	}
	if p.Requests == 0 || p.Failed != 0 {
		t.Fatalf("requests %d failed %d", p.Requests, p.Failed)
	}
	if p.Dispatch.P50US < 2000 || p.Return.P50US < 2000 {
		t.Errorf("dispatch p50 %.0f µs, return p50 %.0f µs: want each >= the relay's 2 ms of work", p.Dispatch.P50US, p.Return.P50US)
	}
}

func TestClosedLoopSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := smokeConfig("ipc")
	cfg.Rate, cfg.Concurrency = 0, 8
	cfg.Requests, cfg.Warmup = 50, 0
	p, err := runPhase(ctx, cfg, Options{}, func(ctx context.Context) (system, error) { return startRelaySystem(ctx, cfg) })
	if err != nil {
		t.Fatal(err)
	}
	if p.Requests != 50 {
		t.Errorf("measured %d requests, want exactly 50", p.Requests)
	}
}

// --baseline-vs-baseline measures the relay twice: the second relay stands in for
// switchyard under its own name, and the ratio is computed as usual.
func TestBaselineVsBaseline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := smokeConfig("ipc")
	cfg.BaselineVsBaseline = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := runOnce(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Baseline == nil || r.Switchyard == nil || r.Baseline.Name != "relay" || r.Switchyard.Name != "relay-2" {
		t.Fatalf("phases %+v and %+v, want relay and relay-2", r.Baseline, r.Switchyard)
	}
	if r.Switchyard.Requests == 0 || r.Switchyard.Failed != 0 || r.OverheadRatio == nil {
		t.Fatalf("relay-2: requests %d failed %d ratio %v", r.Switchyard.Requests, r.Switchyard.Failed, r.OverheadRatio)
	}
	var out strings.Builder
	if err := PrintTable(&out, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "A/A calibration") || !strings.Contains(out.String(), "relay-2 p50") {
		t.Errorf("table does not say it is an A/A run:\n%s", out.String())
	}
	for _, bad := range []func(*Config){
		func(c *Config) { c.RelayWork = time.Microsecond },
		func(c *Config) { c.Baseline = false },
		func(c *Config) { c.Inflight = 10 },
	} {
		c := cfg
		bad(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("Validate accepted %+v", c)
		}
	}
}
