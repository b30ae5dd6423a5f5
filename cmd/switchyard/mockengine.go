package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/wire"
)

// mockEngineCommand is `switchyard mock-engine`: one mock engine core in its own
// process, joining a frontend exactly as
// `vllm serve MODEL --headless --data-parallel-address H --data-parallel-rpc-port P`
// does. The fault flags make it misbehave on purpose, for failure tests.
func mockEngineCommand() *cli.Command {
	def := mockengine.DefaultConfig()
	return &cli.Command{
		Name:  "mock-engine",
		Usage: "run one protocol-exact mock vLLM engine core that connects to a frontend",
		Description: "Joins `switchyard serve --handshake-address tcp://H:P --data-parallel-size N` (or vLLM's own\n" +
			"frontend) as rank --data-parallel-rank, and answers requests with deterministic tokens.\n" +
			"With --kv-cache-blocks it simulates vLLM's prefix cache (LRU over --block-size blocks; a prefill\n" +
			"takes --prefill-us-per-token per uncached prompt token, one prefill at a time), and with\n" +
			"--kv-events-config it publishes the cache's KV events as `vllm serve --kv-events-config` does:\n" +
			"a PUB (port + rank) and a replay ROUTER, in the encoding of --vllm-layout's release.\n" +
			"SIGTERM/SIGINT: leaves like a stopped engine (no ENGINE_CORE_DEAD), exit 0.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "handshake-address", Value: def.HandshakeAddress,
				Usage:   "the frontend's handshake endpoint, tcp://HOST:PORT (vLLM: --data-parallel-address HOST --data-parallel-rpc-port PORT)",
				Sources: cli.EnvVars("SWITCHYARD_HANDSHAKE_ADDRESS")},
			&cli.StringSliceFlag{Name: "input-address",
				Usage: "bootstrapped (no handshake): the input address a launcher gave this engine (repeatable); needs --output-address, ignores --handshake-address"},
			&cli.StringSliceFlag{Name: "output-address",
				Usage: "bootstrapped (no handshake): the output address a launcher gave this engine (repeatable)"},
			&cli.IntFlag{Name: "data-parallel-rank", Value: 0,
				Usage: "this engine's rank; its ZeroMQ identity is the rank as two little-endian bytes"},
			&cli.IntFlag{Name: "data-parallel-size", Value: def.DataParallelSize,
				Usage: "total number of ranks"},
			&cli.FloatFlag{Name: "step-ms", Value: durationMS(def.StepInterval),
				Usage: "milliseconds per engine step (fractions allowed)"},
			&cli.IntFlag{Name: "tokens-per-step", Value: def.TokensPerStep,
				Usage: "tokens generated per running request per step"},
			&cli.IntFlag{Name: "max-model-len", Value: def.MaxModelLen,
				Usage: "context length reported at registration; longer requests finish with length"},
			&cli.IntFlag{Name: "max-num-seqs", Value: def.MaxNumSeqs,
				Usage: "requests stepped at once; the rest wait"},
			&cli.BoolFlag{Name: "reconnect",
				Usage: "redial a frontend or coordinator that went away, as a real engine's ZeroMQ sockets do (several frontends)"},
			&cli.BoolFlag{Name: "reregister",
				Usage: "with --reconnect, register again on every input reconnection (a real engine registers once)"},
			&cli.StringFlag{Name: "pd-role",
				Usage: "P/D role: prefill (answers do_remote_decode requests with kv_transfer_params holding a handle for the prompt) or " +
					"decode (refuses a do_remote_prefill request whose handle does not match its prompt, counts local prefills); empty = none"},
			&cli.StringFlag{Name: "lockstep-dir",
				Usage: "emulate a MoE lockstep group: every rank given this directory steps only while all --data-parallel-size ranks are alive (a rank that dies blocks the others, as in a collective)"},
			&cli.IntFlag{Name: "kv-cache-blocks", Category: "prefix cache",
				Usage: "simulate a prefix cache of this many blocks (registered as num_gpu_blocks); 0 = none, no prefill time, no KV events"},
			&cli.IntFlag{Name: "block-size", Value: mockengine.DefaultBlockSize, Category: "prefix cache",
				Usage: "tokens per KV cache block (vLLM's --block-size)"},
			&cli.FloatFlag{Name: "prefill-us-per-token", Category: "prefix cache",
				Usage: "prefill time in microseconds per prompt token not found in the cache; prefills run one at a time, in arrival order"},
			&cli.StringFlag{Name: "kv-events-config", Category: "prefix cache",
				Usage: "publish KV events, vLLM's JSON form: '{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", " +
					"\"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5558\", \"topic\": \"\"}' (needs --kv-cache-blocks)"},
			&cli.BoolFlag{Name: "kv-hash-bytes", Category: "prefix cache",
				Usage: "publish 32-byte block hashes, as vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 (default: 64-bit ints)"},
			&cli.StringFlag{Name: "vllm-layout", Value: "newest",
				Usage: "the vLLM release whose wire layout the engine speaks: a built-in layout (" + strings.Join(wire.LayoutNames(), ", ") + ") or a layout file"},
			&cli.IntFlag{Name: "die-after-steps", Category: "faults",
				Usage: "after N steps send ENGINE_CORE_DEAD and exit 1 (an engine crash)"},
			&cli.IntFlag{Name: "exit-after-steps", Category: "faults",
				Usage: "after N steps drop every connection without a sentinel and exit 1 (a killed process)"},
			&cli.IntFlag{Name: "stall-after-steps", Category: "faults",
				Usage: "after N steps stop reading and stepping but keep the connections (a hung engine)"},
			&cli.IntFlag{Name: "garbage-after-steps", Category: "faults",
				Usage: "after N steps send an undecodable output message"},
			&cli.BoolFlag{Name: "skip-registration", Category: "faults",
				Usage: "never register on the input socket (handshake stalls)"},
			&cli.BoolFlag{Name: "skip-ready", Category: "faults",
				Usage: "never send the handshake READY"},
			&cli.BoolFlag{Name: "empty-registration", Category: "faults",
				Usage: "register with an empty frame, as old vLLM engines do"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			log := newLogger(cmd, os.Stderr)
			cfg := mockengine.DefaultConfig()
			cfg.HandshakeAddress = cmd.String("handshake-address")
			if ins, outs := cmd.StringSlice("input-address"), cmd.StringSlice("output-address"); len(ins) > 0 || len(outs) > 0 {
				cfg.HandshakeAddress, cfg.Inputs, cfg.Outputs = "", ins, outs
			}
			cfg.Rank = cmd.Int("data-parallel-rank")
			cfg.DataParallelSize = cmd.Int("data-parallel-size")
			cfg.StepInterval = msDuration(cmd.Float("step-ms"))
			cfg.TokensPerStep = cmd.Int("tokens-per-step")
			cfg.MaxModelLen = cmd.Int("max-model-len")
			cfg.MaxNumSeqs = cmd.Int("max-num-seqs")
			cfg.LockstepDir = cmd.String("lockstep-dir")
			cfg.Reconnect, cfg.Reregister = cmd.Bool("reconnect"), cmd.Bool("reregister")
			cfg.Role = cmd.String("pd-role")
			if err := prefixCacheFlags(cmd, &cfg); err != nil {
				return err
			}
			cfg.Faults = mockengine.Faults{
				DieAfterSteps:     cmd.Int("die-after-steps"),
				ExitAfterSteps:    cmd.Int("exit-after-steps"),
				StallAfterSteps:   cmd.Int("stall-after-steps"),
				GarbageAfterSteps: cmd.Int("garbage-after-steps"),
				SkipRegistration:  cmd.Bool("skip-registration"),
				SkipReady:         cmd.Bool("skip-ready"),
				EmptyRegistration: cmd.Bool("empty-registration"),
			}
			cfg.Logger = log
			// Faults at run time, for chaos tests: SIGUSR1 = ENGINE_CORE_DEAD,
			// SIGUSR2 = garbage output, SIGHUP = stall.
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGHUP)
			defer func() {
				signal.Stop(sigs)
				close(sigs) // nothing is delivered after Stop; ends the forwarder
			}()
			faults := make(chan mockengine.Fault, 4)
			cfg.FaultNow = faults
			go func() {
				for sig := range sigs {
					k := map[os.Signal]mockengine.Fault{syscall.SIGUSR1: mockengine.FaultDie, syscall.SIGUSR2: mockengine.FaultGarbage, syscall.SIGHUP: mockengine.FaultStall}[sig]
					log.Warn("mock engine: fault on signal", "signal", sig.String())
					select {
					case faults <- k:
					default:
					}
				}
			}()
			l, _, err := loadLayout(cmd.String("vllm-layout"))
			if err != nil {
				return err
			}
			cfg.Layout = l
			log.Info("mock engine starting", "handshake_address", cfg.HandshakeAddress, "rank", cfg.Rank,
				"data_parallel_size", cfg.DataParallelSize, "step", cfg.StepInterval, "tokens_per_step", cfg.TokensPerStep,
				"vllm_layout", l.String(), "kv_cache_blocks", cfg.KVCacheBlocks, "kv_events", cfg.KVEvents.Enabled())
			if err := mockengine.Run(ctx, cfg); err != nil {
				return err
			}
			log.Info("mock engine stopped")
			return nil
		},
	}
}

// prefixCacheFlags applies the prefix cache flags to cfg.
func prefixCacheFlags(cmd *cli.Command, cfg *mockengine.Config) error {
	cfg.KVCacheBlocks, cfg.BlockSize = cmd.Int("kv-cache-blocks"), cmd.Int("block-size")
	cfg.PrefillPerToken = time.Duration(cmd.Float("prefill-us-per-token") * float64(time.Microsecond))
	cfg.KVHashBytes = cmd.Bool("kv-hash-bytes")
	if s := cmd.String("kv-events-config"); s != "" {
		k, err := mockengine.ParseKVEventsConfig(s)
		if err != nil {
			return fmt.Errorf("--kv-events-config: %w", err)
		}
		cfg.KVEvents = k
	}
	return nil
}

// msDuration converts a --step-ms value.
func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// durationMS is the flag default of a duration.
func durationMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
