package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// PrintScaleTable writes the scale sweeps for a terminal: one table per sweep, a row
// per point, switchyard beside the relay measured at the same point.
func PrintScaleTable(w io.Writer, r *Report) error {
	c := r.Config
	printHeading(w, "switchyard bench --scale", r)
	fmt.Fprintf(w, "each point: the relay, then switchyard, open loop (Poisson) over %s; %d engines, prompt %d, output %d tokens, %d/step every %s, "+
		"%s warm-up + %s measured per phase\n", c.Transport, c.Engines, c.PromptTokens, c.OutputTokens, c.TokensPerStep, c.StepTime, c.Warmup, c.Duration)
	fmt.Fprintln(w, "CPU and allocations are the bench process's (client and engines in both phases): switchyard minus the relay is the frontend's own")
	if r.Scale == nil {
		return nil
	}
	for i := range r.Scale.Sweeps {
		if err := printScaleSweep(w, &r.Scale.Sweeps[i]); err != nil {
			return err
		}
	}
	return nil
}

var scaleHeads = map[string]string{
	ScaleEngines: "engines", ScaleStreams: "streams", ScalePrompt: "prompt tokens", ScaleClients: "clients",
}

func printScaleSweep(w io.Writer, s *ScaleSweep) error {
	rate := FormatRate(s.Rate) + " req/s"
	if s.Name == ScalePrompt {
		rate = "up to " + rate + " and the prompt-token rate cap"
	}
	fmt.Fprintf(w, "\n%s sweep, %s; per unit: %s\n", s.Name, rate, s.Unit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := scaleHeads[s.Name] + "\t"
	if s.Name == ScalePrompt {
		head += "req/s\t"
	}
	head += "CPU µs/req\trelay\tratio\tp50 µs\trelay\tratio\tp99 µs\trelay\tratio\tallocs/req\trelay\tmsgs/req\trelay\tper unit\t"
	if s.Name == ScaleStreams {
		head += "heap B/stream\trelay\t"
	}
	if s.Name == ScalePrompt && len(s.Points) > 0 && s.Points[0].HTTP != nil {
		head += "HTTP CPU µs/req\tfloor\tratio\tHTTP p50 µs\tfloor\tns/token\t"
	}
	fmt.Fprintln(tw, head)
	for i := range s.Points {
		fmt.Fprintln(tw, scaleRow(s.Name, &s.Points[i]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "growth of CPU per request over the points (log-log slope; 0 flat, 1 linear): switchyard %s, relay %s, frontend's own %s\n",
		fmt2(s.SwitchyardCPUGrowth), fmt2(s.BaselineCPUGrowth), fmt2(s.FrontendCPUGrowth))
	for i := range s.Points {
		p := &s.Points[i]
		for _, ph := range []*Phase{p.Baseline, p.Switchyard} {
			if ph != nil && (ph.Failed > 0 || ph.Requests == 0) {
				fmt.Fprintf(w, "WARNING: %s at %d: %d requests measured, %d failed\n", ph.Name, p.X, ph.Requests, ph.Failed)
			}
		}
	}
	return nil
}

func scaleRow(sweep string, p *ScalePoint) string {
	s, b := p.Switchyard, p.Baseline
	r := p.OverheadRatio
	if r == nil {
		r = &Ratio{}
	}
	row := fmt.Sprintf("%d\t", p.X)
	if sweep == ScalePrompt {
		row += FormatFigure(p.Rate) + "\t"
	}
	row += fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t",
		FormatFigure(s.CPUSecondsPer1kRequests*1000), FormatFigure(b.CPUSecondsPer1kRequests*1000), fmt2(p.CPURatio),
		FormatFigure(s.Overhead.P50US), FormatFigure(b.Overhead.P50US), fmt2(r.P50),
		FormatFigure(s.Overhead.P99US), FormatFigure(b.Overhead.P99US), fmt2(r.P99),
		FormatFigure(s.AllocsPerRequest), FormatFigure(b.AllocsPerRequest), fmt2(p.EngineMessagesPerRequest),
		fmt2(p.BaselineEngineMessagesPerRequest), perUnitText(p.PerUnit))
	if sweep == ScaleStreams {
		if m := p.Memory; m != nil {
			row += fmt.Sprintf("%s\t%s\t", FormatFigure(m.SwitchyardHeapPerStream), FormatFigure(m.BaselineHeapPerStream))
		} else {
			row += "-\t-\t"
		}
	}
	if h := p.HTTP; sweep == ScalePrompt && h != nil {
		hr := h.OverheadRatio
		if hr == nil {
			hr = &Ratio{}
		}
		row += fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t", FormatFigure(h.Switchyard.CPUSecondsPer1kRequests*1000),
			FormatFigure(h.Floor.CPUSecondsPer1kRequests*1000), fmt2(h.CPURatio),
			FormatFigure(h.Switchyard.Overhead.P50US), FormatFigure(h.Floor.Overhead.P50US), FormatFigure(h.SwitchyardCPUNSPerToken))
	}
	return row
}

func fmt2(v float64) string { return fmt.Sprintf("%.2f", v) }

// perUnitText is "-" for a point whose per-unit figure is not measured (the heap per
// stream under MinWeighedStreams).
func perUnitText(v float64) string {
	if v == 0 {
		return "-"
	}
	return FormatFigure(v)
}
