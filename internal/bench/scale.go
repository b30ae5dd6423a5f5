package bench

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"
)

// The scale sweeps (`switchyard bench --scale`): how switchyard's cost grows with the
// number of engines, of streams in flight, of prompt tokens and of client
// connections. Every point runs the relay and switchyard under the same load, one
// after the other, so each point is a ratio to the floor measured in the same run.

// Scale sweep names, in the order they run.
const (
	ScaleEngines = "engines"
	ScaleStreams = "streams"
	ScalePrompt  = "prompt"
	ScaleClients = "clients"
)

// ScaleSweeps are the sweeps `--scale all` runs.
var ScaleSweeps = []string{ScaleEngines, ScaleStreams, ScalePrompt, ScaleClients}

// ScaleConfig chooses the sweeps and their points; the rest of the run's shape (rate,
// engines of the sweeps that do not vary them, prompt and output tokens, step time,
// warm-up and duration per phase) is the Config around it.
type ScaleConfig struct {
	Sweeps  []string `json:"sweeps"`
	Engines []int    `json:"engines,omitempty"` // engine ranks
	Streams []int    `json:"streams,omitempty"` // streams held in flight while the load runs
	Prompt  []int    `json:"prompt,omitempty"`  // prompt tokens
	Clients []int    `json:"clients,omitempty"` // client connections the load is spread over
	// PromptRate is the prompt sweep's open-loop rate, and PromptTokenRate its cap
	// in prompt tokens per second: a point runs at the lower of PromptRate and
	// PromptTokenRate over its prompt length, so the long prompts measure the cost
	// of a token rather than how a machine shared by the client, the engines and
	// the servers queues when it cannot decode them all.
	PromptRate      float64 `json:"prompt_rate"`
	PromptTokenRate float64 `json:"prompt_token_rate"`
	// HTTP adds the HTTP path to the prompt sweep: switchyard's /v1/completions with
	// token ids against the HTTP floor, whose body decoding is encoding/json.
	HTTP  bool `json:"http"`
	Quick bool `json:"quick,omitempty"`
}

// DefaultScale is the full sweep; quick is the few-second one the tests run.
func DefaultScale(quick bool) *ScaleConfig {
	if quick {
		return &ScaleConfig{Sweeps: slices.Clone(ScaleSweeps), Engines: []int{1, 8}, Streams: []int{1, 2000},
			Prompt: []int{16, 2048}, Clients: []int{1, 16}, PromptRate: 500, PromptTokenRate: 1e6, HTTP: true, Quick: true}
	}
	return &ScaleConfig{Sweeps: slices.Clone(ScaleSweeps),
		Engines:    []int{1, 2, 4, 8, 16, 32, 64},
		Streams:    []int{1, 10, 100, 1000, 10_000, 100_000},
		Prompt:     []int{16, 128, 1024, 4096, 16_384, 32_768},
		Clients:    []int{1, 10, 100, 300, 1000},
		PromptRate: 500, PromptTokenRate: 1e6, HTTP: true}
}

// ScaleShape sets the per-point load of the sweeps on cfg: an open loop of 2,000
// requests/s over 8 engines, 32 prompt tokens, and 8 output tokens in one step with no
// step time, so every request is one ADD and (nearly always) one engine message at
// every point: batching does not change with the point, and a cost per request is a
// cost per ADD plus one output. Quick: 1,000 requests/s, 100 ms warm-up, 300 ms.
func ScaleShape(cfg *Config, quick bool) {
	cfg.Rate, cfg.Engines, cfg.PromptTokens, cfg.OutputTokens = 2000, 8, 32, 8
	cfg.TokensPerStep, cfg.StepTime = 8, 0
	cfg.Warmup, cfg.Duration = time.Second, 3*time.Second
	if quick {
		cfg.Rate, cfg.Warmup, cfg.Duration = 1000, 100*time.Millisecond, 300*time.Millisecond
	}
}

func (s *ScaleConfig) points(sweep string) []int {
	switch sweep {
	case ScaleEngines:
		return s.Engines
	case ScaleStreams:
		return s.Streams
	case ScalePrompt:
		return s.Prompt
	case ScaleClients:
		return s.Clients
	}
	return nil
}

