package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/bench"
	"github.com/switchyard-llm/switchyard/wire"
)

// benchCommand is `switchyard bench`: the dispatch-latency benchmark (bench/README.md).
// It runs the relay baseline and switchyard under the same load in one run and states
// the overhead as a ratio; `bench engine` is the child a run starts per engine with
// --engines-as-processes.
func benchCommand() *cli.Command {
	def := bench.DefaultConfig()
	return &cli.Command{
		Name:  "bench",
		Usage: "measure dispatch latency against a relay baseline in the same run",
		Description: "With no --target, runs an in-process switchyard with --engines bench engines, and a\n" +
			"minimal ZeroMQ relay with the same engines and load as the baseline; prints a table and\n" +
			"writes --json (every figure and the configuration) and --png (latency CDFs).\n" +
			"--compare A.json B.json prints the change between two runs instead.",
		Flags: append([]cli.Flag{
			&cli.DurationFlag{Name: "duration", Value: def.Duration, Usage: "measured phase length (after --warmup)"},
			&cli.IntFlag{Name: "requests", Usage: "stop after this many measured requests instead of --duration"},
			&cli.DurationFlag{Name: "warmup", Value: def.Warmup, Usage: "requests submitted in this first stretch are not measured"},
			&cli.StringFlag{Name: "json", Usage: "write the report (every figure and the configuration) to this file"},
			&cli.StringFlag{Name: "png", Usage: "write the chart (latency CDFs, and the sweep's latency vs throughput) to this file"},
			&cli.StringSliceFlag{Name: "compare", Usage: "print the change between two reports: --compare A.json B.json (or --compare A.json --compare B.json, or A.json,B.json)"},
			&cli.BoolFlag{Name: "all", Usage: "with --compare, list unchanged figures too"},
			&cli.IntFlag{Name: "repeat", Value: 1, Usage: "run the whole measurement N times; targets are judged met or missed only over N >= 2 runs"},

			&cli.IntFlag{Name: "engines", Value: def.Engines, Category: "engines", Usage: "bench engine ranks"},
			&cli.BoolFlag{Name: "engines-as-processes", Category: "engines", Usage: "run each engine as a child process (timestamps: wall clock, one host)"},
			&cli.StringFlag{Name: "transport", Value: def.Transport, Category: "engines", Usage: "ipc or tcp between the frontend/relay and the engines (and the client)"},
			&cli.IntFlag{Name: "tokens-per-step", Value: def.TokensPerStep, Category: "engines", Usage: "tokens per running request per engine step"},
			&cli.DurationFlag{Name: "step-time", Value: def.StepTime, Category: "engines", Usage: "engine step interval (0: as fast as the engine loop goes)"},
			&cli.StringFlag{Name: "vllm-layout", Value: "newest", Category: "engines",
				Usage: "the vLLM wire layout the bench engines speak (" + strings.Join(wire.LayoutNames(), ", ") + "); switchyard translates, the relay's client speaks it"},

			&cli.FloatFlag{Name: "rate", Value: def.Rate, Category: "load", Usage: "open loop: Poisson arrivals at this many requests/s (0: closed loop)"},
			&cli.IntFlag{Name: "concurrency", Value: def.Concurrency, Category: "load", Usage: "closed loop (--rate 0): requests kept in flight"},
			&cli.StringFlag{Name: "sweep", Category: "load", Usage: "comma-separated open-loop rates to run in turn (throughput vs latency curve)"},
			&cli.IntFlag{Name: "clients", Value: def.Clients, Category: "load", Usage: "client connections"},
			&cli.StringFlag{Name: "client", Value: def.Client, Category: "load", Usage: "embedded switchyard driven through zmq (msgpack client protocol, like the relay) or go (in-process dispatcher API)"},
			&cli.IntFlag{Name: "prompt-tokens", Value: def.PromptTokens, Category: "load", Usage: "prompt length in tokens"},
			&cli.IntFlag{Name: "output-tokens", Value: def.OutputTokens, Category: "load", Usage: "max_tokens of every request"},
			&cli.Uint64Flag{Name: "seed", Value: def.Seed, Category: "load", Usage: "seed of the arrival schedule"},
			&cli.BoolFlag{Name: "no-baseline", Category: "load", Usage: "skip the relay baseline (no overhead ratio)"},
			&cli.DurationFlag{Name: "relay-work", Category: "load", Usage: "calibration: the relay spends this much CPU on every message it forwards, each way, to show what a given CPU cost per message does to latency on this machine (latency targets are then not judged)"},
			&cli.BoolFlag{Name: "baseline-vs-baseline", Category: "load", Usage: "calibration (A/A): the baseline (the relay, or with --http the HTTP floor) is measured again in switchyard's place, so the ratio and the targets' verdicts show what this machine's noise alone does to them"},
			&cli.IntFlag{Name: "inflight", Category: "load", Usage: "memory scenario: hold this many requests in flight and report frontend bytes per request"},

			&cli.StringFlag{Name: "target", Category: "target", Usage: "a running frontend: http://HOST:PORT or tcp://HOST:PORT (msgpack client protocol)"},
			&cli.StringFlag{Name: "engines-to", Category: "target", Usage: "with --target: connect the bench's engines to this handshake address (a serve started with --handshake-address)"},
			&cli.IntFlag{Name: "target-pid", Category: "target", Usage: "with --target: the frontend's pid, whose CPU and RSS are reported"},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the switchyard phase (go tool pprof) to FILE and the allocation profile to FILE.allocs"},
			&cli.StringFlag{Name: "trace", Usage: "write a runtime trace of the first 2 s of each phase to FILE.relay and FILE.switchyard (with --http: the bench process as FILE.floor-json, FILE.switchyard-json, ..., and each server's measured window as FILE.server.floor-json, ...) (go tool trace; -pprof=sched shows where requests waited for a CPU)"},
			&cli.BoolFlag{Name: "http", Usage: "the HTTP comparison: switchyard's HTTP API against an HTTP floor, JSON then SSE, each server in a child process " +
				"(defaults unless set: --engines 2 --step-time 2ms --rate 0 --concurrency 64 --prompt-tokens 100 --output-tokens 16 --duration 5s --warmup 1s)"},
			&cli.BoolFlag{Name: "quiet", Usage: "no progress: neither the bar (stderr a terminal) nor the plain line per phase (otherwise)"},
		}, append(pdBenchFlags(), kvBenchFlags()...)...),
		Action:   runBench,
		Commands: []*cli.Command{benchEngineCommand(), benchHTTPServerCommand()},
	}
}

