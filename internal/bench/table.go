package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// printHeading writes a table's first line: the command, when it ran and on what
// machine, so a pasted table says where its figures come from.
func printHeading(w io.Writer, command string, r *Report) {
	fmt.Fprintf(w, "%s  %s  %s/%s  %d CPUs (GOMAXPROCS %d)  %s\n", command,
		r.StartedAt.Format(time.RFC3339), r.Machine.GOOS, r.Machine.GOARCH, r.Machine.CPUs,
		r.Machine.GOMAXPROCS, r.Machine.CPUModel)
}

// PrintTable writes the report for a terminal: the run's shape, one latency table with
// switchyard and the baseline side by side, throughput and cost figures, the ratio, and
// the targets.
func PrintTable(w io.Writer, r *Report) error {
	c := r.Config
	printHeading(w, "switchyard bench", r)
	if c.KV != nil {
		return printKV(w, r)
	}
	load := fmt.Sprintf("open loop %.0f req/s (Poisson)", c.Rate)
	if c.Rate == 0 {
		load = fmt.Sprintf("closed loop, %d in flight", c.Concurrency)
	}
	where := fmt.Sprintf("embedded, %d engines over %s", c.Engines, c.Transport)
	if c.EnginesAsProcesses {
		where += " (engines as processes)"
	}
	if c.Mode == ModeTarget {
		where = "target " + c.Target
	}
	if c.Policy != "" && c.Mode == ModeEmbedded {
		where += "; switchyard routes " + c.Policy
	}
	if c.RelayWork > 0 {
		where += fmt.Sprintf("; relay busy %s per message (calibration: latency targets not judged)", c.RelayWork)
	}
	if c.BaselineVsBaseline {
		second := "relay (relay-2)"
		if c.HTTP {
			second = "HTTP floor (floor-2)"
		}
		where += "; A/A calibration: a second " + second + " stands in for switchyard, so the ratios are this machine's noise"
	}
	fmt.Fprintf(w, "%s; %s; prompt %d, output %d tokens, %d/step every %s; seed %d\n",
		where, load, c.PromptTokens, c.OutputTokens, c.TokensPerStep, c.StepTime, c.Seed)
	if r.Runs > 1 {
		fmt.Fprintf(w, "%d runs: the figures below are the last run's, the targets every run's\n", r.Runs)
	}
	if r.AARuns > 0 {
		fmt.Fprintf(w, "%d A/A runs alternated with them: each ratio target is judged on its median, "+
			"beside the A/A median (beyond %.2fx the run is too noisy to judge)\n", r.AARuns, AANoise)
	}
	fmt.Fprintln(w)

	if r.Memory != nil {
		return printMemory(w, r.Memory)
	}
	if r.HTTP != nil {
		return printHTTP(w, r)
	}
	return printPhases(w, r, []*Phase{r.Switchyard, r.Baseline})
}

