package chart

import (
	"fmt"
	"image/color"
	"math"

	"github.com/switchyard-llm/switchyard/internal/bench"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// The HTTP path of the prompt sweep: switchyard's HTTP API in orange, the HTTP floor
// in a lighter grey than the relay's.
var (
	colHTTP      = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colHTTPFloor = color.RGBA{R: 0xbb, G: 0xbb, B: 0xbb, A: 0xff}
)

// writeScalePNG draws one panel per sweep: CPU per request (solid) and the
// dispatch+return p50 (dashed) against the sweep's point, switchyard beside the relay,
// both axes logarithmic so that a flat cost is a flat line and a linear one a slope
// of one decade per decade.
func writeScalePNG(path string, r *bench.Report) error {
	var plots []*plot.Plot
	for i := range r.Scale.Sweeps {
		p, err := scalePlot(&r.Scale.Sweeps[i])
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return drawPlots(path, scaleTitle(r), plots)
}

func scaleTitle(r *bench.Report) string {
	t := Title(r)
	c := r.Config
	line1 := fmt.Sprintf("switchyard bench --scale: each point the relay then switchyard, open loop, %d engines, %d+%d tokens in one step, %s",
		c.Engines, c.PromptTokens, c.OutputTokens, c.Transport)
	for i := range len(t) {
		if t[i] == '\n' {
			return line1 + t[i:]
		}
	}
	return line1
}

var scaleAxes = map[string]string{
	bench.ScaleEngines: "engine ranks",
	bench.ScaleStreams: "streams held in flight",
	bench.ScalePrompt:  "prompt tokens",
	bench.ScaleClients: "client connections",
}

type scaleSeries struct {
	name  string
	y     func(*bench.ScalePoint) float64
	c     color.Color
	dash  bool
	skipf func(*bench.ScalePoint) bool
}

func scalePlot(s *bench.ScaleSweep) (*plot.Plot, error) {
	p := plot.New()
	rate := bench.FormatRate(s.Rate) + " req/s"
	if s.Name == bench.ScalePrompt {
		rate = "up to " + rate + ", token rate capped"
	}
	p.Title.Text = fmt.Sprintf("%s sweep, %s: CPU/request (solid), dispatch+return p50 (dashed)", s.Name, rate)
	p.X.Label.Text = scaleAxes[s.Name]
	p.Y.Label.Text = "µs"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = oneTwoFive{}, oneTwoFive{}
	p.Legend.Top, p.Legend.Left = true, true
	noHTTP := func(pt *bench.ScalePoint) bool { return pt.HTTP == nil }
	series := []scaleSeries{
		{"switchyard CPU/req", func(pt *bench.ScalePoint) float64 { return pt.Switchyard.CPUSecondsPer1kRequests * 1000 }, colSwitchyard, false, nil},
		{"relay CPU/req", func(pt *bench.ScalePoint) float64 { return pt.Baseline.CPUSecondsPer1kRequests * 1000 }, colBaseline, false, nil},
		{"switchyard p50", func(pt *bench.ScalePoint) float64 { return pt.Switchyard.Overhead.P50US }, colSwitchyard, true, nil},
		{"relay p50", func(pt *bench.ScalePoint) float64 { return pt.Baseline.Overhead.P50US }, colBaseline, true, nil},
		{"HTTP switchyard CPU/req", func(pt *bench.ScalePoint) float64 { return pt.HTTP.Switchyard.CPUSecondsPer1kRequests * 1000 }, colHTTP, false, noHTTP},
		{"HTTP floor CPU/req", func(pt *bench.ScalePoint) float64 { return pt.HTTP.Floor.CPUSecondsPer1kRequests * 1000 }, colHTTPFloor, false, noHTTP},
	}
	for _, sr := range series {
		var xys plotter.XYs
		for i := range s.Points {
			pt := &s.Points[i]
			if pt.Switchyard == nil || pt.Baseline == nil || (sr.skipf != nil && sr.skipf(pt)) {
				continue
			}
			if y := sr.y(pt); y > 0 && pt.X > 0 {
				xys = append(xys, plotter.XY{X: float64(pt.X), Y: y})
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("bench: chart: %w", err)
		}
		l.Color, sc.Color, l.Width = sr.c, sr.c, vg.Points(2)
		if sr.dash {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, sc)
		p.Legend.Add(sr.name, l, sc)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// oneTwoFive labels a log axis at 1, 2 and 5 times each power of ten, so a range
// within one decade still has labels; over more than three decades, at the powers.
type oneTwoFive struct{}

func (oneTwoFive) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	steps := []float64{1, 2, 5}
	if max > 1000*min { // labels of 2 and 5 would run into each other
		steps = steps[:1]
	}
	for d := math.Pow(10, math.Floor(math.Log10(min))); d <= max; d *= 10 {
		for _, m := range steps {
			if v := d * m; v >= min && v <= max {
				ts = append(ts, plot.Tick{Value: v, Label: bench.FormatFigure(v)})
			}
		}
	}
	return ts
}
