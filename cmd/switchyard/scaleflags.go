package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/bench"
)

// scaleOptions are what the scale sweeps' flags are bound to.
type scaleOptions struct {
	sweeps, engines, streams, prompt, clients string
	quick                                     bool
	promptRate, promptTokenRate               float64
}

// scaleBenchFlags are `bench --scale`'s flags (docs/benchmarks.md, "How cost grows").
// --rate, --engines, --prompt-tokens, --output-tokens, --tokens-per-step, --step-time,
// --warmup, --duration and --transport apply to every point, with the sweeps' shape
// unless set.
func scaleBenchFlags(o *benchOptions) []cli.Flag {
	const cat = "scale sweeps"
	s := &o.scale
	return []cli.Flag{
		&cli.StringFlag{Name: "scale", Destination: &s.sweeps, Category: cat,
			Usage: "run the scale sweeps, comma-separated, or all: " + strings.Join(bench.ScaleSweeps, ",") +
				"; each point runs the relay then switchyard under one open-loop load (unless set: --rate 2000 --engines 8 --prompt-tokens 32 " +
				"--output-tokens 8 --tokens-per-step 8 --step-time 0 --warmup 1s --duration 3s)"},
		&cli.BoolFlag{Name: "scale-quick", Destination: &s.quick, Category: cat,
			Usage: "two points per sweep and 0.4 s phases at 1,000 req/s: a check that runs in seconds, not a measurement"},
		&cli.StringFlag{Name: "scale-engines", Destination: &s.engines, Category: cat, DefaultText: "1,2,4,8,16,32,64", Usage: "the engines sweep's engine counts"},
		&cli.StringFlag{Name: "scale-streams", Destination: &s.streams, Category: cat, DefaultText: "1,10,100,1000,10000,100000",
			Usage: "the streams sweep's streams held in flight (the engines hold them without stepping) while the load runs"},
		&cli.StringFlag{Name: "scale-prompt", Destination: &s.prompt, Category: cat, DefaultText: "16,128,1024,4096,16384,32768", Usage: "the prompt sweep's prompt lengths in tokens"},
		&cli.StringFlag{Name: "scale-clients", Destination: &s.clients, Category: cat, DefaultText: "1,10,100,300,1000", Usage: "the clients sweep's client connections"},
		&cli.FloatFlag{Name: "scale-prompt-rate", Destination: &s.promptRate, Category: cat, Value: 500,
			Usage: "the prompt sweep's open-loop rate, capped by --scale-prompt-token-rate; the sweep also runs each point over HTTP"},
		&cli.FloatFlag{Name: "scale-prompt-token-rate", Destination: &s.promptTokenRate, Category: cat, Value: 1e6,
			Usage: "the prompt sweep's cap in prompt tokens/s: each point runs at the lower of --scale-prompt-rate and this over its length, " +
				"so the long prompts measure a token's cost, not a saturated machine"},
	}
}

// scaleConfig reads the scale flags over the sweeps' defaults.
func (o *benchOptions) scaleConfig() (bench.Config, error) {
	s := &o.scale
	cfg, c := o.cfg, &o.cfg
	cfg.Baseline = true
	def := bench.DefaultConfig()
	shape := def
	bench.ScaleShape(&shape, s.quick)
	set := func(dest any, f func()) {
		if !o.isSet(dest) {
			f()
		}
	}
	set(&c.Rate, func() { cfg.Rate = shape.Rate })
	set(&c.Engines, func() { cfg.Engines = shape.Engines })
	set(&c.PromptTokens, func() { cfg.PromptTokens = shape.PromptTokens })
	set(&c.OutputTokens, func() { cfg.OutputTokens = shape.OutputTokens })
	set(&c.TokensPerStep, func() { cfg.TokensPerStep = shape.TokensPerStep })
	set(&c.StepTime, func() { cfg.StepTime = shape.StepTime })
	set(&c.Warmup, func() { cfg.Warmup = shape.Warmup })
	set(&c.Duration, func() { cfg.Duration = shape.Duration })
	sc := bench.DefaultScale(s.quick)
	sc.PromptRate, sc.PromptTokenRate = s.promptRate, s.promptTokenRate
	if s.sweeps != "all" && s.sweeps != "" {
		sc.Sweeps = nil
		for name := range strings.SplitSeq(s.sweeps, ",") {
			if name = strings.TrimSpace(name); name != "" && !slices.Contains(sc.Sweeps, name) {
				sc.Sweeps = append(sc.Sweeps, name)
			}
		}
	}
	for _, f := range []struct {
		flag, val string
		dest      *[]int
	}{{"scale-engines", s.engines, &sc.Engines}, {"scale-streams", s.streams, &sc.Streams},
		{"scale-prompt", s.prompt, &sc.Prompt}, {"scale-clients", s.clients, &sc.Clients}} {
		if f.val == "" {
			continue
		}
		pts, err := intList(f.val)
		if err != nil {
			return cfg, fmt.Errorf("--%s: %w", f.flag, err)
		}
		*f.dest = pts
	}
	cfg.Scale = sc
	for _, f := range []struct {
		name string
		dest any
	}{{"http", &o.http}, {"inflight", &c.Inflight}, {"sweep", &o.sweep}, {"target", &o.target}, {"workload", &o.workload},
		{"engines-as-processes", &c.EnginesAsProcesses}, {"baseline-vs-baseline", &c.BaselineVsBaseline}, {"no-baseline", &o.noBaseline},
		{"repeat", &c.Repeat}, {"relay-work", &c.RelayWork}, {"requests", &c.Requests}} {
		if o.isSet(f.dest) {
			return cfg, fmt.Errorf("--%s does not apply to --scale (every point runs the relay and switchyard once, in process)", f.name)
		}
	}
	return cfg, nil
}

func intList(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// runScaleBench is `bench --scale`: the sweeps, then the table, --json and --png.
func runScaleBench(ctx context.Context, cmd *cli.Command, o *benchOptions) error {
	if cmd.Args().Len() > 0 {
		return fmt.Errorf("bench takes no arguments (got %q)", cmd.Args().Slice())
	}
	cfg, err := o.scaleConfig()
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	opt := bench.Options{Logger: newLogger(cmd, os.Stderr)}
	if !o.quiet {
		opt.Lines = bench.LinesTo(os.Stderr)
		if opt.Lines == nil { // a terminal: the plain lines say which point is running
			opt.Lines = os.Stderr
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--scale: %w", err)
	}
	opt.ServerCommand = []string{exe, "bench", "http-server"}
	start := time.Now()
	rep, err := bench.RunScale(ctx, cfg, opt)
	if err != nil {
		return err
	}
	if err := bench.PrintScaleTable(os.Stdout, rep); err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "\n%d sweeps in %s\n", len(rep.Scale.Sweeps), time.Since(start).Round(time.Second))
	if p := o.json; p != "" {
		if err := rep.WriteJSON(p); err != nil {
			return err
		}
	}
	if p := o.png; p != "" {
		return writePNG(p, rep)
	}
	return nil
}
