package chart

import (
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/bench"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// kvColours tell policies apart; least-loaded, the load-only baseline, is grey as
// the relay baseline is in the latency chart.
var kvColours = map[string]color.Color{
	"least-loaded": colBaseline,
	"prefix":       color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"kv":           colSwitchyard,
	"power-of-two": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"round-robin":  color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

func kvColour(policy string) color.Color {
	if c, ok := kvColours[policy]; ok {
		return c
	}
	return color.Black
}

// writeKVPNG draws a kv run: TTFT by percentile per policy, the hit ratio per
// policy against the oracle, and the requests each engine served per policy.
func writeKVPNG(path string, r *bench.Report) error {
	ps := bench.KVPolicies(r)
	var plots []*plot.Plot
	for _, build := range []func([]*bench.KVPolicy) (*plot.Plot, error){kvTTFTPlot, kvHitPlot, kvBalancePlot} {
		p, err := build(ps)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return drawPlots(path, Title(r), plots)
}

func kvTTFTPlot(ps []*bench.KVPolicy) (*plot.Plot, error) {
	p := percentilePlot("time to first token by percentile, per policy")
	// Bottom right: the curves rise to the right, so that corner stays empty.
	p.Legend.Top, p.Legend.Left = false, false
	for _, k := range ps {
		xys := cdfXYs(k.TTFT)
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("bench: chart: %w", err)
		}
		l.Color, l.Width = kvColour(k.Policy), vg.Points(2)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (p50 %s ms, p90 %s ms)", k.Policy, bench.FormatFigure(k.TTFTP50MS), bench.FormatFigure(k.TTFTP90MS)), l)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// kvHitPlot is one bar per policy, with the oracle as a dashed line across.
func kvHitPlot(ps []*bench.KVPolicy) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "prefix-cache hit ratio (engines' own counts) against the oracle"
	p.Y.Label.Text = "hit ratio"
	p.Y.Min, p.Y.Max = 0, 1.15 // room above the oracle's line for the legend
	p.Legend.Top, p.Legend.Left = true, true
	var names []string
	for i, k := range ps {
		b, err := plotter.NewBarChart(plotter.Values{k.HitRatio}, vg.Points(40))
		if err != nil {
			return nil, fmt.Errorf("bench: chart: %w", err)
		}
		b.XMin = float64(i)
		b.Color, b.LineStyle.Width = kvColour(k.Policy), 0
		p.Add(b)
		names = append(names, fmt.Sprintf("%s %s", k.Policy, bench.FormatFigure(k.HitRatio)))
	}
	if len(ps) > 0 {
		o := ps[0].OracleHitRatio
		l, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: o}, {X: float64(len(ps)) - 0.5, Y: o}})
		if err != nil {
			return nil, fmt.Errorf("bench: chart: %w", err)
		}
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("oracle %s (unbounded cache)", bench.FormatFigure(o)), l)
	}
	p.NominalX(names...)
	p.Add(plotter.NewGrid())
	return p, nil
}

// kvBalancePlot groups, per engine rank, one bar per policy.
func kvBalancePlot(ps []*bench.KVPolicy) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "requests per engine, per policy"
	p.Y.Label.Text = "requests"
	p.Legend.Top = true
	ranks, top := 0, int64(0)
	for _, k := range ps {
		ranks = max(ranks, len(k.RequestsPerEngine))
		top = max(top, slices.Max(append([]int64{0}, k.RequestsPerEngine...)))
	}
	p.Y.Min, p.Y.Max = 0, 1.4*float64(max(top, 1)) // room above the bars for the legend
	// Three quarters of each rank's share of the ~440 points of plot width.
	w := vg.Points(0.75 * 440 / float64(max(ranks*len(ps), 1)))
	for i, k := range ps {
		vals := make(plotter.Values, ranks)
		for r, n := range k.RequestsPerEngine {
			vals[r] = float64(n)
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return nil, fmt.Errorf("bench: chart: %w", err)
		}
		b.Offset = (vg.Length(i) - vg.Length(len(ps)-1)/2) * b.Width
		b.Color, b.LineStyle.Width = kvColour(k.Policy), 0
		p.Add(b)
		p.Legend.Add(fmt.Sprintf("%s (busiest %sx the mean)", k.Policy, bench.FormatFigure(k.MaxOverMean)), b)
	}
	var names []string
	for r := range ranks {
		names = append(names, fmt.Sprintf("rank %d", r))
	}
	p.NominalX(names...)
	p.Add(plotter.NewGrid())
	return p, nil
}
