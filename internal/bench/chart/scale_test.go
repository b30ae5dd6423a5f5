package chart

import (
	"path/filepath"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/bench"
)

// A scale run draws one panel per sweep, the prompt sweep's with the HTTP path.
func TestScaleChart(t *testing.T) {
	r := sample()
	sw, base := r.Switchyard, r.Baseline
	sw.CPUSecondsPer1kRequests, base.CPUSecondsPer1kRequests = 0.09, 0.07
	r.Sweep = nil
	r.Config.Scale = bench.DefaultScale(true)
	r.Scale = &bench.ScaleReport{}
	for _, name := range bench.ScaleSweeps {
		s := bench.ScaleSweep{Name: name, Rate: 2000, Unit: "µs"}
		for _, x := range []int{1, 10, 100} {
			pt := bench.ScalePoint{X: x, Switchyard: sw, Baseline: base, FrontendCPUUSPerRequest: 20}
			if name == bench.ScaleStreams {
				pt.Memory = &bench.ScaleMemory{SwitchyardHeapPerStream: 1200, BaselineHeapPerStream: 200, FrontendBytesPerStream: 1000}
			}
			if name == bench.ScalePrompt {
				pt.HTTP = &bench.ScaleHTTP{Floor: base, Switchyard: sw}
			}
			s.Points = append(s.Points, pt)
		}
		r.Scale.Sweeps = append(r.Scale.Sweeps, s)
	}
	path := filepath.Join(t.TempDir(), "scale.png")
	if err := WritePNG(path, r); err != nil {
		t.Fatal(err)
	}
	isPNG(t, path)
}
