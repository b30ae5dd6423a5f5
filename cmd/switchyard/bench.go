package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/bench"
	"github.com/switchyard-llm/switchyard/wire"
)

// benchCommand is `switchyard bench`: the dispatch-latency benchmark (bench/README.md).
// It runs the relay baseline and switchyard under the same load in one run and states
// the overhead as a ratio; `bench engine` is the child a run starts per engine with
// --engines-as-processes.
func benchCommand() *cli.Command {
	o := &benchOptions{cfg: bench.DefaultConfig(), kv: *bench.DefaultKVBench(bench.WorkloadMultiTurn)}
	c, def := &o.cfg, bench.DefaultConfig()
	flags := append([]cli.Flag{
		&cli.DurationFlag{Name: "duration", Destination: &c.Duration, Value: def.Duration, Usage: "measured phase length (after --warmup)"},
		&cli.IntFlag{Name: "requests", Destination: &c.Requests, Usage: "stop after this many measured requests instead of --duration"},
		&cli.DurationFlag{Name: "warmup", Destination: &c.Warmup, Value: def.Warmup, Usage: "requests submitted in this first stretch are not measured"},
		&cli.StringFlag{Name: "json", Destination: &o.json, Usage: "write the report (every figure and the configuration) to this file"},
		&cli.StringFlag{Name: "png", Destination: &o.png, Usage: "write the chart (latency CDFs, and the sweep's latency vs throughput) to this file"},
		&cli.StringSliceFlag{Name: "compare", Destination: &o.compare, Usage: "print the change between two reports: --compare A.json B.json (or --compare A.json --compare B.json, or A.json,B.json)"},
		&cli.BoolFlag{Name: "all", Destination: &o.all, Usage: "with --compare, list unchanged figures too"},
		&cli.IntFlag{Name: "repeat", Destination: &c.Repeat, Value: 1, Usage: "run the whole measurement N times; targets are judged met or missed only over N >= 2 runs"},

		&cli.IntFlag{Name: "engines", Destination: &c.Engines, Value: def.Engines, Category: "engines", Usage: "bench engine ranks"},
		&cli.BoolFlag{Name: "engines-as-processes", Destination: &c.EnginesAsProcesses, Category: "engines", Usage: "run each engine as a child process (timestamps: wall clock, one host)"},
		&cli.StringFlag{Name: "transport", Destination: &c.Transport, Value: def.Transport, Category: "engines", Usage: "ipc or tcp between the frontend/relay and the engines (and the client)"},
		&cli.IntFlag{Name: "tokens-per-step", Destination: &c.TokensPerStep, Value: def.TokensPerStep, Category: "engines", Usage: "tokens per running request per engine step"},
		&cli.DurationFlag{Name: "step-time", Destination: &c.StepTime, Value: def.StepTime, Category: "engines", Usage: "engine step interval (0: as fast as the engine loop goes)"},
		&cli.StringFlag{Name: "vllm-layout", Destination: &c.VLLMLayout, Value: "newest", Category: "engines",
			Usage: "the vLLM wire layout the bench engines speak (" + strings.Join(wire.LayoutNames(), ", ") + "); switchyard translates, the relay's client speaks it"},

		&cli.FloatFlag{Name: "rate", Destination: &c.Rate, Value: def.Rate, Category: "load", Usage: "open loop: Poisson arrivals at this many requests/s (0: closed loop)"},
		&cli.IntFlag{Name: "concurrency", Destination: &c.Concurrency, Value: def.Concurrency, Category: "load", Usage: "closed loop (--rate 0): requests kept in flight"},
		&cli.StringFlag{Name: "sweep", Destination: &o.sweep, Category: "load", Usage: "comma-separated open-loop rates to run in turn (throughput vs latency curve)"},
		&cli.IntFlag{Name: "clients", Destination: &c.Clients, Value: def.Clients, Category: "load", Usage: "client connections"},
		&cli.StringFlag{Name: "client", Destination: &c.Client, Value: def.Client, Category: "load", Usage: "embedded switchyard driven through zmq (msgpack client protocol, like the relay) or go (in-process dispatcher API)"},
		&cli.IntFlag{Name: "prompt-tokens", Destination: &c.PromptTokens, Value: def.PromptTokens, Category: "load", Usage: "prompt length in tokens"},
		&cli.IntFlag{Name: "output-tokens", Destination: &c.OutputTokens, Value: def.OutputTokens, Category: "load", Usage: "max_tokens of every request"},
		&cli.Uint64Flag{Name: "seed", Destination: &c.Seed, Value: def.Seed, Category: "load", Usage: "seed of the arrival schedule"},
		&cli.BoolFlag{Name: "no-baseline", Destination: &o.noBaseline, Category: "load", Usage: "skip the relay baseline (no overhead ratio)"},
		&cli.DurationFlag{Name: "relay-work", Destination: &c.RelayWork, Category: "load", Usage: "calibration: the relay spends this much CPU on every message it forwards, each way, to show what a given CPU cost per message does to latency on this machine (latency targets are then not judged)"},
		&cli.BoolFlag{Name: "baseline-vs-baseline", Destination: &c.BaselineVsBaseline, Category: "load", Usage: "calibration (A/A): the baseline (the relay, or with --http the HTTP floor) is measured again in switchyard's place, so the ratio and the targets' verdicts show what this machine's noise alone does to them"},
		&cli.StringFlag{Name: "switchyard-policy", Destination: &c.Policy, Category: "load", Usage: "the embedded switchyard's --lb-policy: least-loaded, power-of-two or round-robin " +
			"(default: least-loaded; with --http round-robin, the floor's routing: in a closed loop the policy decides which requests an engine steps together)"},
		&cli.IntFlag{Name: "inflight", Destination: &c.Inflight, Category: "load", Usage: "memory scenario: hold this many requests in flight and report frontend bytes per request"},

		&cli.StringFlag{Name: "target", Destination: &o.target, Category: "target", Usage: "a running frontend: http://HOST:PORT or tcp://HOST:PORT (msgpack client protocol)"},
		&cli.StringFlag{Name: "engines-to", Destination: &o.enginesTo, Category: "target", Usage: "with --target: connect the bench's engines to this handshake address (a serve started with --handshake-address)"},
		&cli.IntFlag{Name: "target-pid", Destination: &o.targetPID, Category: "target", Usage: "with --target: the frontend's pid, whose CPU and RSS are reported"},
		&cli.StringFlag{Name: "cpuprofile", Destination: &c.Profile, Usage: "write a CPU profile of the switchyard phase (go tool pprof) to FILE and the allocation profile to FILE.allocs"},
		&cli.StringFlag{Name: "trace", Destination: &c.Trace, Usage: "write a runtime trace of the first 2 s of each phase to FILE.relay and FILE.switchyard (with --http: the bench process as FILE.floor-json, FILE.switchyard-json, ..., and each server's measured window as FILE.server.floor-json, ...) (go tool trace; -pprof=sched shows where requests waited for a CPU)"},
		&cli.BoolFlag{Name: "http", Destination: &o.http, Usage: "the HTTP comparison: switchyard's HTTP API against an HTTP floor, JSON then SSE, each server in a child process " +
			"(defaults unless set: --engines 2 --step-time 2ms --rate 0 --concurrency 64 --prompt-tokens 100 --output-tokens 16 --duration 5s --warmup 1s --switchyard-policy round-robin)"},
		&cli.BoolFlag{Name: "quiet", Destination: &o.quiet, Usage: "no progress: neither the bar (stderr a terminal) nor the plain line per phase (otherwise)"},
	}, append(append(pdBenchFlags(o), kvBenchFlags(o)...), scaleBenchFlags(o)...)...)
	o.index(flags)
	return &cli.Command{
		Name:  "bench",
		Usage: "measure dispatch latency against a relay baseline in the same run",
		Description: "With no --target, runs an in-process switchyard with --engines bench engines, and a\n" +
			"minimal ZeroMQ relay with the same engines and load as the baseline; prints a table and\n" +
			"writes --json (every figure and the configuration) and --png (latency CDFs).\n" +
			"--compare A.json B.json prints the change between two runs instead.",
		Flags:    flags,
		Action:   func(ctx context.Context, cmd *cli.Command) error { return runBench(ctx, cmd, o) },
		Commands: []*cli.Command{benchEngineCommand(), benchHTTPServerCommand()},
	}
}

