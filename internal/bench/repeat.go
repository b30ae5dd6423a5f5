package bench

import (
	"fmt"
	"slices"
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

// Combine folds repeated runs of one configuration into one report: the last
// run's figures, every run's warnings (numbered), and each target checked in every
// run, Met only when it held in all of them and there were at least two.
func Combine(reps []*Report) *Report {
	if len(reps) == 0 {
		return nil
	}
	out := *reps[len(reps)-1]
	out.Runs = len(reps)
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
			if len(t.Gots) > 0 {
				c.Gots = append(c.Gots, t.Gots...)
			} else {
				c.Gots = append(c.Gots, t.Got)
			}
			c.Note = t.Note
		}
	}
	for i := range ts {
		t := &ts[i]
		t.Got = median(t.Gots)
		t.Met = t.Want == wantReported || (t.Runs >= 2 && t.MetRuns == t.Runs)
	}
	out.Targets = ts
	return &out
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
