package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/server"
)

// serveCommand is `switchyard serve`: the daemon. Flag names follow vLLM's where vLLM
// has one; every flag a deployment sets has a SWITCHYARD_* variable too.
func serveCommand() *cli.Command {
	def := server.DefaultConfig()
	return &cli.Command{
		Name:  "serve",
		Usage: "run the frontend: engines connect to it, clients send it requests",
		Description: "Engines connect to --handshake-address (start each rank with\n" +
			"  vllm serve MODEL --headless --data-parallel-address HOST --data-parallel-rpc-port PORT ...).\n" +
			"With no --handshake-address, serve starts --mock-engines built-in mock engine cores\n" +
			"over ipc, so `switchyard serve` alone answers curl at once.\n" +
			"SIGTERM or SIGINT: stop accepting, let in-flight requests finish for up to\n" +
			"--shutdown-timeout, abort the rest, close every socket, exit 0.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "handshake-address", Category: "engines",
				Usage:   "tcp://HOST:PORT bound for the engines' HELLO/READY handshake; empty starts built-in mock engines instead",
				Sources: cli.EnvVars("SWITCHYARD_HANDSHAKE_ADDRESS")},
			&cli.IntFlag{Name: "data-parallel-size", Category: "engines", Value: 1,
				Usage:   "number of engine ranks expected on --handshake-address (ranks 0..N-1)",
				Sources: cli.EnvVars("SWITCHYARD_DATA_PARALLEL_SIZE")},
			&cli.IntFlag{Name: "mock-engines", Category: "engines", Value: def.MockEngines,
				Usage:   "built-in mock engine cores started when --handshake-address is empty (ranks 0..N-1 over ipc)",
				Sources: cli.EnvVars("SWITCHYARD_MOCK_ENGINES")},
			&cli.StringFlag{Name: "engine-transport", Category: "engines", Value: def.EngineTransport,
				Usage:   "transport of the engine-facing input/output sockets: ipc (same host) or tcp",
				Sources: cli.EnvVars("SWITCHYARD_ENGINE_TRANSPORT")},
			&cli.StringFlag{Name: "engine-bind-host", Category: "engines", Value: def.EngineBindHost,
				Usage:   "with --engine-transport tcp: the host the engine input/output sockets bind and hand to engines; engines on other hosts must reach it",
				Sources: cli.EnvVars("SWITCHYARD_ENGINE_BIND_HOST")},
			&cli.FloatFlag{Name: "step-ms", Category: "mock engines", Value: durationMS(def.MockStep),
				Usage: "milliseconds between two steps of the built-in mock engines (fractions allowed)"},
			&cli.IntFlag{Name: "tokens-per-step", Category: "mock engines", Value: def.MockTokensPerStep,
				Usage: "tokens each built-in mock engine emits per request per step"},
			&cli.StringFlag{Name: "http-address", Category: "clients", Value: def.HTTPAddress,
				Usage:   "HOST:PORT of the HTTP API (/v1/completions, /v1/engines, /health, /metrics)",
				Sources: cli.EnvVars("SWITCHYARD_HTTP_ADDRESS")},
			&cli.StringFlag{Name: "client-address", Category: "clients", Value: def.ClientAddress,
				Usage:   "ZeroMQ ROUTER endpoint for msgpack clients (tcp:// or ipc://); empty disables it",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_ADDRESS")},
			&cli.DurationFlag{Name: "client-timeout", Category: "clients", Value: def.ClientTimeout,
				Usage:   "a msgpack client with live requests that sends nothing for this long is gone: its requests are aborted (0 = only a dropped connection counts)",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_TIMEOUT")},
			&cli.Int64Flag{Name: "eos-token-id", Category: "requests", Value: -1,
				Usage:   "the model's EOS token id, sent as _eos_token_id with every request; -1 = none (engines stop on max_tokens and stop_token_ids only)",
				Sources: cli.EnvVars("SWITCHYARD_EOS_TOKEN_ID")},
			&cli.StringFlag{Name: "lb-policy", Category: "requests", Value: def.LBPolicy,
				Usage:   "rank choice for unpinned requests: least-loaded, power-of-two or round-robin",
				Sources: cli.EnvVars("SWITCHYARD_LB_POLICY")},
			&cli.BoolFlag{Name: "enable-wave-coordination", Category: "coordinator",
				Usage:   "run the DP wave protocol (MoE data-parallel engines that step in lockstep)",
				Sources: cli.EnvVars("SWITCHYARD_ENABLE_WAVE_COORDINATION")},
			&cli.StringFlag{Name: "coordinator-publish-address", Category: "coordinator",
				Usage:   "tcp://HOST:PORT where the coordinator publishes load and wave state to other frontends; empty = off",
				Sources: cli.EnvVars("SWITCHYARD_COORDINATOR_PUBLISH_ADDRESS")},
			&cli.StringFlag{Name: "bootstrap-address", Category: "bootstrap registry",
				Usage:   "HOST:PORT of the embedded KV-transfer bootstrap registry (vLLM's default port is 8998); empty = off",
				Sources: cli.EnvVars("SWITCHYARD_BOOTSTRAP_ADDRESS")},
			&cli.DurationFlag{Name: "shutdown-timeout", Value: def.ShutdownTimeout,
				Usage:   "on SIGTERM/SIGINT, how long in-flight requests may run before they are aborted",
				Sources: cli.EnvVars("SWITCHYARD_SHUTDOWN_TIMEOUT")},
		},
		Action: runServe,
	}
}

func runServe(ctx context.Context, cmd *cli.Command) error {
	log := newLogger(cmd, os.Stderr)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	cfg := server.DefaultConfig()
	cfg.HandshakeAddress = cmd.String("handshake-address")
	cfg.DataParallelSize = cmd.Int("data-parallel-size")
	cfg.MockEngines = cmd.Int("mock-engines")
	cfg.EngineTransport = cmd.String("engine-transport")
	cfg.EngineBindHost = cmd.String("engine-bind-host")
	cfg.MockStep = msDuration(cmd.Float("step-ms"))
	cfg.MockTokensPerStep = cmd.Int("tokens-per-step")
	cfg.HTTPAddress = cmd.String("http-address")
	cfg.ClientAddress = cmd.String("client-address")
	cfg.ClientTimeout = cmd.Duration("client-timeout")
	if eos := cmd.Int64("eos-token-id"); eos >= 0 {
		cfg.EOSTokenID = server.SomeEOS(eos)
	}
	cfg.LBPolicy = cmd.String("lb-policy")
	cfg.EnableWaves = cmd.Bool("enable-wave-coordination")
	cfg.CoordinatorPublishAddress = cmd.String("coordinator-publish-address")
	cfg.BootstrapAddress = cmd.String("bootstrap-address")
	cfg.ShutdownTimeout = cmd.Duration("shutdown-timeout")
	cfg.Logger = log
	cfg.Registry = reg
	if err := cfg.Validate(); err != nil {
		return err
	}

	srv, err := server.Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			// A signal during start: nothing was serving yet; that is a clean stop.
			log.Info("stopped during start", "err", err)
			return nil
		}
		return err
	}
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", "signal", "shutdown_timeout", cfg.ShutdownTimeout)
	case <-srv.Done():
		log.Error("a component stopped; shutting down", "err", srv.Err())
	}
	// The drain is bounded by ShutdownTimeout inside Shutdown; this outer bound only
	// guards against a component that does not stop at all.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout+15*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := srv.Err(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}
