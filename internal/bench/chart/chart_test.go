package chart

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/bench"
)

// sample is a latency report with two sweep points: enough for every plot.
func sample() *bench.Report {
	mk := func(name string, p50, p99 float64) *bench.Phase {
		h := bench.NewHist()
		for i := range 97 {
			h.Record(time.Duration(p50*1000) + time.Duration(i))
		}
		for range 3 {
			h.Record(time.Duration(p99 * 1000))
		}
		s := h.Summarize()
		return &bench.Phase{Name: name, Requests: 100, Seconds: 1, RequestsPerS: 100, OutputTokensPerS: 800,
			Dispatch: s, Return: s, Overhead: s, TTFT: s, ITL: s, E2E: s, PerRank: []int64{50, 50}}
	}
	r := &bench.Report{Schema: bench.SchemaVersion, StartedAt: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC),
		Machine: bench.Machine{GOOS: "linux", GOARCH: "amd64", CPUs: 2}, Config: bench.DefaultConfig(),
		Switchyard: mk("switchyard", 120, 300), Baseline: mk("relay", 100, 200)}
	r.Sweep = []bench.SweepPoint{
		{OfferedRate: 1000, Switchyard: r.Switchyard, Baseline: r.Baseline},
		{OfferedRate: 2000, Switchyard: r.Switchyard, Baseline: r.Baseline},
	}
	return r
}

func isPNG(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("chart is not a PNG (%d bytes)", len(b))
	}
}

func TestLatencyChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.png")
	if err := WritePNG(path, sample()); err != nil {
		t.Fatal(err)
	}
	isPNG(t, path)
}

// A kv run draws TTFT, hit ratio and balance per policy.
func TestKVChart(t *testing.T) {
	r := sample()
	r.Sweep = nil
	ttft := r.Switchyard.TTFT
	r.KV = map[string]*bench.KVPolicy{
		"least-loaded": {Policy: "least-loaded", Requests: 100, HitRatio: 0.2, OracleHitRatio: 0.8, TTFT: ttft, RequestsPerEngine: []int64{50, 50}, MaxOverMean: 1},
		"kv":           {Policy: "kv", Requests: 100, HitRatio: 0.7, OracleHitRatio: 0.8, TTFT: ttft, RequestsPerEngine: []int64{60, 40}, MaxOverMean: 1.2},
	}
	path := filepath.Join(t.TempDir(), "kv.png")
	if err := WritePNG(path, r); err != nil {
		t.Fatal(err)
	}
	isPNG(t, path)
}

// The chart names its run: engines, rate, transport, layout, machine, date, drawn
// in a band above the plots.
func TestChartTitle(t *testing.T) {
	r := sample()
	r.Config.Engines, r.Config.Rate, r.Config.Transport, r.Config.VLLMLayout = 8, 5000, "ipc", "v0.18"
	r.Machine.CPUModel, r.Machine.Hostname = "Test CPU 9000", "benchhost"
	title := Title(r)
	for _, want := range []string{"8 engines", "5,000 req/s open loop", "ipc", "layout v0.18", "Test CPU 9000", "2 CPUs", "benchhost", "2026-11-29 00:00 UTC"} {
		if !strings.Contains(title, want) {
			t.Errorf("title lacks %q: %s", want, title)
		}
	}
	r.Config.Rate, r.Config.Concurrency = 0, 64
	if !strings.Contains(Title(r), "closed loop, 64 in flight") {
		t.Errorf("closed-loop title: %s", Title(r))
	}
	r.Config.Sweep = []float64{1000, 2500.5}
	if !strings.Contains(Title(r), "sweep 1,000, 2500.5 req/s") {
		t.Errorf("sweep title: %s", Title(r))
	}

	path := filepath.Join(t.TempDir(), "c.png")
	if err := WritePNG(path, r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	// The band above the first plot (whose own title sits lower) has dark text.
	b := img.Bounds()
	dark := 0
	for y := b.Min.Y; y < b.Min.Y+30; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); r+g+bl < 3*0x8000 {
				dark++
			}
		}
	}
	if dark < 50 {
		t.Errorf("%d dark pixels in the title band: no title drawn", dark)
	}
}
