package chart

import (
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/bench"
	"image/color"
	"math"
	"os"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Chart colours: switchyard in blue, the relay baseline in grey, so the floor reads as
// the background the overhead stands on.
var (
	colSwitchyard = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colBaseline   = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
)

// WritePNG draws the report: latency percentile curves of switchyard vs the baseline
// (dispatch+return, and TTFT), and, when the run swept load, latency against achieved
// throughput. The percentile axis is 1/(1-q) on a log scale, as HdrHistogram plots are,
// so the tail gets as much room as the median.
func WritePNG(path string, r *bench.Report) error {
	if r.KV != nil {
		return writeKVPNG(path, r)
	}
	if r.Scale != nil {
		return writeScalePNG(path, r)
	}
	var plots []*plot.Plot
	if r.Switchyard != nil {
		p, err := cdfPlot("dispatch + return (µs)", r.Switchyard.Overhead, baseOf(r, func(b *bench.Phase) bench.Summary { return b.Overhead }))
		if err != nil {
			return err
		}
		plots = append(plots, p)
		p, err = cdfPlot("time to first token (µs)", r.Switchyard.TTFT, baseOf(r, func(b *bench.Phase) bench.Summary { return b.TTFT }))
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	if h := r.HTTP; h != nil {
		for _, m := range []struct {
			title string
			m     *bench.HTTPMode
		}{{"HTTP JSON: dispatch + return of the final output (µs)", h.JSON}, {"HTTP SSE: dispatch + return (µs)", h.SSE}} {
			if m.m == nil || m.m.Switchyard == nil || m.m.Floor == nil {
				continue
			}
			p, err := cdfPlot(m.title, m.m.Switchyard.Overhead, &m.m.Floor.Overhead)
			if err != nil {
				return err
			}
			plots = append(plots, p)
		}
	}
	if len(r.Sweep) > 0 {
		p, err := sweepPlot(r.Sweep)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return drawPlots(path, Title(r), plots)
}

// drawPlots writes plots one above the other under title to a PNG at path.
func drawPlots(path, title string, plots []*plot.Plot) error {
	if len(plots) == 0 {
		return fmt.Errorf("bench: chart: %w", bench.ErrNoSamples)
	}
	const w, h, header = 7 * vg.Inch, 4 * vg.Inch, 14 * vg.Millimeter
	img := vgimg.New(w, h*vg.Length(len(plots))+header)
	full := draw.New(img)
	full.SetColor(color.White)
	full.Fill(full.Rectangle.Path())
	sty := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 10), XAlign: draw.XCenter,
		YAlign: draw.YTop, Handler: plot.DefaultTextHandler}
	full.FillText(sty, vg.Point{X: w / 2, Y: full.Max.Y - 2*vg.Millimeter}, title)
	dc := draw.Crop(full, 0, 0, 0, -header)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2}
	for i, p := range plots {
		p.Draw(tiles.At(dc, 0, i))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: chart: %w", err)
	}
	return f.Close()
}

// Title names the run a chart shows, two lines: the configuration (engines,
// load, transport, layout, client), then the machine and the date.
func Title(r *bench.Report) string {
	c := r.Config
	var load string
	switch {
	case c.Inflight > 0:
		load = fmt.Sprintf("%d requests in flight", c.Inflight)
	case len(c.Sweep) > 0:
		var rates []string
		for _, x := range c.Sweep {
			rates = append(rates, bench.FormatRate(x))
		}
		load = "sweep " + strings.Join(rates, ", ") + " req/s"
	case c.Rate > 0:
		load = bench.FormatRate(c.Rate) + " req/s open loop"
	default:
		load = fmt.Sprintf("closed loop, %d in flight", c.Concurrency)
	}
	engines := fmt.Sprintf("%d engines", c.Engines)
	if c.Mode == bench.ModeTarget {
		engines = "target " + c.Target
	}
	layout := c.VLLMLayout
	if layout == "" {
		layout = "newest"
	}
	line1 := fmt.Sprintf("switchyard bench: %s, %s, %s, layout %s, %s client, %d+%d tokens, step %v",
		engines, load, c.Transport, layout, c.Client, c.PromptTokens, c.OutputTokens, c.StepTime)
	if k := c.KV; k != nil {
		// Short enough for the chart's width with ", last of N runs" after it.
		line1 = fmt.Sprintf("switchyard bench --workload %s: %d engines, caches %g of the working set, prefill %v/token",
			k.Workload.Kind, c.Engines, k.CacheShare, k.PrefillPerToken)
	}
	if r.Runs > 1 {
		line1 += fmt.Sprintf(", last of %d runs", r.Runs)
	}
	m := r.Machine
	cpu := m.CPUModel
	if cpu == "" {
		cpu = m.GOARCH
	}
	line2 := fmt.Sprintf("%s, %d CPUs (GOMAXPROCS %d), %s %s", cpu, m.CPUs, m.GOMAXPROCS, m.GOOS, m.GoVersion)
	if m.Hostname != "" {
		line2 += ", " + m.Hostname
	}
	if !r.StartedAt.IsZero() {
		line2 += ", " + r.StartedAt.UTC().Format("2006-01-02 15:04 UTC")
	}
	return line1 + "\n" + line2
}