func (c *Config) validateScale() error {
	s := c.Scale
	bad := func(field, why string) error { return &ConfigError{Field: "scale." + field, Msg: why} }
	if c.Mode != ModeEmbedded || c.EnginesAsProcesses || c.HTTP || c.Inflight > 0 || c.KV != nil || len(c.Sweep) > 0 {
		return bad("sweeps", "need the embedded mode with in-process engines, on its own (no --http, --inflight, --sweep or --workload)")
	}
	if c.Rate <= 0 || s.PromptRate <= 0 || s.PromptTokenRate <= 0 {
		return bad("rate", "the sweeps run an open loop: the rate must be positive")
	}
	if len(s.Sweeps) == 0 {
		return bad("sweeps", "name at least one of "+fmt.Sprint(ScaleSweeps))
	}
	limits := map[string][2]int{ScaleEngines: {1, 256}, ScaleStreams: {0, 1_000_000}, ScalePrompt: {2, 1 << 20}, ScaleClients: {1, 4096}}
	for _, name := range s.Sweeps {
		lim, ok := limits[name]
		if !ok {
			return bad("sweeps", fmt.Sprintf("unknown sweep %q: want %v", name, ScaleSweeps))
		}
		pts := s.points(name)
		if len(pts) == 0 {
			return bad(name, "no points")
		}
		for _, x := range pts {
			if x < lim[0] || x > lim[1] {
				return bad(name, fmt.Sprintf("point %d outside %d..%d", x, lim[0], lim[1]))
			}
		}
	}
	return nil
}

// ScaleReport is every sweep's points (Report.Scale).
type ScaleReport struct {
	Sweeps []ScaleSweep `json:"sweeps"`
}

// ScaleSweep is one sweep: its points in order and how its costs grew.
type ScaleSweep struct {
	Name   string       `json:"name"`
	Rate   float64      `json:"rate"` // offered requests/s (the prompt sweep's highest; each point has its own)
	Points []ScalePoint `json:"points"`
	// Unit names PerUnit: what one point's cost is divided by.
	Unit string `json:"unit"`
	// Growth exponents: the log-log slope of CPU per request over the points, for
	// switchyard's phase, the relay's, and their difference (the frontend's own).
	// 0 is flat, 1 linear in the point; only positive figures are fitted.
	SwitchyardCPUGrowth float64 `json:"switchyard_cpu_growth"`
	BaselineCPUGrowth   float64 `json:"baseline_cpu_growth"`
	FrontendCPUGrowth   float64 `json:"frontend_cpu_growth"`
}

// ScalePoint is one point of a sweep: switchyard and the relay under the same load.
type ScalePoint struct {
	X          int     `json:"x"`
	Rate       float64 `json:"rate"` // offered requests/s
	Switchyard *Phase  `json:"switchyard"`
	Baseline   *Phase  `json:"baseline"`
	// CPURatio is switchyard's process CPU per request over the relay phase's (both
	// hold the client and the engines); OverheadRatio the dispatch+return latency's.
	CPURatio      float64 `json:"cpu_ratio"`
	OverheadRatio *Ratio  `json:"overhead_ratio,omitempty"`
	// The frontend's own cost per request: switchyard's phase minus the relay's.
	FrontendCPUUSPerRequest      float64 `json:"frontend_cpu_us_per_request"`
	FrontendAllocsPerRequest     float64 `json:"frontend_allocs_per_request"`
	FrontendBytesAllocPerRequest float64 `json:"frontend_bytes_alloc_per_request"`
	// EngineMessagesPerRequest: output messages the engines wrote per request
	// (switchyard's phase, parked streams excluded); the relay's is beside it.
	EngineMessagesPerRequest         float64 `json:"engine_messages_per_request"`
	BaselineEngineMessagesPerRequest float64 `json:"baseline_engine_messages_per_request"`
	// PerUnit is the point's cost per unit of its own work (ScaleSweep.Unit).
	PerUnit float64 `json:"per_unit"`
	// Memory (streams sweep): live heap per parked stream.
	Memory *ScaleMemory `json:"memory,omitempty"`
	// HTTP (prompt sweep with ScaleConfig.HTTP): the same prompt over HTTP.
	HTTP *ScaleHTTP `json:"http,omitempty"`
}

// MinWeighedStreams is the fewest parked streams whose heap is reported: below it
// the collector's own noise (tens of kilobytes) over the count is larger than a stream.
const MinWeighedStreams = 1000