// printPhases writes the latency and cost tables of phases (nil ones left out), the
// ratio, the sweep, the warnings and the targets.
func printPhases(w io.Writer, r *Report, all []*Phase) error {
	var phases []*Phase
	for _, p := range all {
		if p != nil {
			phases = append(phases, p)
		}
	}
	if len(phases) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "latency (µs)\t")
	for _, p := range phases {
		fmt.Fprintf(tw, "%s p50\tp90\tp99\tp99.9\tmax\t", p.Name)
	}
	fmt.Fprintln(tw)
	rows := []struct {
		name string
		get  func(*Phase) Summary
	}{
		{"dispatch", func(p *Phase) Summary { return p.Dispatch }},
		{"return", func(p *Phase) Summary { return p.Return }},
		{"dispatch+return", func(p *Phase) Summary { return p.Overhead }},
		{"return (final)", func(p *Phase) Summary { return p.ReturnLast }},
		{"TTFT", func(p *Phase) Summary { return p.TTFT }},
		{"inter-token", func(p *Phase) Summary { return p.ITL }},
		{"end-to-end", func(p *Phase) Summary { return p.E2E }},
	}
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t", row.name)
		for _, p := range phases {
			s := row.get(p)
			if s.Count == 0 {
				fmt.Fprint(tw, "-\t-\t-\t-\t-\t")
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t", FormatFigure(s.P50US), FormatFigure(s.P90US),
				FormatFigure(s.P99US), FormatFigure(s.P999US), FormatFigure(s.MaxUS))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, p := range phases {
		fmt.Fprintf(tw, "%s\t", p.Name)
	}
	fmt.Fprintln(tw)
	figs := []struct {
		name string
		get  func(*Phase) string
	}{
		{"requests measured", func(p *Phase) string { return fmt.Sprint(p.Requests) }},
		{"failed", func(p *Phase) string { return fmt.Sprint(p.Failed) }},
		{"requests/s", func(p *Phase) string { return FormatFigure(p.RequestsPerS) }},
		{"output tokens/s", func(p *Phase) string { return FormatFigure(p.OutputTokensPerS) }},
		{"send lag p99 (µs)", func(p *Phase) string { return FormatFigure(p.SendLagP99US) }},
		{"process CPU s / 1k req", func(p *Phase) string { return FormatFigure(p.CPUSecondsPer1kRequests) }},
		{"allocs / request", func(p *Phase) string { return FormatFigure(p.AllocsPerRequest) }},
		{"bytes alloc / request", func(p *Phase) string { return FormatFigure(p.BytesAllocPerRequest) }},
		{"peak RSS (MiB)", func(p *Phase) string { return FormatFigure(float64(p.PeakRSSBytes) / (1 << 20)) }},
		{"per-rank requests", func(p *Phase) string { return fmt.Sprint(p.PerRank) }},
	}
	for _, f := range figs {
		fmt.Fprintf(tw, "%s\t", f.name)
		for _, p := range phases {
			fmt.Fprintf(tw, "%s\t", f.get(p))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.OverheadRatio != nil {
		fmt.Fprintf(w, "\noverhead ratio (%s / relay baseline, dispatch+return): p50 %.2fx  p99 %.2fx\n",
			measuredName(r.Switchyard), r.OverheadRatio.P50, r.OverheadRatio.P99)
	}
	if len(r.Sweep) > 0 {
		fmt.Fprintln(w, "\nsweep (offered req/s -> achieved, dispatch+return p50/p99 µs):")
		for _, s := range r.Sweep {
			line := fmt.Sprintf("  %8.0f  switchyard %8.0f req/s  %s/%s", s.OfferedRate,
				s.Switchyard.RequestsPerS, FormatFigure(s.Switchyard.Overhead.P50US), FormatFigure(s.Switchyard.Overhead.P99US))
			if s.Baseline != nil {
				line += fmt.Sprintf("   relay %8.0f req/s  %s/%s", s.Baseline.RequestsPerS,
					FormatFigure(s.Baseline.Overhead.P50US), FormatFigure(s.Baseline.Overhead.P99US))
			}
			fmt.Fprintln(w, line)
		}
	}
	printWarnings(w, r.Warnings)
	printTargets(w, r.Targets)
	return nil
}

func printMemory(w io.Writer, m *Memory) error {
	fmt.Fprintf(w, "memory with %d requests in flight:\n", m.Inflight)
	fmt.Fprintf(w, "  switchyard heap / request   %s B\n", FormatFigure(m.SwitchyardHeapPerRequest))
	fmt.Fprintf(w, "  relay heap / request        %s B (client + engines, the same in both)\n", FormatFigure(m.BaselineHeapPerRequest))
	fmt.Fprintf(w, "  frontend bytes / request    %s B\n", FormatFigure(m.FrontendBytesPerRequest))
	fmt.Fprintf(w, "  peak RSS switchyard / relay %.1f / %.1f MiB\n",
		float64(m.SwitchyardPeakRSSBytes)/(1<<20), float64(m.BaselinePeakRSSBytes)/(1<<20))
	fmt.Fprintf(w, "  goroutines at the top       %d\n", m.SwitchyardGoroutinesAtTop)
	return nil
}

func printWarnings(w io.Writer, ws []string) {
	if len(ws) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, s := range ws {
		fmt.Fprintf(w, "WARNING: %s\n", s)
	}
}

// printTargets states each target's verdict: over repeated runs the median of the
// runs' figures against the target, with the A/A series' median beside a ratio
// target ("too noisy" when it is beyond AANoise); a single run's comparison is
// shown, not judged.
func printTargets(w io.Writer, ts []Target) { printTargetsUnder(w, "targets", ts) }

// printTargetsUnder is printTargets under a heading of its own.
func printTargetsUnder(w io.Writer, heading string, ts []Target) {
	if len(ts) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", heading)
	for _, t := range ts {
		got := "got"
		if t.Runs >= 2 {
			got = "median"
		}
		fmt.Fprintf(w, "  %-6s %s: %s %s %s, want %s", targetMark(t), t.Name, got, FormatFigure(t.Got), t.Unit, t.Want)
		for _, s := range append(targetNotes(t), t.Note) {
			if s != "" {
				fmt.Fprintf(w, " (%s)", s)
			}
		}
		fmt.Fprintln(w)
	}
}

// targetMark is the verdict's column: met, MISSED, NOISY, report, or - (one run).
func targetMark(t Target) string {
	switch {
	case t.Want == wantReported:
		return "report"
	case t.Runs < 2:
		return "-"
	case t.Verdict == VerdictTooNoisy:
		return "NOISY"
	case t.Met:
		return "met"
	}
	return "MISSED"
}

// targetNotes say what the verdict rests on: the runs' figures and the A/A series'.
func targetNotes(t Target) []string {
	if t.Want == wantReported {
		return nil
	}
	if t.Runs < 2 {
		return []string{"single run, not judged (--repeat N, N >= 2, judges)"}
	}
	notes := []string{fmt.Sprintf("held in %d of %d runs: %s", t.MetRuns, t.Runs, joinFigures(t.Gots))}
	switch {
	case t.Verdict == VerdictTooNoisy:
		notes = append(notes, fmt.Sprintf("too noisy: A/A median %sx, beyond %.2fx (A/A runs: %s)",
			FormatFigure(t.AAGot), AANoise, joinFigures(t.AAGots)))
	case len(t.AAGots) > 0:
		notes = append(notes, fmt.Sprintf("A/A median %sx, within %.2fx (A/A runs: %s)",
			FormatFigure(t.AAGot), AANoise, joinFigures(t.AAGots)))
	case isRatioTarget(t):
		notes = append(notes, "no A/A series")
	}
	return notes
}

// joinFigures lists figures for a note.
func joinFigures(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = FormatFigure(x)
	}
	return strings.Join(s, ", ")
}

// printHTTP writes the HTTP comparison: the four phases, then the ratios.
func printHTTP(w io.Writer, r *Report) error {
	h := r.HTTP
	if h.ServerProcess {
		fmt.Fprintln(w, "HTTP: process CPU and allocs are the server process's alone (a child process per phase)")
	} else {
		fmt.Fprintln(w, "HTTP: both servers ran in this process: CPU and allocs include the client and the engines")
	}
	fmt.Fprintln(w, "JSON phases: dispatch+return is dispatch plus the return of the final output (the answer comes whole)")
	fmt.Fprintln(w)
	rr := *r
	rr.Targets, rr.Warnings = nil, nil
	if err := printPhases(w, &rr, []*Phase{h.JSON.Switchyard, h.JSON.Floor, h.SSE.Switchyard, h.SSE.Floor}); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, m := range []struct {
		shape string
		m     *HTTPMode
	}{{"JSON", h.JSON}, {"SSE", h.SSE}} {
		line := fmt.Sprintf("HTTP %-4s %s / floor: CPU per request %.2fx, allocs per request %.2fx", m.shape, measuredName(m.m.Switchyard), m.m.CPURatio, m.m.AllocRatio)
		if o := m.m.OverheadRatio; o != nil {
			line += fmt.Sprintf(", latency overhead p50 %.2fx p99 %.2fx", o.P50, o.P99)
		}
		fmt.Fprintln(w, line)
	}
	printWarnings(w, r.Warnings)
	printTargets(w, r.Targets)
	return nil
}