// benchOptions holds what bench's flags are bound to: the run's Config, the kv
// workloads' settings, and the flags that choose the mode.
type benchOptions struct {
	cfg                                                   bench.Config
	kv                                                    bench.KVBenchConfig
	json, png, sweep, target, enginesTo, workload, lbPols string
	compare                                               []string
	all, noBaseline, http, quiet, pd                      bool
	targetPID, pdDecode, pdPrefill                        int
	scale                                                 scaleOptions
	// flags finds a flag by its destination, for "unless set" defaults.
	flags map[any]interface{ IsSet() bool }
}

// index notes each flag under its destination.
func (o *benchOptions) index(flags []cli.Flag) {
	o.flags = map[any]interface{ IsSet() bool }{}
	for _, f := range flags {
		var dest any
		switch f := f.(type) {
		case *cli.IntFlag:
			dest = f.Destination
		case *cli.Uint64Flag:
			dest = f.Destination
		case *cli.FloatFlag:
			dest = f.Destination
		case *cli.DurationFlag:
			dest = f.Destination
		case *cli.StringFlag:
			dest = f.Destination
		case *cli.BoolFlag:
			dest = f.Destination
		case *cli.StringSliceFlag:
			dest = f.Destination
		}
		if s, ok := f.(interface{ IsSet() bool }); ok && dest != nil {
			o.flags[dest] = s
		}
	}
}