// ScaleMemory is the live heap each parked stream holds, after a full collection.
type ScaleMemory struct {
	SwitchyardHeapPerStream float64 `json:"switchyard_heap_bytes_per_stream"`
	BaselineHeapPerStream   float64 `json:"baseline_heap_bytes_per_stream"`
	FrontendBytesPerStream  float64 `json:"frontend_bytes_per_stream"`
}

// ScaleHTTP is a prompt point over HTTP: the HTTP floor and switchyard, JSON answers.
type ScaleHTTP struct {
	Floor         *Phase  `json:"floor"`
	Switchyard    *Phase  `json:"switchyard"`
	CPURatio      float64 `json:"cpu_ratio"`
	OverheadRatio *Ratio  `json:"overhead_ratio,omitempty"`
	// CPU per prompt token of the server process (the bench process when the servers
	// run in it): switchyard's, and switchyard's minus the floor's.
	SwitchyardCPUNSPerToken float64 `json:"switchyard_cpu_ns_per_token"`
	FrontendCPUNSPerToken   float64 `json:"frontend_cpu_ns_per_token"`
}

// RunScale runs cfg.Scale's sweeps, point by point, and returns the report.
func RunScale(ctx context.Context, cfg Config, opt Options) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Scale == nil {
		return nil, &ConfigError{Field: "scale", Msg: "no sweeps"}
	}
	opt = opt.withDefaults()
	r := &Report{Schema: SchemaVersion, StartedAt: time.Now().UTC(), Machine: ThisMachine(), Config: cfg}
	sr := &ScaleReport{}
	for _, name := range cfg.Scale.Sweeps {
		s, err := runScaleSweep(ctx, cfg, opt, name)
		if err != nil {
			return nil, fmt.Errorf("scale %s: %w", name, err)
		}
		sr.Sweeps = append(sr.Sweeps, *s)
	}
	r.Scale = sr
	return r, nil
}

func runScaleSweep(ctx context.Context, cfg Config, opt Options, name string) (*ScaleSweep, error) {
	sc := cfg.Scale
	s := &ScaleSweep{Name: name, Rate: cfg.Rate, Unit: scaleUnits[name]}
	if name == ScalePrompt {
		s.Rate = sc.PromptRate
	}
	for i, x := range sc.points(name) {
		c := cfg
		c.Seed = cfg.Seed + uint64(i)
		c.Rate = s.Rate
		if name == ScalePrompt {
			c.Rate = min(sc.PromptRate, sc.PromptTokenRate/float64(x))
		}
		sh := scaleRun{clients: 1}
		if cfg.Profile != "" {
			sh.profile = fmt.Sprintf("%s.%s-%d", cfg.Profile, name, x)
		}
		switch name {
		case ScaleEngines:
			c.Engines = x
		case ScaleStreams:
			sh.park = x
		case ScalePrompt:
			c.PromptTokens = x
		case ScaleClients:
			c.Clients, sh.clients = x, x
		}
		opt.linef("scale %s: point %d (%d of %d)", name, x, i+1, len(sc.points(name)))
		pt, err := runScalePoint(ctx, c, opt, sh)
		if err != nil {
			return nil, fmt.Errorf("point %d: %w", x, err)
		}
		if name == ScalePrompt && sc.HTTP {
			if pt.HTTP, err = runScaleHTTP(ctx, c, opt); err != nil {
				return nil, fmt.Errorf("point %d over HTTP: %w", x, err)
			}
		}
		pt.X, pt.Rate = x, c.Rate
		pt.PerUnit = perUnit(name, pt)
		s.Points = append(s.Points, *pt)
	}
	s.SwitchyardCPUGrowth = growth(s.Points, func(p *ScalePoint) float64 { return p.Switchyard.CPUSecondsPer1kRequests })
	s.BaselineCPUGrowth = growth(s.Points, func(p *ScalePoint) float64 { return p.Baseline.CPUSecondsPer1kRequests })
	s.FrontendCPUGrowth = growth(s.Points, func(p *ScalePoint) float64 { return p.FrontendCPUUSPerRequest })
	return s, nil
}

// scaleUnits say what each sweep's PerUnit divides by.
var scaleUnits = map[string]string{
	ScaleEngines: "frontend µs CPU per request",
	ScaleStreams: "frontend bytes per stream in flight",
	ScalePrompt:  "frontend ns CPU per prompt token",
	ScaleClients: "frontend µs CPU per request",
}

