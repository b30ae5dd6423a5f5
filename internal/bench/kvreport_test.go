package bench

import (
	"strings"
	"testing"
)

// kvReport is a hand-made kv report: kv meets every target, prefix does not run.
func kvReport() *Report {
	cfg := DefaultConfig()
	cfg.Engines = 4
	cfg.KV = DefaultKVBench(WorkloadMultiTurn)
	cfg.KV.Policies = []string{"least-loaded", "kv"}
	return &Report{Schema: SchemaVersion, Config: cfg,
		KVWorkload: &KVWorkloadFigures{Requests: 256, PromptTokens: 1000, OracleHitRatio: 0.9, WorkingSetBlocks: 400, BlocksPerEngine: 100},
		KV: map[string]*KVPolicy{
			"least-loaded": {Policy: "least-loaded", HitRatio: 0.4, OracleHitRatio: 0.9, TTFTP50MS: 40, TTFTP90MS: 80,
				RequestsPerEngine: []int64{64, 64, 64, 64}, MaxOverMean: 1},
			"kv": {Policy: "kv", HitRatio: 0.85, OracleHitRatio: 0.9, TTFTP50MS: 4, TTFTP90MS: 20,
				RequestsPerEngine: []int64{70, 60, 66, 60}, MaxOverMean: maxOverMean([]int64{70, 60, 66, 60})},
		}}
}

func TestKVTargets(t *testing.T) {
	r := kvReport()
	ts := kvTargets(r)
	if len(ts) != 4 {
		t.Fatalf("%d targets, want 4: %+v", len(ts), ts)
	}
	for _, tg := range ts {
		if !tg.Met {
			t.Errorf("%s: got %.3f, want %s: should be met", tg.Name, tg.Got, tg.Want)
		}
	}
	r.KV["kv"].HitRatio = 0.7 // < 2 x 0.4 and < 0.8 x 0.9
	missed := 0
	for _, tg := range kvTargets(r) {
		if !tg.Met {
			missed++
		}
	}
	if missed != 2 {
		t.Errorf("%d targets missed, want 2", missed)
	}
	// Another scenario states none.
	r.Config.Engines = 8
	if ts := kvTargets(r); len(ts) != 0 {
		t.Errorf("8 engines: %d targets, want none", len(ts))
	}
	r.Config.Engines = 4
	delete(r.KV, "least-loaded")
	if ts := kvTargets(r); len(ts) != 2 {
		t.Errorf("without least-loaded: %d targets, want the 2 absolute ones", len(ts))
	}
}

func TestKVTable(t *testing.T) {
	r := kvReport()
	r.Targets = checkTargets(r)
	var b strings.Builder
	if err := PrintTable(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"workload multi-turn", "oracle hit ratio 0.900", "least-loaded", "[70 60 66 60]",
		"kv hit ratio vs least-loaded", "single run, not judged"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Policies in the run's order, least-loaded first.
	if i, j := strings.Index(out, "least-loaded"), strings.Index(out, "  kv"); i < 0 || j < 0 || i > j {
		t.Errorf("policy columns out of order:\n%s", out)
	}
}

func TestKVCompareVerdicts(t *testing.T) {
	a, b := kvReport(), kvReport()
	b.KV["kv"].HitRatio, b.KV["kv"].TTFTP50MS = 0.88, 3
	cs, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs {
		got[c.Figure] = c.Verdict
	}
	if got["kv.kv.hit_ratio"] != "better" || got["kv.kv.ttft_p50_ms"] != "better" {
		t.Errorf("a higher hit ratio and a lower TTFT should both be better: %v", got)
	}
}

func TestMaxOverMean(t *testing.T) {
	if got := maxOverMean([]int64{3, 1, 2, 2}); got != 1.5 {
		t.Errorf("maxOverMean = %v, want 1.5", got)
	}
	if got := maxOverMean([]int64{0, 0}); got != 0 {
		t.Errorf("nothing counted: %v, want 0", got)
	}
}