// isSet says whether the flag bound to dest was given (command line or environment).
func (o *benchOptions) isSet(dest any) bool {
	f, ok := o.flags[dest]
	return ok && f.IsSet()
}

func runBench(ctx context.Context, cmd *cli.Command, o *benchOptions) error {
	if len(o.compare) > 0 {
		// `--compare A.json B.json`, as the READMEs write it: B.json is a positional
		// argument to the flag parser.
		return runCompare(cmd, append(o.compare, cmd.Args().Slice()...), o.all)
	}
	if o.pd {
		return runPDBench(ctx, o)
	}
	if o.scale.sweeps != "" || o.scale.quick {
		return runScaleBench(ctx, cmd, o)
	}
	if o.workload == "embed" {
		return runEmbedBench(ctx, cmd, o)
	}
	if o.workload != "" && o.workload != "dispatch" {
		return runKVBench(ctx, cmd, o)
	}
	if cmd.Args().Len() > 0 {
		return fmt.Errorf("bench takes no arguments (got %q); to compare two reports: --compare A.json B.json", cmd.Args().Slice())
	}
	cfg := o.cfg
	cfg.Baseline = !o.noBaseline
	if o.sweep != "" {
		for f := range strings.SplitSeq(o.sweep, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return fmt.Errorf("--sweep: %q is not a rate", f)
			}
			cfg.Sweep = append(cfg.Sweep, r)
		}
	}
	if o.http {
		cfg.HTTP = true
		o.httpDefaults(&cfg)
	}
	if o.target != "" {
		cfg.Mode = bench.ModeTarget
		cfg.Target = o.target
		cfg.EnginesTo = o.enginesTo
		cfg.TargetPID = o.targetPID
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	opt := bench.Options{Logger: newLogger(cmd, os.Stderr)}
	if !o.quiet {
		opt.Progress = bench.ProgressTo(os.Stderr) // nil unless stderr is a terminal
		opt.Lines = bench.LinesTo(os.Stderr)       // a plain line per phase otherwise
	}
	if cfg.EnginesAsProcesses {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("--engines-as-processes: %w", err)
		}
		opt.EngineCommand = []string{exe, "bench", "engine"}
	}
	if cfg.HTTP {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("--http: %w", err)
		}
		opt.ServerCommand = []string{exe, "bench", "http-server"}
	}
	rep, err := bench.Run(ctx, cfg, opt)
	if err != nil {
		return err
	}
	return writeBenchReport(rep, o)
}