func perUnit(sweep string, p *ScalePoint) float64 {
	switch sweep {
	case ScaleStreams:
		if p.Memory != nil {
			return p.Memory.FrontendBytesPerStream
		}
	case ScalePrompt:
		return p.FrontendCPUUSPerRequest * 1000 / float64(p.X)
	}
	return p.FrontendCPUUSPerRequest
}

// runScalePoint measures the relay, then switchyard, at one point.
func runScalePoint(ctx context.Context, c Config, opt Options, sh scaleRun) (*ScalePoint, error) {
	base, err := runScalePhase(ctx, c, opt, func(ctx context.Context) (system, error) { return startRelaySystem(ctx, c) }, sh)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	runtime.GC() // the next phase starts from a clean heap, not the relay's garbage
	sw, err := runScalePhase(ctx, c, opt, func(ctx context.Context) (system, error) { return startSystem(ctx, c) }, sh)
	if err != nil {
		return nil, fmt.Errorf("switchyard: %w", err)
	}
	runtime.GC()
	b, s := base.phase, sw.phase
	pt := &ScalePoint{Switchyard: s, Baseline: b, OverheadRatio: ratioOf(s, b),
		FrontendCPUUSPerRequest:          (s.CPUSecondsPer1kRequests - b.CPUSecondsPer1kRequests) * 1000,
		FrontendAllocsPerRequest:         s.AllocsPerRequest - b.AllocsPerRequest,
		FrontendBytesAllocPerRequest:     s.BytesAllocPerRequest - b.BytesAllocPerRequest,
		EngineMessagesPerRequest:         sw.messagesPerRequest,
		BaselineEngineMessagesPerRequest: base.messagesPerRequest,
	}
	if b.CPUSecondsPer1kRequests > 0 {
		pt.CPURatio = s.CPUSecondsPer1kRequests / b.CPUSecondsPer1kRequests
	}
	if sh.park >= MinWeighedStreams {
		pt.Memory = &ScaleMemory{SwitchyardHeapPerStream: sw.heapPerStream, BaselineHeapPerStream: base.heapPerStream,
			FrontendBytesPerStream: sw.heapPerStream - base.heapPerStream}
	}
	return pt, nil
}

// runScaleHTTP measures one prompt point over HTTP (JSON answers): the floor, then
// switchyard, each in a child process when Options.ServerCommand is set.
func runScaleHTTP(ctx context.Context, c Config, opt Options) (*ScaleHTTP, error) {
	c.HTTP, c.HTTPStream = true, false
	var ph [2]*Phase
	for i, kind := range []string{"floor", "switchyard"} {
		p, err := runScalePhase(ctx, c, opt, func(ctx context.Context) (system, error) {
			return startHTTPSystem(ctx, c, opt, kind, kind)
		}, scaleRun{clients: 1})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kind, err)
		}
		ph[i] = p.phase
		runtime.GC()
	}
	h := &ScaleHTTP{Floor: ph[0], Switchyard: ph[1], OverheadRatio: ratioOf(ph[1], ph[0])}
	if f := ph[0].CPUSecondsPer1kRequests; f > 0 {
		h.CPURatio = ph[1].CPUSecondsPer1kRequests / f
	}
	per := 1e6 / float64(c.PromptTokens) // CPU s per 1k requests -> ns per token
	h.SwitchyardCPUNSPerToken = ph[1].CPUSecondsPer1kRequests * per
	h.FrontendCPUNSPerToken = (ph[1].CPUSecondsPer1kRequests - ph[0].CPUSecondsPer1kRequests) * per
	return h, nil
}

// growth is the least-squares slope of log(f) over log(x) across the points where
// f is positive: 0 when the cost per request stays flat, 1 when it grows as the
// point does. NaN-free: fewer than two usable points give 0.
func growth(pts []ScalePoint, f func(*ScalePoint) float64) float64 {
	var xs, ys []float64
	for i := range pts {
		p := &pts[i]
		if p.Switchyard == nil || p.Baseline == nil || p.X <= 0 {
			continue
		}
		if v := f(p); v > 0 {
			xs, ys = append(xs, math.Log(float64(p.X))), append(ys, math.Log(v))
		}
	}
	if len(xs) < 2 {
		return 0
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/float64(len(xs)), my/float64(len(xs))
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}
