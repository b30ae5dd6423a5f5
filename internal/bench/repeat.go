package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// wantReported is the Want of a figure that is reported, not judged.
const wantReported = "reported"

// Send-lag limits: the open-loop sender is behind its Poisson schedule, so the rate
// the system saw is lower than the one the report names.
const (
	// LagWarnP99US is the p99 send lag (µs) beyond which the schedule was not kept.
	LagWarnP99US = 10_000
	// RateWarnFraction: achieved requests/s below this fraction of the offered
	// rate means the offered rate was not reached.
	RateWarnFraction = 0.9
)

// lagWarnings states, for each open-loop phase of r, whether the load generator
// kept its schedule.
func lagWarnings(r *Report) []string {
	var ws []string
	check := func(rate float64, p *Phase) {
		if p == nil || rate <= 0 {
			return
		}
		var why []string
		if p.SendLagP99US > LagWarnP99US {
			why = append(why, fmt.Sprintf("its send lag p99 was %s µs", FormatFigure(p.SendLagP99US)))
		}
		if p.Seconds > 0 && p.RequestsPerS < RateWarnFraction*rate {
			why = append(why, fmt.Sprintf("it achieved %s req/s", FormatFigure(p.RequestsPerS)))
		}
		if len(why) == 0 {
			return
		}
		ws = append(ws, fmt.Sprintf("%s phase: the offered rate of %s req/s was not reached (%s): "+
			"the load generator fell behind its schedule, so the figures are for a lower rate",
			p.Name, FormatRate(rate), joinAnd(why)))
	}
	if len(r.Sweep) > 0 {
		for _, s := range r.Sweep {
			check(s.OfferedRate, s.Baseline)
			check(s.OfferedRate, s.Switchyard)
		}
		return ws
	}
	check(r.Config.Rate, r.Baseline)
	check(r.Config.Rate, r.Switchyard)
	return ws
}

func joinAnd(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	out := s[0]
	for _, x := range s[1 : len(s)-1] {
		out += ", " + x
	}
	return out + " and " + s[len(s)-1]
}

// AANoise bounds the A/A series: when the median ratio of the baseline against
// itself is beyond it, either way, the machine's noise is as large as the gaps the
// ratio targets judge, and a verdict would be the machine's, not the frontend's.
const AANoise = 1.15

// Verdicts (Target.Verdict).
const (
	VerdictMet       = "met"
	VerdictMissed    = "missed"
	VerdictTooNoisy  = "too noisy"
	VerdictNotJudged = "not judged"
	VerdictReported  = "reported"
)

// Combine folds repeated runs of one configuration into one report without an A/A
// series (CombineAA).
func Combine(reps []*Report) *Report { return CombineAA(reps, nil) }

// CombineAA folds repeated runs of one configuration into one report: the last
// run's figures, every run's warnings (numbered), and each target judged on the
// median of its runs' figures (at least two runs). aa are the A/A runs alternated
// with them: a ratio target's A/A median stands beside its own, and beyond AANoise
// the target is too noisy to judge.
func CombineAA(reps, aa []*Report) *Report {
	if len(reps) == 0 {
		return nil
	}
	out := *reps[len(reps)-1]
	out.Runs = len(reps)
	out.AARuns = len(aa)
	out.Warnings = nil
	byName := map[string]int{}
	var ts []Target
	for i, r := range reps {
		for _, w := range r.Warnings {
			if len(reps) > 1 {
				w = fmt.Sprintf("run %d of %d: %s", i+1, len(reps), w)
			}
			out.Warnings = append(out.Warnings, w)
		}
		for _, t := range r.Targets {
			j, ok := byName[t.Name]
			if !ok {
				j = len(ts)
				byName[t.Name] = j
				c := t
				c.Runs, c.MetRuns, c.Gots = 0, 0, nil
				ts = append(ts, c)
			}
			c := &ts[j]
			c.Runs += max(t.Runs, 1)
			c.MetRuns += t.MetRuns
			c.Gots = append(c.Gots, runGots(t)...)
			c.Note = t.Note
		}
	}
	for i, r := range aa {
		for _, w := range r.Warnings {
			out.Warnings = append(out.Warnings, fmt.Sprintf("A/A run %d of %d: %s", i+1, len(aa), w))
		}
		for _, t := range r.Targets {
			if j, ok := byName[t.Name]; ok && isRatioTarget(t) {
				ts[j].AAGots = append(ts[j].AAGots, runGots(t)...)
			}
		}
	}
	for i := range ts {
		t := &ts[i]
		t.Got = median(t.Gots)
		if len(t.AAGots) > 0 {
			t.AAGot = median(t.AAGots)
		}
		judge(t)
	}
	out.Targets = ts
	return &out
}

// runGots is one report's figures of t: its runs' own, or its one figure.
func runGots(t Target) []float64 {
	if len(t.Gots) > 0 {
		return t.Gots
	}
	return []float64{t.Got}
}

// isRatioTarget: a target stated as a ratio to the baseline (the relay or the HTTP
// floor), which an A/A run measures too (the baseline against itself). The kv
// targets' ratios are to other policies and the oracle, which have no A/A.
func isRatioTarget(t Target) bool {
	return t.Unit == "x" && t.Want != wantReported &&
		(strings.HasSuffix(t.Name, " vs relay") || strings.HasSuffix(t.Name, " vs floor"))
}

// judge sets t's verdict: the median of its runs against Want, unless the A/A
// series beside it is beyond AANoise.
func judge(t *Target) {
	switch {
	case t.Want == wantReported:
		t.Met, t.Verdict = true, VerdictReported
	case t.Runs < 2:
		t.Met, t.Verdict = false, VerdictNotJudged
	case len(t.AAGots) > 0 && aaNoisy(t.AAGot):
		t.Met, t.Verdict = false, VerdictTooNoisy
	default:
		ok, known := wantHolds(t.Want, t.Got)
		if !known { // a Want this code cannot read: every run must have held
			ok = t.MetRuns == t.Runs
		}
		t.Met, t.Verdict = ok, VerdictMissed
		if ok {
			t.Verdict = VerdictMet
		}
	}
}

// aaNoisy: the baseline against itself is further than AANoise from 1x, either way.
func aaNoisy(r float64) bool { return r <= 0 || r > AANoise || r < 1/AANoise }

// wantHolds checks got against a Want of the form "<= 1.3x", ">= 1,000,000" or
// "<= 2048"; known is false for any other form.
func wantHolds(want string, got float64) (ok, known bool) {
	op, num, found := strings.Cut(strings.TrimSpace(want), " ")
	if !found || (op != "<=" && op != ">=") {
		return false, false
	}
	num = strings.TrimSuffix(strings.ReplaceAll(strings.TrimSpace(num), ",", ""), "x")
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return false, false
	}
	if op == "<=" {
		return got <= v, true
	}
	return got >= v, true
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