// writeBenchReport prints rep's table and writes --json and --png.
func writeBenchReport(rep *bench.Report, o *benchOptions) error {
	if err := bench.PrintTable(os.Stdout, rep); err != nil {
		return err
	}
	if p := o.json; p != "" {
		if err := rep.WriteJSON(p); err != nil {
			return err
		}
	}
	if p := o.png; p != "" {
		if err := writePNG(p, rep); err != nil {
			return err
		}
	}
	return nil
}

func runCompare(cmd *cli.Command, files []string, all bool) error {
	var names []string
	for _, f := range files {
		names = append(names, strings.Split(f, ",")...)
	}
	if len(names) != 2 {
		return fmt.Errorf("--compare takes exactly two reports, A.json B.json; got %d (%q)", len(names), names)
	}
	a, err := bench.ReadReport(names[0])
	if err != nil {
		return err
	}
	b, err := bench.ReadReport(names[1])
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	if w == nil {
		w = os.Stdout
	}
	return bench.PrintCompare(w, names[0], names[1], a, b, all)
}

// benchEngineCommand is the child process of --engines-as-processes: one bench engine
// that writes what it noted to --records when SIGTERM ends it.
func benchEngineCommand() *cli.Command {
	var cfg bench.EngineConfig
	var records, layout string
	return &cli.Command{
		Name:   "engine",
		Usage:  "one bench engine (started by `switchyard bench --engines-as-processes`)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "handshake-address", Destination: &cfg.Handshake, Required: true},
			&cli.IntFlag{Name: "data-parallel-rank", Destination: &cfg.Rank},
			&cli.IntFlag{Name: "tokens-per-step", Destination: &cfg.TokensPerStep, Value: 1},
			&cli.DurationFlag{Name: "step-time", Destination: &cfg.StepTime, Value: time.Millisecond},
			&cli.StringFlag{Name: "records", Destination: &records, Required: true},
			&cli.StringFlag{Name: "vllm-layout", Destination: &layout, Value: "newest"},
		},
		Action: func(ctx context.Context, _ *cli.Command) error {
			cfg.Layout = wire.BuiltinLayout(layout)
			recs, err := bench.RunEngine(ctx, cfg)
			if werr := bench.WriteRecords(records, recs); err == nil {
				err = werr
			}
			return err
		},
	}
}

// httpDefaults gives --http the shape of its targets' measurement for every flag the
// command line left unset.
func (o *benchOptions) httpDefaults(cfg *bench.Config) {
	c := &o.cfg
	set := func(dest any, f func()) {
		if !o.isSet(dest) {
			f()
		}
	}
	set(&c.Engines, func() { cfg.Engines = 2 })
	set(&c.StepTime, func() { cfg.StepTime = 2 * time.Millisecond })
	set(&c.Rate, func() { cfg.Rate = 0 })
	set(&c.Concurrency, func() { cfg.Concurrency = 64 })
	set(&c.PromptTokens, func() { cfg.PromptTokens = 100 })
	set(&c.OutputTokens, func() { cfg.OutputTokens = 16 })
	set(&c.Duration, func() { cfg.Duration = 5 * time.Second })
	set(&c.Warmup, func() { cfg.Warmup = time.Second })
	set(&c.Policy, func() { cfg.Policy = dispatcher.PolicyRoundRobin })
}

