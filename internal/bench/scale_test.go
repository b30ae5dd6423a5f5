package bench

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// quickScale is the quick sweep with its shape, limited to the named sweeps.
func quickScale(sweeps ...string) Config {
	c := DefaultConfig()
	ScaleShape(&c, true)
	c.Scale = DefaultScale(true)
	c.Scale.Sweeps = sweeps
	return c
}

// The quick sweep of engines and streams: every phase serves its requests, and the
// claims that hold however loaded the machine is, since they count rather than
// time: allocations per request do not grow with the engines or with the streams
// in flight, a request costs an engine at most one message at every point, and a
// parked stream costs the frontend a bounded number of bytes.
func TestScaleQuickEnginesStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := quickScale(ScaleEngines, ScaleStreams)
	r, err := RunScale(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Scale == nil || len(r.Scale.Sweeps) != 2 {
		t.Fatalf("sweeps %+v, want engines and streams", r.Scale)
	}
	for _, s := range r.Scale.Sweeps {
		checkPointsServed(t, &s)
		first, last := &s.Points[0], &s.Points[len(s.Points)-1]
		// Allocations count objects, not time: the switchyard phase's per request
		// (client and engines included, the same code at every point) stays within
		// half again of the first point's.
		if a, b := first.Switchyard.AllocsPerRequest, last.Switchyard.AllocsPerRequest; b > 1.5*a+10 {
			t.Errorf("%s: switchyard allocations per request %.1f at %d against %.1f at %d: they grow with the %s",
				s.Name, b, last.X, a, first.X, s.Name)
		}
		for _, p := range s.Points {
			// Output in one step: at most one message per request, fewer when a
			// step carries several (one engine collects requests between steps).
			if m := p.EngineMessagesPerRequest; m <= 0 || m > 1.2 {
				t.Errorf("%s at %d: %.2f engine messages per request, want at most about 1 (output in one step)", s.Name, p.X, m)
			}
		}
		t.Logf("%s: allocs/req %.1f at %d, %.1f at %d; frontend CPU growth %.2f", s.Name,
			first.Switchyard.AllocsPerRequest, first.X, last.Switchyard.AllocsPerRequest, last.X, s.FrontendCPUGrowth)
	}
	streams := r.Scale.Sweeps[1]
	last := streams.Points[len(streams.Points)-1]
	if m := last.Memory; m == nil || m.FrontendBytesPerStream > 4096 || m.SwitchyardHeapPerStream <= 0 {
		t.Errorf("streams at %d: memory %+v, want a positive heap per stream and at most 4 KiB of it the frontend's", last.X, m)
	} else {
		t.Logf("streams at %d: switchyard %.0f B/stream, relay %.0f, frontend %.0f", last.X,
			m.SwitchyardHeapPerStream, m.BaselineHeapPerStream, m.FrontendBytesPerStream)
	}
	var out bytes.Buffer
	if err := PrintScaleTable(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"engines sweep", "streams sweep", "heap B/stream", "growth of CPU per request"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// The quick prompt and clients sweeps: every point served, over HTTP too, and the
// bytes a request allocates grow no faster than its prompt (the ADD is decoded and
// encoded once each way, not once per token).
func TestScaleQuickPromptClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := quickScale(ScalePrompt, ScaleClients)
	r, err := RunScale(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	prompt, clients := r.Scale.Sweeps[0], r.Scale.Sweeps[1]
	checkPointsServed(t, &prompt)
	checkPointsServed(t, &clients)
	a, b := &prompt.Points[0], &prompt.Points[len(prompt.Points)-1]
	tokens := float64(b.X - a.X)
	// A token is at most 9 bytes of msgpack and 8 of int64; each copy of the prompt
	// the frontend makes (decoded, encoded) is counted here, with room for buffers
	// that double as they grow.
	if per := (b.Switchyard.BytesAllocPerRequest - a.Switchyard.BytesAllocPerRequest) / tokens; per > 256 {
		t.Errorf("prompt: switchyard allocates %.0f more bytes per extra prompt token (%d to %d tokens)", per, a.X, b.X)
	}
	for _, p := range prompt.Points {
		if h := p.HTTP; h == nil || h.Switchyard.Requests == 0 || h.Floor.Requests == 0 || h.Switchyard.Failed+h.Floor.Failed > 0 {
			t.Errorf("prompt %d over HTTP: %+v, want both servers to answer every request", p.X, h)
		}
	}
	file := filepath.Join(t.TempDir(), "scale.json")
	if err := r.WriteJSON(file); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(file)
	if err != nil {
		t.Fatal(err)
	}
	if back.Scale == nil || len(back.Scale.Sweeps[1].Points) != len(clients.Points) || back.Config.Scale == nil {
		t.Errorf("the JSON lost the points or the sweep's configuration: %+v", back.Scale)
	}
	changes, err := Compare(r, back)
	if err != nil || len(changes) == 0 {
		t.Errorf("compare of a scale report with itself: %d figures, %v", len(changes), err)
	}
}

func checkPointsServed(t *testing.T, s *ScaleSweep) {
	t.Helper()
	if len(s.Points) < 2 {
		t.Fatalf("%s: %d points", s.Name, len(s.Points))
	}
	for _, p := range s.Points {
		for _, ph := range []*Phase{p.Baseline, p.Switchyard} {
			if ph == nil || ph.Requests == 0 || ph.Failed != 0 {
				t.Fatalf("%s at %d: phase %+v, want requests and no failures", s.Name, p.X, ph)
			}
		}
	}
}

func TestScaleValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"unknown sweep", func(c *Config) { c.Scale.Sweeps = []string{"tokens"} }},
		{"no points", func(c *Config) { c.Scale.Engines = nil }},
		{"too many engines", func(c *Config) { c.Scale.Engines = []int{1, 1000} }},
		{"closed loop", func(c *Config) { c.Rate = 0 }},
		{"with --http", func(c *Config) { c.HTTP = true }},
	} {
		c := quickScale(ScaleSweeps...)
		tc.edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	c := quickScale(ScaleSweeps...)
	if err := c.Validate(); err != nil {
		t.Errorf("the quick sweep: %v", err)
	}
}

func TestGrowth(t *testing.T) {
	pts := func(f func(x float64) float64) []ScalePoint {
		var ps []ScalePoint
		for _, x := range []int{1, 10, 100, 1000} {
			ps = append(ps, ScalePoint{X: x, Switchyard: &Phase{}, Baseline: &Phase{}, FrontendCPUUSPerRequest: f(float64(x))})
		}
		return ps
	}
	cpu := func(p *ScalePoint) float64 { return p.FrontendCPUUSPerRequest }
	for _, tc := range []struct {
		name string
		f    func(float64) float64
		want float64
	}{
		{"flat", func(float64) float64 { return 20 }, 0},
		{"linear", func(x float64) float64 { return 3 * x }, 1},
		{"quadratic", func(x float64) float64 { return x * x }, 2},
	} {
		if g := growth(pts(tc.f), cpu); g < tc.want-1e-9 || g > tc.want+1e-9 {
			t.Errorf("%s: growth %.3f, want %.0f", tc.name, g, tc.want)
		}
	}
	if g := growth(pts(func(float64) float64 { return -1 }), cpu); g != 0 {
		t.Errorf("no positive figures: growth %v, want 0", g)
	}
}