func runBench(ctx context.Context, cmd *cli.Command) error {
	if files := cmd.StringSlice("compare"); len(files) > 0 {
		// `--compare A.json B.json`, as the READMEs write it: B.json is a positional
		// argument to the flag parser.
		return runCompare(cmd, append(files, cmd.Args().Slice()...))
	}
	if cmd.Bool("pd") {
		return runPDBench(ctx, cmd)
	}
	if cmd.String("workload") != "" && cmd.String("workload") != "dispatch" {
		return runKVBench(ctx, cmd)
	}
	if cmd.Args().Len() > 0 {
		return fmt.Errorf("bench takes no arguments (got %q); to compare two reports: --compare A.json B.json", cmd.Args().Slice())
	}
	cfg := bench.DefaultConfig()
	cfg.Duration = cmd.Duration("duration")
	cfg.Requests = cmd.Int("requests")
	cfg.Warmup = cmd.Duration("warmup")
	cfg.Engines = cmd.Int("engines")
	cfg.EnginesAsProcesses = cmd.Bool("engines-as-processes")
	cfg.Transport = cmd.String("transport")
	cfg.TokensPerStep = cmd.Int("tokens-per-step")
	cfg.StepTime = cmd.Duration("step-time")
	cfg.VLLMLayout = cmd.String("vllm-layout")
	cfg.Rate = cmd.Float("rate")
	cfg.Concurrency = cmd.Int("concurrency")
	cfg.Clients = cmd.Int("clients")
	cfg.Client = cmd.String("client")
	cfg.PromptTokens = cmd.Int("prompt-tokens")
	cfg.OutputTokens = cmd.Int("output-tokens")
	cfg.Seed = cmd.Uint64("seed")
	cfg.Baseline = !cmd.Bool("no-baseline")
	cfg.RelayWork = cmd.Duration("relay-work")
	cfg.BaselineVsBaseline = cmd.Bool("baseline-vs-baseline")
	cfg.Inflight = cmd.Int("inflight")
	cfg.Profile = cmd.String("cpuprofile")
	cfg.Trace = cmd.String("trace")
	cfg.Repeat = cmd.Int("repeat")
	if s := cmd.String("sweep"); s != "" {
		for f := range strings.SplitSeq(s, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return fmt.Errorf("--sweep: %q is not a rate", f)
			}
			cfg.Sweep = append(cfg.Sweep, r)
		}
	}
	if cmd.Bool("http") {
		cfg.HTTP = true
		httpDefaults(cmd, &cfg)
	}
	if t := cmd.String("target"); t != "" {
		cfg.Mode = bench.ModeTarget
		cfg.Target = t
		cfg.EnginesTo = cmd.String("engines-to")
		cfg.TargetPID = cmd.Int("target-pid")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	opt := bench.Options{Logger: newLogger(cmd, os.Stderr)}
	if !cmd.Bool("quiet") {
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
	return writeBenchReport(cmd, rep)
}

// writeBenchReport prints rep's table and writes --json and --png.
func writeBenchReport(cmd *cli.Command, rep *bench.Report) error {
	if err := bench.PrintTable(os.Stdout, rep); err != nil {
		return err
	}
	if p := cmd.String("json"); p != "" {
		if err := rep.WriteJSON(p); err != nil {
			return err
		}
	}
	if p := cmd.String("png"); p != "" {
		if err := writePNG(p, rep); err != nil {
			return err
		}
	}
	return nil
}

func runCompare(cmd *cli.Command, files []string) error {
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
	return bench.PrintCompare(w, names[0], names[1], a, b, cmd.Bool("all"))
}

// benchEngineCommand is the child process of --engines-as-processes: one bench engine
// that writes what it noted to --records when SIGTERM ends it.
func benchEngineCommand() *cli.Command {
	return &cli.Command{
		Name:   "engine",
		Usage:  "one bench engine (started by `switchyard bench --engines-as-processes`)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "handshake-address", Required: true},
			&cli.IntFlag{Name: "data-parallel-rank"},
			&cli.IntFlag{Name: "tokens-per-step", Value: 1},
			&cli.DurationFlag{Name: "step-time", Value: time.Millisecond},
			&cli.StringFlag{Name: "records", Required: true},
			&cli.StringFlag{Name: "vllm-layout", Value: "newest"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			recs, err := bench.RunEngine(ctx, bench.EngineConfig{
				Rank:          cmd.Int("data-parallel-rank"),
				Handshake:     cmd.String("handshake-address"),
				TokensPerStep: cmd.Int("tokens-per-step"),
				StepTime:      cmd.Duration("step-time"),
				Layout:        wire.BuiltinLayout(cmd.String("vllm-layout")),
			})
			if werr := bench.WriteRecords(cmd.String("records"), recs); err == nil {
				err = werr
			}
			return err
		},
	}
}

// httpDefaults gives --http the shape of its targets' measurement for every flag the
// command line left unset.
func httpDefaults(cmd *cli.Command, cfg *bench.Config) {
	set := func(name string, f func()) {
		if !cmd.IsSet(name) {
			f()
		}
	}
	set("engines", func() { cfg.Engines = 2 })
	set("step-time", func() { cfg.StepTime = 2 * time.Millisecond })
	set("rate", func() { cfg.Rate = 0 })
	set("concurrency", func() { cfg.Concurrency = 64 })
	set("prompt-tokens", func() { cfg.PromptTokens = 100 })
	set("output-tokens", func() { cfg.OutputTokens = 16 })
	set("duration", func() { cfg.Duration = 5 * time.Second })
	set("warmup", func() { cfg.Warmup = time.Second })
}

// benchHTTPServerCommand is the child process of --http: the HTTP floor or switchyard
// in a process of its own, so its CPU and allocations are measured alone.
func benchHTTPServerCommand() *cli.Command {
	return &cli.Command{
		Name:   "http-server",
		Usage:  "one HTTP server of the --http comparison (started by `switchyard bench --http`)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "system", Required: true},
			&cli.IntFlag{Name: "engines", Value: 2},
			&cli.StringFlag{Name: "transport", Value: "ipc"},
			&cli.StringFlag{Name: "vllm-layout"},
			&cli.StringFlag{Name: "cpuprofile"},
			&cli.StringFlag{Name: "memprofile"},
			&cli.StringFlag{Name: "trace"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg := bench.DefaultConfig()
			cfg.Engines = cmd.Int("engines")
			cfg.Transport = cmd.String("transport")
			if l := cmd.String("vllm-layout"); l != "newest" {
				cfg.VLLMLayout = l
			}
			return bench.RunHTTPServer(ctx, bench.HTTPServerConfig{System: cmd.String("system"), Bench: cfg,
				CPUProfile: cmd.String("cpuprofile"), MemProfile: cmd.String("memprofile"), Trace: cmd.String("trace")}, os.Stdout)
		},
	}
}

// kvBenchFlags are the cache-aware routing workloads' flags (bench/README.md, "kv
// workloads"). --engines, --rate, --output-tokens, --requests, --seed, --step-time
// and --tokens-per-step apply too, with the workload's defaults unless set.
func kvBenchFlags() []cli.Flag {
	const cat = "kv workloads"
	mt := bench.DefaultKVBench(bench.WorkloadMultiTurn)
	return []cli.Flag{
		&cli.StringFlag{Name: "workload", Category: cat, Usage: "multi-turn or shared-prefix: replay a seeded workload of shared prompt prefixes " +
			"against each --lb-policy on mock engines with prefix caches, and report hit ratio, TTFT and balance per policy (default, or dispatch: the dispatch-latency bench)"},
		&cli.StringFlag{Name: "lb-policy", Category: cat, Value: strings.Join(bench.DefaultKVPolicies, ","),
			Usage: "comma-separated policies to run the workload against, each with a fresh switchyard and fresh engines"},
		&cli.IntFlag{Name: "conversations", Category: cat, DefaultText: "by workload", Usage: "multi-turn: conversations (default 32); shared-prefix: requests (default 256, or --requests)"},
		&cli.IntFlag{Name: "turns", Category: cat, Value: mt.Workload.Turns, Usage: "multi-turn: turns per conversation"},
		&cli.IntFlag{Name: "prefixes", Category: cat, DefaultText: "by workload", Usage: "shared system prompts (multi-turn, default 4) or shared prefixes (shared-prefix, default 16)"},
		&cli.IntFlag{Name: "prefix-tokens", Category: cat, DefaultText: "by workload", Usage: "length of each shared prefix (default 512 multi-turn, 1024 shared-prefix)"},
		&cli.IntFlag{Name: "first-tokens", Category: cat, DefaultText: "by workload", Usage: "multi-turn: each conversation's own first message (default 2048); shared-prefix: each request's own suffix (default 64)"},
		&cli.IntFlag{Name: "user-tokens", Category: cat, Value: mt.Workload.UserTokens, Usage: "multi-turn: each later user message"},
		&cli.DurationFlag{Name: "think-time", Category: cat, Value: mt.Workload.Think, Usage: "multi-turn: mean pause between an answer and the next turn (exponential)"},
		&cli.FloatFlag{Name: "cache-share", Category: cat, Value: mt.CacheShare, Usage: "each engine's prefix cache holds this share of the workload's working set"},
		&cli.DurationFlag{Name: "prefill-per-token", Category: cat, Value: mt.PrefillPerToken, Usage: "mock engines' prefill time per uncached prompt token (serialised per engine)"},
	}
}

// runKVBench is `bench --workload multi-turn|shared-prefix`.
func runKVBench(ctx context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() > 0 {
		return fmt.Errorf("bench takes no arguments (got %q)", cmd.Args().Slice())
	}
	cfg, err := kvBenchConfig(cmd)
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
	return writeBenchReport(cmd, rep)
}

// kvBenchConfig reads the kv flags over the workload's defaults: a flag the
// command line left unset takes the workload's value, not the latency bench's.
func kvBenchConfig(cmd *cli.Command) (bench.Config, error) {
	kind := cmd.String("workload")
	cfg := bench.DefaultConfig()
	cfg.KV = bench.DefaultKVBench(kind)
	cfg.Engines = 4
	cfg.StepTime, cfg.TokensPerStep = time.Millisecond, 1
	cfg.Repeat = cmd.Int("repeat")
	wl := &cfg.KV.Workload
	set := func(name string, f func()) {
		if cmd.IsSet(name) {
			f()
		}
	}
	set("engines", func() { cfg.Engines = cmd.Int("engines") })
	set("transport", func() { cfg.Transport = cmd.String("transport") })
	set("step-time", func() { cfg.StepTime = cmd.Duration("step-time") })
	set("tokens-per-step", func() { cfg.TokensPerStep = cmd.Int("tokens-per-step") })
	set("seed", func() { wl.Seed = cmd.Uint64("seed") })
	set("rate", func() { wl.Rate = cmd.Float("rate") })
	set("output-tokens", func() { wl.AnswerTokens = cmd.Int("output-tokens") })
	set("requests", func() { wl.Conversations = cmd.Int("requests") })
	set("conversations", func() { wl.Conversations = cmd.Int("conversations") })
	set("turns", func() { wl.Turns = cmd.Int("turns") })
	set("prefixes", func() { wl.Prefixes = cmd.Int("prefixes") })
	set("prefix-tokens", func() { wl.PrefixTokens = cmd.Int("prefix-tokens") })
	set("first-tokens", func() { wl.FirstTokens = cmd.Int("first-tokens") })
	set("user-tokens", func() { wl.UserTokens = cmd.Int("user-tokens") })
	set("think-time", func() { wl.Think = cmd.Duration("think-time") })
	set("cache-share", func() { cfg.KV.CacheShare = cmd.Float("cache-share") })
	set("prefill-per-token", func() { cfg.KV.PrefillPerToken = cmd.Duration("prefill-per-token") })
	var pols []string
	for p := range strings.SplitSeq(cmd.String("lb-policy"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			pols = append(pols, p)
		}
	}
	cfg.KV.Policies = pols
	for _, name := range []string{"http", "inflight", "sweep", "target", "engines-as-processes", "baseline-vs-baseline", "duration"} {
		if cmd.IsSet(name) {
			return cfg, fmt.Errorf("--%s does not apply to --workload %s (a fixed set of requests on its own engines)", name, kind)
		}
	}
	return cfg, nil
}