// benchHTTPServerCommand is the child process of --http: the HTTP floor or switchyard
// in a process of its own, so its CPU and allocations are measured alone.
func benchHTTPServerCommand() *cli.Command {
	srv := bench.HTTPServerConfig{Bench: bench.DefaultConfig()}
	var layout string
	return &cli.Command{
		Name:   "http-server",
		Usage:  "one HTTP server of the --http comparison (started by `switchyard bench --http`)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "system", Destination: &srv.System, Required: true},
			&cli.IntFlag{Name: "engines", Destination: &srv.Bench.Engines, Value: 2},
			&cli.StringFlag{Name: "transport", Destination: &srv.Bench.Transport, Value: "ipc"},
			&cli.StringFlag{Name: "vllm-layout", Destination: &layout},
			&cli.StringFlag{Name: "lb-policy", Destination: &srv.Bench.Policy},
			&cli.StringFlag{Name: "cpuprofile", Destination: &srv.CPUProfile},
			&cli.StringFlag{Name: "memprofile", Destination: &srv.MemProfile},
			&cli.StringFlag{Name: "trace", Destination: &srv.Trace},
		},
		Action: func(ctx context.Context, _ *cli.Command) error {
			if layout != "newest" {
				srv.Bench.VLLMLayout = layout
			}
			return bench.RunHTTPServer(ctx, srv, os.Stdout)
		},
	}
}

// kvBenchFlags are the cache-aware routing workloads' flags (bench/README.md, "kv
// workloads"). --engines, --rate, --output-tokens, --requests, --seed, --step-time
// and --tokens-per-step apply too, with the workload's defaults unless set.
func kvBenchFlags(o *benchOptions) []cli.Flag {
	const cat = "kv workloads"
	mt := bench.DefaultKVBench(bench.WorkloadMultiTurn)
	return []cli.Flag{
		&cli.StringFlag{Name: "workload", Destination: &o.workload, Category: cat, Usage: "multi-turn or shared-prefix: replay a seeded workload of shared prompt prefixes " +
			"against each --lb-policy on mock engines with prefix caches, and report hit ratio, TTFT and balance per policy (default, or dispatch: the dispatch-latency bench); " +
			"embed: POST /v1/embeddings through switchyard against an embed floor, on mock pooling engines: requests/s and per-request overhead"},
		&cli.StringFlag{Name: "lb-policy", Destination: &o.lbPols, Category: cat, Value: strings.Join(bench.DefaultKVPolicies, ","),
			Usage: "comma-separated policies to run the workload against, each with a fresh switchyard and fresh engines"},
		&cli.IntFlag{Name: "conversations", Destination: &o.kv.Workload.Conversations, Category: cat, DefaultText: "by workload", Usage: "multi-turn: conversations (default 32); shared-prefix: requests (default 256, or --requests)"},
		&cli.IntFlag{Name: "turns", Destination: &o.kv.Workload.Turns, Category: cat, Value: mt.Workload.Turns, Usage: "multi-turn: turns per conversation"},
		&cli.IntFlag{Name: "prefixes", Destination: &o.kv.Workload.Prefixes, Category: cat, DefaultText: "by workload", Usage: "shared system prompts (multi-turn, default 4) or shared prefixes (shared-prefix, default 16)"},
		&cli.IntFlag{Name: "prefix-tokens", Destination: &o.kv.Workload.PrefixTokens, Category: cat, DefaultText: "by workload", Usage: "length of each shared prefix (default 512 multi-turn, 1024 shared-prefix)"},
		&cli.IntFlag{Name: "first-tokens", Destination: &o.kv.Workload.FirstTokens, Category: cat, DefaultText: "by workload", Usage: "multi-turn: each conversation's own first message (default 2048); shared-prefix: each request's own suffix (default 64)"},
		&cli.IntFlag{Name: "user-tokens", Destination: &o.kv.Workload.UserTokens, Category: cat, Value: mt.Workload.UserTokens, Usage: "multi-turn: each later user message"},
		&cli.DurationFlag{Name: "think-time", Destination: &o.kv.Workload.Think, Category: cat, Value: mt.Workload.Think, Usage: "multi-turn: mean pause between an answer and the next turn (exponential)"},
		&cli.FloatFlag{Name: "cache-share", Destination: &o.kv.CacheShare, Category: cat, Value: mt.CacheShare, Usage: "each engine's prefix cache holds this share of the workload's working set"},
		&cli.DurationFlag{Name: "prefill-per-token", Destination: &o.kv.PrefillPerToken, Category: cat, Value: mt.PrefillPerToken, Usage: "mock engines' prefill time per uncached prompt token (serialised per engine)"},
	}
}

