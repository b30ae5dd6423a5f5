package main

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/bench"
	"github.com/switchyard-llm/switchyard/internal/server"
)

// pdFlags are serve's prefill/decode disaggregation flags. The decode
// engines are the ones of --handshake-address (or the bootstrapped or built-in
// ones); prefill engines join their own handshake address with their own
// data-parallel size, named as vLLM names the decode side's. They are bound to p.
func pdFlags(p *server.PDConfig) []cli.Flag {
	const cat = "prefill/decode disaggregation"
	return []cli.Flag{
		&cli.StringFlag{Name: "prefill-handshake-address", Destination: &p.PrefillHandshakeAddress, Category: cat,
			Usage: "tcp://HOST:PORT bound for the prefill engines' HELLO/READY handshake (their --data-parallel-address/--data-parallel-rpc-port); " +
				"the engines of --handshake-address are then the decode engines, and each request is prefilled on a prefill engine and decoded on a decode engine",
			Sources: cli.EnvVars("SWITCHYARD_PREFILL_HANDSHAKE_ADDRESS")},
		&cli.IntFlag{Name: "prefill-data-parallel-size", Destination: &p.PrefillDataParallelSize, Category: cat, Value: 1,
			Usage:   "number of prefill engine ranks (their own data-parallel group, ranks 0..N-1)",
			Sources: cli.EnvVars("SWITCHYARD_PREFILL_DATA_PARALLEL_SIZE")},
		&cli.StringFlag{Name: "prefill-input-address", Destination: &p.PrefillInputAddress, Category: cat,
			Usage:   "bootstrapped prefill engines: the input address a launcher gave them (bound as one ROUTER); needs --prefill-output-address",
			Sources: cli.EnvVars("SWITCHYARD_PREFILL_INPUT_ADDRESS")},
		&cli.StringFlag{Name: "prefill-output-address", Destination: &p.PrefillOutputAddress, Category: cat,
			Usage:   "bootstrapped prefill engines: their output address (bound as one PULL)",
			Sources: cli.EnvVars("SWITCHYARD_PREFILL_OUTPUT_ADDRESS")},
		&cli.IntFlag{Name: "prefill-data-parallel-start-rank", Destination: &p.PrefillStartRank, Category: cat,
			Usage:   "bootstrapped prefill engines: the first prefill rank that registers",
			Sources: cli.EnvVars("SWITCHYARD_PREFILL_DATA_PARALLEL_START_RANK")},
		&cli.IntFlag{Name: "prefill-data-parallel-size-local", Destination: &p.PrefillLocalRanks, Category: cat,
			Usage:   "bootstrapped prefill engines: how many ranks from the start rank register; 0 = the rest",
			Sources: cli.EnvVars("SWITCHYARD_PREFILL_DATA_PARALLEL_SIZE_LOCAL")},
		&cli.IntFlag{Name: "mock-prefill-engines", Destination: &p.MockPrefillEngines, Category: cat,
			Usage:   "built-in prefill mock engines beside the built-in (decode) --mock-engines",
			Sources: cli.EnvVars("SWITCHYARD_MOCK_PREFILL_ENGINES")},
		&cli.IntFlag{Name: "pd-min-prompt-tokens", Destination: &p.MinPromptTokens, Category: cat,
			Usage:   "prompts shorter than this are prefilled by their decode engine (a plain ADD, no transfer); 0 = every prompt goes to a prefill engine",
			Sources: cli.EnvVars("SWITCHYARD_PD_MIN_PROMPT_TOKENS")},
		&cli.FloatFlag{Name: "pd-prefill-busy-threshold", Destination: &p.PrefillBusyThreshold, Category: cat,
			Usage:   "when every prefill engine has at least this many requests in flight or queued, the decode engine prefills; 0 = never",
			Sources: cli.EnvVars("SWITCHYARD_PD_PREFILL_BUSY_THRESHOLD")},
		&cli.IntFlag{Name: "pd-max-prefill-attempts", Destination: &p.MaxPrefillAttempts, Category: cat, Value: 2,
			Usage:   "prefill engines one request tries (one dies or refuses: the next) before its decode engine prefills it",
			Sources: cli.EnvVars("SWITCHYARD_PD_MAX_PREFILL_ATTEMPTS")},
		&cli.StringFlag{Name: "kv-connector", Destination: &p.KVConnector, Category: cat, Value: "MooncakeConnector",
			Usage:   "the KV connector named in the --kv-transfer-config serve prints for each role",
			Sources: cli.EnvVars("SWITCHYARD_KV_CONNECTOR")},
	}
}

// pdBenchFlags are `switchyard bench --pd`'s own flags; --duration, --concurrency,
// --prompt-tokens, --output-tokens and --step-time are shared with the main mode.
func pdBenchFlags(o *benchOptions) []cli.Flag {
	const cat = "prefill/decode (--pd)"
	return []cli.Flag{
		&cli.BoolFlag{Name: "pd", Destination: &o.pd, Category: cat, Usage: "P/D mode: the handoff overhead of switchyard's pairing against the proxy design's two HTTP hops (bench/README.md)"},
		&cli.IntFlag{Name: "pd-decode-engines", Destination: &o.pdDecode, Category: cat, Value: 2, Usage: "decode mock engines"},
		&cli.IntFlag{Name: "pd-prefill-engines", Destination: &o.pdPrefill, Category: cat, Value: 1, Usage: "prefill mock engines"},
	}
}

func runPDBench(ctx context.Context, o *benchOptions) error {
	c := &o.cfg
	cfg := bench.PDConfig{
		Decode: o.pdDecode, Prefill: o.pdPrefill,
		Concurrency: c.Concurrency, Duration: c.Duration,
		PromptTokens: c.PromptTokens, OutputTokens: c.OutputTokens,
		StepTime: c.StepTime,
	}
	if cfg.StepTime <= 0 {
		cfg.StepTime = time.Millisecond // the mock engines need a step
	}
	r, err := bench.RunPD(ctx, cfg)
	if err != nil {
		return err
	}
	bench.WritePD(os.Stdout, r)
	if path := o.json; path != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(path, b, 0o644)
	}
	return nil
}
