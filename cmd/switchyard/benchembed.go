package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/bench"
)

// runEmbedBench is `switchyard bench --workload embed`: POST /v1/embeddings
// through switchyard against the embed floor, with in-process mock pooling engines.
// --engines, --clients, --prompt-tokens, --warmup, --duration, --step-time and
// --seed apply, with the workload's defaults unless set.
func runEmbedBench(ctx context.Context, cmd *cli.Command, o *benchOptions) error {
	cfg := bench.DefaultEmbedConfig()
	set := func(dest any) bool { return o.isSet(dest) }
	if set(&o.cfg.Engines) {
		cfg.Engines = o.cfg.Engines
	}
	if set(&o.cfg.Clients) {
		cfg.Clients = o.cfg.Clients
	}
	if set(&o.cfg.PromptTokens) {
		cfg.PromptTokens = o.cfg.PromptTokens
	}
	if set(&o.cfg.Warmup) {
		cfg.Warmup = o.cfg.Warmup
	}
	if set(&o.cfg.Duration) {
		cfg.Duration = o.cfg.Duration
	}
	if set(&o.cfg.StepTime) && o.cfg.StepTime > 0 {
		cfg.Step = o.cfg.StepTime
	}
	if set(&o.cfg.Seed) {
		cfg.Seed = o.cfg.Seed
	}
	rep, err := bench.RunEmbed(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprint(cmd.Root().Writer, rep.EmbedTable())
	if p := o.json; p != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}