func baseOf(r *bench.Report, get func(*bench.Phase) bench.Summary) *bench.Summary {
	if r.Baseline == nil {
		return nil
	}
	s := get(r.Baseline)
	return &s
}

// percentileTicks label the 1/(1-q) axis with the percentiles people quote.
type percentileTicks struct{}

func (percentileTicks) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for _, q := range []float64{0, 0.5, 0.9, 0.99, 0.999, 0.9999} {
		x := 1 / (1 - q)
		if x < min || x > max*1.0001 {
			continue
		}
		ts = append(ts, plot.Tick{Value: x, Label: fmt.Sprintf("%g%%", q*100)})
	}
	return ts
}

func cdfXYs(s bench.Summary) plotter.XYs {
	var xys plotter.XYs
	for _, p := range s.CDF {
		if p.Quantile >= 1 { // 1/(1-q) is infinite: the max is in the table
			continue
		}
		xys = append(xys, plotter.XY{X: 1 / (1 - p.Quantile), Y: p.ValueUS})
	}
	return xys
}

// percentilePlot is an empty latency-by-percentile plot: both axes logarithmic, as
// latency spans decades between the median and the tail.
func percentilePlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "µs"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = percentileTicks{}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	return p
}

func cdfPlot(title string, sw bench.Summary, base *bench.Summary) (*plot.Plot, error) {
	p := percentilePlot(title + " by percentile")
	p.Legend.Top = true
	p.Legend.Left = true
	add := func(name string, s bench.Summary, c color.Color) error {
		xys := cdfXYs(s)
		if len(xys) == 0 {
			return nil
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return fmt.Errorf("bench: chart: %w", err)
		}
		l.Color = c
		l.Width = vg.Points(2)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (p50 %s, p99 %s)", name, bench.FormatFigure(s.P50US), bench.FormatFigure(s.P99US)), l)
		return nil
	}
	if err := add("switchyard", sw, colSwitchyard); err != nil {
		return nil, err
	}
	if base != nil {
		if err := add("relay baseline", *base, colBaseline); err != nil {
			return nil, err
		}
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

func sweepPlot(pts []bench.SweepPoint) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "dispatch + return latency vs throughput"
	p.X.Label.Text = "achieved requests/s"
	p.Y.Label.Text = "µs"
	p.Legend.Top = true
	p.Legend.Left = true
	series := []struct {
		name  string
		phase func(bench.SweepPoint) *bench.Phase
		q     func(*bench.Phase) float64
		c     color.Color
		dash  bool
	}{
		{"switchyard p50", func(s bench.SweepPoint) *bench.Phase { return s.Switchyard }, func(ph *bench.Phase) float64 { return ph.Overhead.P50US }, colSwitchyard, false},
		{"switchyard p99", func(s bench.SweepPoint) *bench.Phase { return s.Switchyard }, func(ph *bench.Phase) float64 { return ph.Overhead.P99US }, colSwitchyard, true},
		{"relay p50", func(s bench.SweepPoint) *bench.Phase { return s.Baseline }, func(ph *bench.Phase) float64 { return ph.Overhead.P50US }, colBaseline, false},
		{"relay p99", func(s bench.SweepPoint) *bench.Phase { return s.Baseline }, func(ph *bench.Phase) float64 { return ph.Overhead.P99US }, colBaseline, true},
	}
	for _, s := range series {
		var xys plotter.XYs
		for _, pt := range pts {
			ph := s.phase(pt)
			if ph == nil || ph.Requests == 0 || math.IsNaN(s.q(ph)) {
				continue
			}
			xys = append(xys, plotter.XY{X: ph.RequestsPerS, Y: s.q(ph)})
		}
		if len(xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("bench: chart: %w", err)
		}
		l.Color, sc.Color = s.c, s.c
		l.Width = vg.Points(2)
		if s.dash {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}