// runKVBench is `bench --workload multi-turn|shared-prefix`.
func runKVBench(ctx context.Context, cmd *cli.Command, o *benchOptions) error {
	if cmd.Args().Len() > 0 {
		return fmt.Errorf("bench takes no arguments (got %q)", cmd.Args().Slice())
	}
	cfg, err := o.kvBenchConfig()
	if err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	rep, err := bench.Run(ctx, cfg, bench.Options{Logger: newLogger(cmd, os.Stderr)})
	if err != nil {
		return err
	}
	return writeBenchReport(rep, o)
}

// kvBenchConfig reads the kv flags over the workload's defaults: a flag the
// command line left unset takes the workload's value, not the latency bench's.
func (o *benchOptions) kvBenchConfig() (bench.Config, error) {
	kind := o.workload
	cfg := bench.DefaultConfig()
	cfg.KV = bench.DefaultKVBench(kind)
	cfg.Engines = 4
	cfg.StepTime, cfg.TokensPerStep = time.Millisecond, 1
	cfg.Repeat = o.cfg.Repeat
	wl, c, w := &cfg.KV.Workload, &o.cfg, &o.kv.Workload
	set := func(dest any, f func()) {
		if o.isSet(dest) {
			f()
		}
	}
	set(&c.Engines, func() { cfg.Engines = c.Engines })
	set(&c.Transport, func() { cfg.Transport = c.Transport })
	set(&c.StepTime, func() { cfg.StepTime = c.StepTime })
	set(&c.TokensPerStep, func() { cfg.TokensPerStep = c.TokensPerStep })
	set(&c.Seed, func() { wl.Seed = c.Seed })
	set(&c.Rate, func() { wl.Rate = c.Rate })
	set(&c.OutputTokens, func() { wl.AnswerTokens = c.OutputTokens })
	set(&c.Requests, func() { wl.Conversations = c.Requests })
	set(&w.Conversations, func() { wl.Conversations = w.Conversations })
	set(&w.Turns, func() { wl.Turns = w.Turns })
	set(&w.Prefixes, func() { wl.Prefixes = w.Prefixes })
	set(&w.PrefixTokens, func() { wl.PrefixTokens = w.PrefixTokens })
	set(&w.FirstTokens, func() { wl.FirstTokens = w.FirstTokens })
	set(&w.UserTokens, func() { wl.UserTokens = w.UserTokens })
	set(&w.Think, func() { wl.Think = w.Think })
	set(&o.kv.CacheShare, func() { cfg.KV.CacheShare = o.kv.CacheShare })
	set(&o.kv.PrefillPerToken, func() { cfg.KV.PrefillPerToken = o.kv.PrefillPerToken })
	var pols []string
	for p := range strings.SplitSeq(o.lbPols, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pols = append(pols, p)
		}
	}
	cfg.KV.Policies = pols
	for _, f := range []struct {
		name string
		dest any
	}{{"http", &o.http}, {"inflight", &c.Inflight}, {"sweep", &o.sweep}, {"target", &o.target},
		{"engines-as-processes", &c.EnginesAsProcesses}, {"baseline-vs-baseline", &c.BaselineVsBaseline}, {"duration", &c.Duration}} {
		if o.isSet(f.dest) {
			return cfg, fmt.Errorf("--%s does not apply to --workload %s (a fixed set of requests on its own engines)", f.name, kind)
		}
	}
	return cfg, nil
}
