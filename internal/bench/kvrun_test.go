package bench

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// tinyKV is a kv run small enough for a test: 2 engines, 4 conversations of 3
// turns.
func tinyKV(policies ...string) Config {
	cfg := DefaultConfig()
	cfg.Engines, cfg.StepTime, cfg.TokensPerStep = 2, time.Millisecond, 4
	cfg.KV = DefaultKVBench(WorkloadMultiTurn)
	cfg.KV.Policies = policies
	wl := &cfg.KV.Workload
	wl.Conversations, wl.Turns, wl.Prefixes, wl.PrefixTokens, wl.FirstTokens = 4, 3, 2, 64, 64
	wl.UserTokens, wl.AnswerTokens, wl.Think, wl.Rate = 16, 16, 5*time.Millisecond, 200
	cfg.KV.PrefillPerToken = 5 * time.Microsecond
	return cfg
}

func runTinyKV(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	defer cancel()
	r, err := Run(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// One short run under least-loaded and kv: every request answered as the
// workload expects, the engines' counts add up, the figures are in range.
func TestKVRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts switchyard and mock engines")
	}
	cfg := tinyKV("least-loaded", "kv")
	r := runTinyKV(t, cfg)
	n := int64(cfg.KV.Workload.Conversations * cfg.KV.Workload.Turns)
	for _, name := range cfg.KV.Policies {
		p := r.KV[name]
		if p == nil {
			t.Fatalf("no %s figures: %+v", name, r.KV)
		}
		if p.Requests != n || p.Failed != 0 || p.AnswerMismatches != 0 {
			t.Fatalf("%s: finished %d failed %d mismatched %d, want %d finished", name, p.Requests, p.Failed, p.AnswerMismatches, n)
		}
		var sum int64
		for _, c := range p.RequestsPerEngine {
			sum += c
		}
		if len(p.RequestsPerEngine) != 2 || sum != n {
			t.Errorf("%s: engines counted %v requests, want %d over 2", name, p.RequestsPerEngine, n)
		}
		// Later turns and shared system prompts hit whatever the routing; never
		// more than the oracle allows.
		if p.HitRatio <= 0 || p.HitRatio > p.OracleHitRatio+1e-9 {
			t.Errorf("%s: hit ratio %.3f, oracle %.3f", name, p.HitRatio, p.OracleHitRatio)
		}
		if p.TTFT.Count != n || p.TTFTP50MS <= 0 || p.TTFTP90MS < p.TTFTP50MS {
			t.Errorf("%s: TTFT %+v", name, p.TTFT)
		}
	}
	if f := r.KVWorkload; f == nil || f.BlocksPerEngine != (f.WorkingSetBlocks+2)/4 {
		t.Errorf("workload figures %+v: each engine's cache should be a quarter of the working set", f)
	}
	checkKVOutputs(t, r)
}

// checkKVOutputs writes r's table and JSON, and reads the JSON back.
func checkKVOutputs(t *testing.T, r *Report) {
	t.Helper()
	var b strings.Builder
	if err := PrintTable(&b, r); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	for _, want := range []string{"hit ratio (engines' counts)", "oracle hit ratio", "TTFT p50 (ms)", "requests per engine"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
	dir := t.TempDir()
	if err := r.WriteJSON(filepath.Join(dir, "kv.json")); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(filepath.Join(dir, "kv.json"))
	if err != nil {
		t.Fatal(err)
	}
	flat, err := flatten(back)
	if err != nil {
		t.Fatal(err)
	}
	for name := range r.KV {
		for _, f := range []string{"hit_ratio", "oracle_hit_ratio", "ttft_p50_ms", "ttft_p90_ms", "max_over_mean", "requests_per_engine.0"} {
			if _, ok := flat["kv."+name+"."+f]; !ok {
				t.Errorf("JSON lacks kv.%s.%s", name, f)
			}
		}
	}
}
