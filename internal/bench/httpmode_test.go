package bench

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// TestHTTPComparisonSmoke runs the four phases of --http in this process (no server
// command): every request answered by the floor and by switchyard, in JSON and SSE,
// with engine-side figures joined and the ratios filled. No timing assertions.
func TestHTTPComparisonSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := smokeConfig("ipc")
	cfg.HTTP = true
	cfg.Rate, cfg.Concurrency = 0, 4
	cfg.Requests, cfg.Warmup = 40, 0
	cfg.OutputTokens, cfg.TokensPerStep = 6, 1
	rep, err := runHTTP(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*HTTPMode{rep.JSON, rep.SSE} {
		for _, p := range []*Phase{m.Floor, m.Switchyard} {
			if p.Requests < 40 || p.Failed != 0 || p.Unmatched != 0 {
				t.Errorf("%s: requests %d failed %d unmatched %d, want >= 40, none, none", p.Name, p.Requests, p.Failed, p.Unmatched)
			}
			if p.Overhead.Count == 0 || p.CPUSecondsPer1kRequests <= 0 || p.AllocsPerRequest <= 0 {
				t.Errorf("%s: overhead samples %d, cpu %v, allocs %v", p.Name, p.Overhead.Count, p.CPUSecondsPer1kRequests, p.AllocsPerRequest)
			}
			if want := float64(cfg.OutputTokens) * p.RequestsPerS; p.OutputTokensPerS < want*0.99 {
				t.Errorf("%s: %v output tokens/s for %v requests/s of %d tokens", p.Name, p.OutputTokensPerS, p.RequestsPerS, cfg.OutputTokens)
			}
		}
		if m.CPURatio <= 0 || m.OverheadRatio == nil {
			t.Errorf("ratios missing: %+v", m)
		}
	}
	if rep.CPURatio <= 0 || rep.OverheadRatio == nil || rep.ServerProcess {
		t.Errorf("report: %+v", rep)
	}
	r := &Report{Config: cfg, HTTP: rep}
	if r.Targets = checkTargets(r); len(r.Targets) != 6 {
		t.Errorf("%d HTTP targets, want 6 (CPU, p50, p99 for JSON and SSE)", len(r.Targets))
	}
	var b strings.Builder
	if err := PrintTable(&b, r); err != nil || !strings.Contains(b.String(), "HTTP SSE  switchyard / floor: CPU per request") ||
		!strings.Contains(b.String(), "floor json") {
		t.Errorf("table (%v):\n%s", err, b.String())
	}
}

// --baseline-vs-baseline with --http measures the floor twice: the second floor
// stands in for switchyard under its own name, in both answer shapes.
func TestHTTPBaselineVsBaseline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cfg := smokeConfig("ipc")
	cfg.HTTP, cfg.BaselineVsBaseline = true, true
	cfg.Rate, cfg.Concurrency = 0, 4
	cfg.Requests, cfg.Warmup = 20, 0
	cfg.OutputTokens, cfg.TokensPerStep = 4, 1
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rep, err := runHTTP(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for shape, m := range map[string]*HTTPMode{"json": rep.JSON, "sse": rep.SSE} {
		if m.Floor.Name != "floor "+shape || m.Switchyard.Name != "floor-2 "+shape {
			t.Errorf("phases %q and %q, want floor and floor-2 %s", m.Floor.Name, m.Switchyard.Name, shape)
		}
		if m.Switchyard.Requests < 20 || m.Switchyard.Failed != 0 || m.CPURatio <= 0 || m.OverheadRatio == nil {
			t.Errorf("%s: floor-2 requests %d failed %d, ratios %+v", shape, m.Switchyard.Requests, m.Switchyard.Failed, m)
		}
	}
	var out strings.Builder
	if err := PrintTable(&out, &Report{Config: cfg, HTTP: rep}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "HTTP floor (floor-2)") || !strings.Contains(out.String(), "floor-2 / floor") {
		t.Errorf("table does not say it is an A/A run:\n%s", out.String())
	}
}

// The child server of --http traces its measured window when asked: the trace
// starts at the first GET /snap (which opens the window) and is complete when the
// server stops.
func TestHTTPServerTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	path := filepath.Join(t.TempDir(), "tr.floor-json")
	cfg := smokeConfig("ipc")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { done <- RunHTTPServer(sctx, HTTPServerConfig{System: "floor", Bench: cfg, Trace: path}, pw) }()
	var info HTTPServerInfo
	decoded := make(chan error, 1)
	go func() { decoded <- json.NewDecoder(pr).Decode(&info) }()
	if err := testwait.Recv(t, decoded, "the server's address line"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a trace before the window opened: %v", err)
	}
	resp, err := testwait.HTTPClient.Get("http://" + info.Control + "/snap")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	stop()
	if err := testwait.Recv(t, done, "RunHTTPServer to return after its context ends"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		t.Fatalf("trace file: %v, %v", st, err)
	}
}

// The switchyard phase's child server routes as Config.Policy says (the floor has
// no policy), and Validate takes only the policies a dispatch bench can run.
func TestHTTPServerArgsPolicy(t *testing.T) {
	cfg := smokeConfig("ipc")
	cfg.Policy = "round-robin"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	has := func(args []string) bool {
		for i := range args[:len(args)-1] {
			if args[i] == "--lb-policy" && args[i+1] == "round-robin" {
				return true
			}
		}
		return false
	}
	if args := serverArgs(cfg, "switchyard", "switchyard", "json"); !has(args) {
		t.Errorf("switchyard's server args %q do not carry --lb-policy round-robin", args)
	}
	if args := serverArgs(cfg, "floor", "floor-2", "json"); has(args) || slices.Contains(args, "--lb-policy") {
		t.Errorf("the floor's server args %q carry a policy", args)
	}
	for _, p := range []string{"kv", "prefix", "fastest"} {
		c := cfg
		c.Policy = p
		if err := c.Validate(); err == nil {
			t.Errorf("Validate accepted policy %q", p)
		}
	}
}
