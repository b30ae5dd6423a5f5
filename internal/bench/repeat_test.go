package bench

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One run shows its comparison but is not judged; repeated runs are judged on the
// median of their figures, and the table says in how many each held.
func TestTargetsJudgedOnlyOverRepeatedRuns(t *testing.T) {
	r := sampleReport(120, 300) // p50 1.2x (held), p99 1.5x (held)
	r.Config.Engines, r.Config.Rate = 8, 5000
	r.Targets = checkTargets(r)
	if len(r.Targets) == 0 {
		t.Fatal("no targets for the 8-engine 5,000 req/s scenario")
	}
	single := Combine([]*Report{r})
	var out bytes.Buffer
	printTargets(&out, single.Targets)
	if strings.Contains(out.String(), " met ") || strings.Contains(out.String(), "MISSED") {
		t.Errorf("a single run is judged:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "single run, not judged") {
		t.Errorf("a single run does not say it is not judged:\n%s", out.String())
	}
	for _, tg := range single.Targets {
		if tg.Met || (tg.Want != wantReported && tg.Verdict != VerdictNotJudged) {
			t.Errorf("single run: %s Met %v, verdict %q", tg.Name, tg.Met, tg.Verdict)
		}
	}

	worse := sampleReport(140, 500) // p50 1.4x, p99 2.5x: both missed in this run
	worse.Config = r.Config
	worse.Targets = checkTargets(worse)
	three := Combine([]*Report{r, worse, r}) // p99 1.5, 2.5, 1.5: median 1.5
	if three.Runs != 3 {
		t.Errorf("Runs %d, want 3", three.Runs)
	}
	got := targetsByName(three)
	p50, p99 := got["dispatch+return p50 vs relay"], got["dispatch+return p99 vs relay"]
	if !p50.Met || p50.Verdict != VerdictMet || p50.Runs != 3 || p50.MetRuns != 2 || len(p50.Gots) != 3 {
		t.Errorf("p50 with a median of 1.2x: %+v", p50)
	}
	if !p99.Met || p99.MetRuns != 2 || p99.Runs != 3 || !near(p99.Got, 1.5) {
		t.Errorf("p99 with a median of 1.5x, held in 2 of 3: %+v", p99)
	}
	out.Reset()
	printTargets(&out, three.Targets)
	for _, want := range []string{"met    dispatch+return p50", "median 1.2", "held in 2 of 3 runs", "no A/A series"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	mostlyWorse := Combine([]*Report{worse, r, worse})
	if p99 := targetsByName(mostlyWorse)["dispatch+return p99 vs relay"]; p99.Met || p99.Verdict != VerdictMissed || !near(p99.Got, 2.5) {
		t.Errorf("p99 with a median of 2.5x: %+v", p99)
	}
}

// Beside an A/A series the ratio targets show its median, and an A/A median beyond
// AANoise makes the run too noisy to judge, however the measured median looks.
func TestTargetsJudgedBesideAASeries(t *testing.T) {
	r := sampleReport(120, 300) // p50 1.2x, p99 1.5x
	quiet := sampleReport(105, 210)
	noisy := sampleReport(125, 210) // the baseline against itself: p50 1.25x
	for _, x := range []*Report{quiet, noisy} {
		x.Switchyard.Name = "relay-2"
		x.Config.BaselineVsBaseline = true
		x.Targets = checkTargets(x)
	}
	c := CombineAA([]*Report{r, r, r}, []*Report{quiet, noisy, quiet})
	if c.AARuns != 3 {
		t.Errorf("AARuns %d, want 3", c.AARuns)
	}
	got := targetsByName(c)
	p50 := got["dispatch+return p50 vs relay"]
	if !p50.Met || p50.Verdict != VerdictMet || !near(p50.AAGot, 1.05) || len(p50.AAGots) != 3 {
		t.Errorf("p50 beside an A/A median of 1.05x: %+v", p50)
	}
	var out bytes.Buffer
	printTargets(&out, c.Targets)
	if !strings.Contains(out.String(), "A/A median 1.05x, within 1.15x") {
		t.Errorf("table lacks the A/A median:\n%s", out.String())
	}
	c = CombineAA([]*Report{r, r, r}, []*Report{noisy, noisy, quiet})
	p50 = targetsByName(c)["dispatch+return p50 vs relay"]
	if p50.Met || p50.Verdict != VerdictTooNoisy || !near(p50.AAGot, 1.25) {
		t.Errorf("p50 beside an A/A median of 1.25x: %+v", p50)
	}
	for _, tg := range c.Targets {
		if !isRatioTarget(tg) && len(tg.AAGots) != 0 {
			t.Errorf("a figure that is no ratio target got an A/A series: %+v", tg)
		}
	}
	out.Reset()
	printTargets(&out, c.Targets)
	if !strings.Contains(out.String(), "NOISY  dispatch+return p50") || !strings.Contains(out.String(), "too noisy: A/A median 1.25x, beyond 1.15x") {
		t.Errorf("table lacks the too-noisy verdict:\n%s", out.String())
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := c.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"verdict": "too noisy"`, `"aa_got": 1.2`, `"aa_runs": 3`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
}

// The Want forms the targets use are read, others are not.
func TestWantHolds(t *testing.T) {
	for _, c := range []struct {
		want        string
		got         float64
		ok, unknown bool
	}{
		{"<= 1.3x", 1.3, true, false}, {"<= 1.3x", 1.31, false, false}, {">= 1,000,000", 1e6, true, false},
		{">= 1,000,000", 999_999, false, false}, {"<= 2048", 2000, true, false}, {"about 3", 3, false, true},
	} {
		ok, known := wantHolds(c.want, c.got)
		if ok != c.ok || known == c.unknown {
			t.Errorf("wantHolds(%q, %v) = %v, %v", c.want, c.got, ok, known)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.01 }

func targetsByName(r *Report) map[string]Target {
	m := map[string]Target{}
	for _, tg := range r.Targets {
		m[tg.Name] = tg
	}
	return m
}

// A run whose load generator fell behind says the offered rate was not reached.
func TestSendLagWarning(t *testing.T) {
	r := sampleReport(120, 300)
	r.Config.Rate = 100 // sampleReport's phases achieve 100 req/s
	if ws := lagWarnings(r); len(ws) != 0 {
		t.Errorf("warnings for a run that kept its schedule: %v", ws)
	}
	r.Switchyard.SendLagP99US = 79_000
	ws := lagWarnings(r)
	if len(ws) != 1 || !strings.Contains(ws[0], "switchyard phase") || !strings.Contains(ws[0], "offered rate of 100 req/s was not reached") ||
		!strings.Contains(ws[0], "79,000") && !strings.Contains(ws[0], "79000") {
		t.Errorf("warnings %v", ws)
	}
	r.Switchyard.SendLagP99US = 0
	r.Config.Rate = 5000 // achieved 100 of 5,000
	if ws := lagWarnings(r); len(ws) != 2 || !strings.Contains(ws[0], "achieved 100 req/s") {
		t.Errorf("warnings for a rate not achieved: %v", ws)
	}
	r.Config.Rate = 0 // closed loop: no schedule
	if ws := lagWarnings(r); len(ws) != 0 {
		t.Errorf("closed loop warned: %v", ws)
	}
	r.Config.Rate = 100
	r.Switchyard.SendLagP99US = 79_000
	r.Warnings = lagWarnings(r)
	c := Combine([]*Report{r, r})
	if len(c.Warnings) != 2 || !strings.HasPrefix(c.Warnings[1], "run 2 of 2: ") {
		t.Errorf("combined warnings %v", c.Warnings)
	}
	var out bytes.Buffer
	if err := PrintTable(&out, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "WARNING: run 1 of 2: switchyard phase: the offered rate") {
		t.Errorf("table lacks the warning:\n%s", out.String())
	}
}

// A repeated run with ratio targets alternates A/A runs with its own; an A/A
// calibration, --relay-work and a single run do not.
func TestWantsAA(t *testing.T) {
	r := sampleReport(120, 300)
	cfg := r.Config
	cfg.Repeat = 5
	if !wantsAA(cfg, r) {
		t.Error("--repeat 5 of the 8-engine 5,000 req/s run has no A/A series")
	}
	for name, c := range map[string]func(*Config){
		"single run":           func(c *Config) { c.Repeat = 1 },
		"A/A":                  func(c *Config) { c.BaselineVsBaseline = true },
		"relay work":           func(c *Config) { c.RelayWork = 1 },
		"target":               func(c *Config) { c.Mode = ModeTarget },
		"no baseline, no HTTP": func(c *Config) { c.Baseline = false },
	} {
		x := cfg
		c(&x)
		if wantsAA(x, r) {
			t.Errorf("%s: an A/A series", name)
		}
	}
	noRatio := *r
	noRatio.Targets = nil
	if wantsAA(cfg, &noRatio) {
		t.Error("an A/A series for a run without ratio targets")
	}
}

// Only ratios to the baseline have an A/A counterpart; the kv targets' ratios do not.
func TestRatioTargets(t *testing.T) {
	for name, want := range map[string]bool{
		"dispatch+return p50 vs relay": true, "HTTP JSON CPU per request vs floor": true,
		"HTTP SSE latency overhead p99 vs floor": true, "kv hit ratio vs the oracle": false,
		"kv TTFT p50 vs least-loaded": false, "kv busiest engine vs the mean": false,
	} {
		if got := isRatioTarget(Target{Name: name, Unit: "x", Want: "<= 2x"}); got != want {
			t.Errorf("%s: isRatioTarget %v", name, got)
		}
	}
	if isRatioTarget(Target{Name: "output tokens/s routed to client streams", Unit: "tokens/s", Want: ">= 1,000,000"}) {
		t.Error("a throughput is a ratio target")
	}
}
