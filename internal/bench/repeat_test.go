package bench

import (
	"bytes"
	"strings"
	"testing"
)

// One run shows its comparison but is not judged; repeated runs are met only when
// every run held, and the table says in how many.
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
		if tg.Met {
			t.Errorf("single run: %s Met", tg.Name)
		}
	}

	worse := sampleReport(120, 500) // p99 2.5x: missed in this run
	worse.Config = r.Config
	worse.Targets = checkTargets(worse)
	three := Combine([]*Report{r, r, worse})
	if three.Runs != 3 {
		t.Errorf("Runs %d, want 3", three.Runs)
	}
	got := map[string]Target{}
	for _, tg := range three.Targets {
		got[tg.Name] = tg
	}
	p50, p99 := got["dispatch+return p50 vs relay"], got["dispatch+return p99 vs relay"]
	if !p50.Met || p50.Runs != 3 || p50.MetRuns != 3 || len(p50.Gots) != 3 {
		t.Errorf("p50 over 3 runs that all held: %+v", p50)
	}
	if p99.Met || p99.MetRuns != 2 || p99.Runs != 3 {
		t.Errorf("p99 held in 2 of 3: %+v", p99)
	}
	out.Reset()
	printTargets(&out, three.Targets)
	for _, want := range []string{"met    dispatch+return p50", "held in 3 of 3 runs", "MISSED dispatch+return p99", "held in 2 of 3 runs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
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
