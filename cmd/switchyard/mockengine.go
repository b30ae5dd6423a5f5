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
	o := &mockEngineOptions{cfg: mockengine.DefaultConfig()}
	cfg, def := &o.cfg, mockengine.DefaultConfig()
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
			&cli.StringFlag{Name: "handshake-address", Destination: &cfg.HandshakeAddress, Value: def.HandshakeAddress,
				Usage:   "the frontend's handshake endpoint, tcp://HOST:PORT (vLLM: --data-parallel-address HOST --data-parallel-rpc-port PORT)",
				Sources: cli.EnvVars("SWITCHYARD_HANDSHAKE_ADDRESS")},
			&cli.StringSliceFlag{Name: "input-address", Destination: &cfg.Inputs,
				Usage: "bootstrapped (no handshake): the input address a launcher gave this engine (repeatable); needs --output-address, ignores --handshake-address"},
			&cli.StringSliceFlag{Name: "output-address", Destination: &cfg.Outputs,
				Usage: "bootstrapped (no handshake): the output address a launcher gave this engine (repeatable)"},
			&cli.IntFlag{Name: "data-parallel-rank", Destination: &cfg.Rank, Value: 0,
				Usage: "this engine's rank; its ZeroMQ identity is the rank as two little-endian bytes"},
			&cli.IntFlag{Name: "data-parallel-size", Destination: &cfg.DataParallelSize, Value: def.DataParallelSize,
				Usage: "total number of ranks"},
			&cli.FloatFlag{Name: "step-ms", Destination: &o.stepMS, Value: durationMS(def.StepInterval),
				Usage: "milliseconds per engine step (fractions allowed)"},
			&cli.IntFlag{Name: "tokens-per-step", Destination: &cfg.TokensPerStep, Value: def.TokensPerStep,
				Usage: "tokens generated per running request per step"},
			&cli.IntFlag{Name: "max-model-len", Destination: &cfg.MaxModelLen, Value: def.MaxModelLen,
				Usage: "context length reported at registration; longer requests finish with length"},
			&cli.IntFlag{Name: "max-num-seqs", Destination: &cfg.MaxNumSeqs, Value: def.MaxNumSeqs,
				Usage: "requests stepped at once; the rest wait"},
			&cli.BoolFlag{Name: "reconnect", Destination: &cfg.Reconnect,
				Usage: "redial a frontend or coordinator that went away, as a real engine's ZeroMQ sockets do (several frontends)"},
			&cli.BoolFlag{Name: "reregister", Destination: &cfg.Reregister,
				Usage: "with --reconnect, register again on every input reconnection (a real engine registers once)"},
			&cli.StringFlag{Name: "pd-role", Destination: &cfg.Role,
				Usage: "P/D role: prefill (answers do_remote_decode requests with kv_transfer_params holding a handle for the prompt) or " +
					"decode (refuses a do_remote_prefill request whose handle does not match its prompt, counts local prefills); empty = none"},
			&cli.StringFlag{Name: "lockstep-dir", Destination: &cfg.LockstepDir,
				Usage: "emulate a MoE lockstep group: every rank given this directory steps only while all --data-parallel-size ranks are alive (a rank that dies blocks the others, as in a collective)"},
			&cli.IntFlag{Name: "kv-cache-blocks", Destination: &cfg.KVCacheBlocks, Category: "prefix cache",
				Usage: "simulate a prefix cache of this many blocks (registered as num_gpu_blocks); 0 = none, no prefill time, no KV events"},
			&cli.IntFlag{Name: "block-size", Destination: &cfg.BlockSize, Value: mockengine.DefaultBlockSize, Category: "prefix cache",
				Usage: "tokens per KV cache block (vLLM's --block-size)"},
			&cli.FloatFlag{Name: "prefill-us-per-token", Destination: &o.prefillUS, Category: "prefix cache",
				Usage: "prefill time in microseconds per prompt token not found in the cache; prefills run one at a time, in arrival order"},
			&cli.StringFlag{Name: "kv-events-config", Destination: &o.kvEvents, Category: "prefix cache",
				Usage: "publish KV events, vLLM's JSON form: '{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", " +
					"\"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": \"tcp://*:5558\", \"topic\": \"\"}' (needs --kv-cache-blocks)"},
			&cli.BoolFlag{Name: "kv-hash-bytes", Destination: &cfg.KVHashBytes, Category: "prefix cache",
				Usage: "publish 32-byte block hashes, as vLLM with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0 (default: 64-bit ints)"},
			&cli.StringFlag{Name: "pooling", Destination: &o.pooling,
				Usage: "be a pooling model serving these vLLM tasks, comma-separated (e.g. embed,token_embed or classify,score); empty = a generative model"},
			&cli.IntFlag{Name: "max-loras", Destination: &cfg.MaxLoRAs,
				Usage: "an engine started with --enable-lora --max-loras N: supports_lora, the add_lora/remove_lora/list_loras/pin_lora utilities, LoRA requests answered with the adapter's own tokens; 0 = no LoRA"},
			&cli.StringFlag{Name: "vllm-layout", Destination: &o.layout, Value: "newest",
				Usage: "the vLLM release whose wire layout the engine speaks: a built-in layout (" + strings.Join(wire.LayoutNames(), ", ") + ") or a layout file"},
			&cli.IntFlag{Name: "die-after-steps", Destination: &cfg.Faults.DieAfterSteps, Category: "faults",
				Usage: "after N steps send ENGINE_CORE_DEAD and exit 1 (an engine crash)"},
			&cli.IntFlag{Name: "exit-after-steps", Destination: &cfg.Faults.ExitAfterSteps, Category: "faults",
				Usage: "after N steps drop every connection without a sentinel and exit 1 (a killed process)"},
			&cli.IntFlag{Name: "stall-after-steps", Destination: &cfg.Faults.StallAfterSteps, Category: "faults",
				Usage: "after N steps stop reading and stepping but keep the connections (a hung engine)"},
			&cli.IntFlag{Name: "garbage-after-steps", Destination: &cfg.Faults.GarbageAfterSteps, Category: "faults",
				Usage: "after N steps send an undecodable output message"},
			&cli.BoolFlag{Name: "skip-registration", Destination: &cfg.Faults.SkipRegistration, Category: "faults",
				Usage: "never register on the input socket (handshake stalls)"},
			&cli.BoolFlag{Name: "skip-ready", Destination: &cfg.Faults.SkipReady, Category: "faults",
				Usage: "never send the handshake READY"},
			&cli.BoolFlag{Name: "empty-registration", Destination: &cfg.Faults.EmptyRegistration, Category: "faults",
				Usage: "register with an empty frame, as old vLLM engines do"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			log := newLogger(cmd, os.Stderr)
			cfg := o.cfg
			if err := o.complete(&cfg); err != nil {
				return err
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
			log.Info("mock engine starting", "handshake_address", cfg.HandshakeAddress, "rank", cfg.Rank,
				"data_parallel_size", cfg.DataParallelSize, "step", cfg.StepInterval, "tokens_per_step", cfg.TokensPerStep,
				"vllm_layout", cfg.Layout.String(), "kv_cache_blocks", cfg.KVCacheBlocks, "kv_events", cfg.KVEvents.Enabled())
			if err := mockengine.Run(ctx, cfg); err != nil {
				return err
			}
			log.Info("mock engine stopped")
			return nil
		},
	}
}

// mockEngineOptions holds what mock-engine's flags are bound to: the engine's
// Config, and the flags that need parsing before they become part of it.
type mockEngineOptions struct {
	cfg               mockengine.Config
	stepMS, prefillUS float64
	kvEvents, layout  string
	pooling           string
}

// complete turns the flags that need parsing into cfg.
func (o *mockEngineOptions) complete(cfg *mockengine.Config) error {
	// A --script is loaded just before the action, after cfg was made.
	cfg.Script = mockengine.DefaultConfig().Script
	if len(cfg.Inputs) > 0 || len(cfg.Outputs) > 0 {
		cfg.HandshakeAddress = "" // bootstrapped: no handshake
	}
	cfg.StepInterval = msDuration(o.stepMS)
	cfg.PrefillPerToken = time.Duration(o.prefillUS * float64(time.Microsecond))
	l, _, err := loadLayout(o.layout)
	if err != nil {
		return err
	}
	cfg.Layout = l
	cfg.Pooling = mockPooling(o.pooling)
	if s := o.kvEvents; s != "" {
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
