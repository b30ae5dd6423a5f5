package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/minitok"
	"github.com/switchyard-llm/switchyard/internal/reasoning"
	"github.com/switchyard-llm/switchyard/internal/server"
	"github.com/switchyard-llm/switchyard/internal/toolcall"
	"github.com/switchyard-llm/switchyard/wire"
)

// serveCommand is `switchyard serve`: the daemon. Flag names follow vLLM's where vLLM
// has one; every flag a deployment sets has a SWITCHYARD_* variable too.
func serveCommand() *cli.Command {
	o := &serveOptions{cfg: server.DefaultConfig()}
	c, def := &o.cfg, server.DefaultConfig()
	// Read after parsing with IsSet: a model directory's own values apply unless set.
	o.eosFlag = &cli.StringFlag{Name: "eos-token-id", Destination: &o.eos, Category: "requests",
		Usage: "the model's EOS token id(s), comma-separated, primary first (e.g. the generation config's eos_token_id list): " +
			"the primary is sent as _eos_token_id, the others join stop_token_ids and _all_stop_token_ids; empty or -1 = none (requests are sent with ignore_eos and run to max_tokens)",
		Sources: cli.EnvVars("SWITCHYARD_EOS_TOKEN_ID")}
	o.vocabFlag = &cli.Int64Flag{Name: "vocab-size", Destination: &c.VocabSize, Category: "requests",
		Usage:   "the model's vocabulary size: requests carrying a token id >= N (prompt, stop_token_ids, allowed_token_ids, logit_bias, bad words) are refused; 0 = unchecked",
		Sources: cli.EnvVars("SWITCHYARD_VOCAB_SIZE")}
	return &cli.Command{
		Name:  "serve",
		Usage: "run the frontend: engines connect to it, clients send it requests",
		Description: "Engines connect to --handshake-address (start each rank with\n" +
			"  vllm serve MODEL --headless --data-parallel-address HOST --data-parallel-rpc-port PORT ...).\n" +
			"With no --handshake-address, serve starts --mock-engines built-in mock engine cores\n" +
			"over ipc, so `switchyard serve` alone answers curl at once.\n" +
			"SIGTERM or SIGINT: stop accepting, let in-flight requests finish for up to\n" +
			"--shutdown-timeout, abort the rest, close every socket, exit 0.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "handshake-address", Destination: &c.HandshakeAddress, Category: "engines",
				Usage:   "tcp://HOST:PORT bound for the engines' HELLO/READY handshake; empty starts built-in mock engines instead",
				Sources: cli.EnvVars("SWITCHYARD_HANDSHAKE_ADDRESS")},
			&cli.IntFlag{Name: "data-parallel-size", Destination: &c.DataParallelSize, Category: "engines", Value: def.DataParallelSize,
				Usage:   "number of engine ranks expected on --handshake-address (ranks 0..N-1), or the deployment's total size when bootstrapped",
				Sources: cli.EnvVars("SWITCHYARD_DATA_PARALLEL_SIZE")},
			&cli.StringFlag{Name: "input-address", Destination: &c.InputAddress, Category: "engines (bootstrapped)",
				Usage:   "bootstrapped mode: a launcher already did the handshake and gave the engines this input address (tcp:// or ipc://), which serve binds (ROUTER); needs --output-address",
				Sources: cli.EnvVars("SWITCHYARD_INPUT_ADDRESS")},
			&cli.StringFlag{Name: "output-address", Destination: &c.OutputAddress, Category: "engines (bootstrapped)",
				Usage: "bootstrapped mode: the engines' output address, bound as one PULL shared by every engine; an ENGINE_CORE_DEAD or undecodable message on it " +
					"cannot be attributed to a rank and fails every engine on it",
				Sources: cli.EnvVars("SWITCHYARD_OUTPUT_ADDRESS")},
			&cli.IntFlag{Name: "data-parallel-start-rank", Destination: &c.StartRank, Category: "engines (bootstrapped)",
				Usage:   "bootstrapped mode: the first rank that registers (vLLM's --data-parallel-start-rank)",
				Sources: cli.EnvVars("SWITCHYARD_DATA_PARALLEL_START_RANK")},
			&cli.IntFlag{Name: "data-parallel-size-local", Destination: &c.LocalRanks, Category: "engines (bootstrapped)",
				Usage:   "bootstrapped mode: how many ranks from --data-parallel-start-rank register (vLLM's name); 0 = the rest up to --data-parallel-size",
				Sources: cli.EnvVars("SWITCHYARD_DATA_PARALLEL_SIZE_LOCAL")},
			&cli.IntFlag{Name: "mock-engines", Destination: &c.MockEngines, Category: "engines", Value: def.MockEngines,
				Usage:   "built-in mock engine cores started when --handshake-address is empty (ranks 0..N-1 over ipc)",
				Sources: cli.EnvVars("SWITCHYARD_MOCK_ENGINES")},
			&cli.StringFlag{Name: "engine-transport", Destination: &c.EngineTransport, Category: "engines", Value: def.EngineTransport,
				Usage:   "transport of the engine-facing input/output sockets: ipc (same host) or tcp",
				Sources: cli.EnvVars("SWITCHYARD_ENGINE_TRANSPORT")},
			&cli.StringFlag{Name: "engine-bind-host", Destination: &c.EngineBindHost, Category: "engines", Value: def.EngineBindHost,
				Usage:   "with --engine-transport tcp: the host the engine input/output sockets bind and hand to engines; engines on other hosts must reach it",
				Sources: cli.EnvVars("SWITCHYARD_ENGINE_BIND_HOST")},
			&cli.StringSliceFlag{Name: "vllm-layout", Destination: &o.layouts, Category: "engines",
				Usage: "FILE written by switchyard vllm-layout-script on an engine host (repeatable; tried before the built-in layouts), " +
					"or the name of a built-in layout (" + strings.Join(wire.LayoutNames(), ", ") + ") forced on engines that report no version or one no layout places",
				Sources: cli.EnvVars("SWITCHYARD_VLLM_LAYOUT")},
			&cli.StringFlag{Name: "mock-pooling", Destination: &o.mockPooling, Category: "mock engines",
				Usage: "make the built-in mock engines a pooling model serving these vLLM tasks, comma-separated (e.g. embed,token_embed or classify,score): " +
					"/v1/embeddings, /pooling and friends answer with vectors and scores computed from the prompt; empty = a generative model"},
			&cli.StringFlag{Name: "mock-engine-layouts", Destination: &o.mockLayouts, Category: "mock engines",
				Usage: "vLLM layouts the built-in mock engines speak, comma-separated, one per rank and repeated (e.g. v0.18,newest: a rolling upgrade); default newest"},
			&cli.FloatFlag{Name: "step-ms", Destination: &o.stepMS, Category: "mock engines", Value: durationMS(def.MockStep),
				Usage: "milliseconds between two steps of the built-in mock engines (fractions allowed)"},
			&cli.IntFlag{Name: "tokens-per-step", Destination: &c.MockTokensPerStep, Category: "mock engines", Value: def.MockTokensPerStep,
				Usage: "tokens each built-in mock engine emits per request per step"},
			&cli.StringFlag{Name: "http-address", Destination: &c.HTTPAddress, Category: "clients", Value: def.HTTPAddress,
				Usage:   "HOST:PORT of the HTTP API (/v1/completions, /v1/engines, /health, /metrics)",
				Sources: cli.EnvVars("SWITCHYARD_HTTP_ADDRESS")},
			&cli.StringFlag{Name: "client-address", Destination: &c.ClientAddress, Category: "clients", Value: def.ClientAddress,
				Usage:   "ZeroMQ ROUTER endpoint for msgpack clients (tcp:// or ipc://); empty disables it",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_ADDRESS")},
			&cli.DurationFlag{Name: "client-timeout", Destination: &c.ClientTimeout, Category: "clients", Value: def.ClientTimeout,
				Usage:   "a msgpack client with live requests that sends nothing for this long is gone: its requests are aborted (0 = only a dropped connection counts)",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_TIMEOUT")},
			&cli.Int64Flag{Name: "max-body-bytes", Destination: &c.MaxBodyBytes, Category: "limits", Value: def.MaxBodyBytes,
				Usage:   "largest HTTP request body; a larger one is a 413, refused before it is read (so before 100 Continue)",
				Sources: cli.EnvVars("SWITCHYARD_MAX_BODY_BYTES")},
			&cli.DurationFlag{Name: "http-header-timeout", Destination: &c.HTTPHeaderTimeout, Category: "limits", Value: def.HTTPHeaderTimeout,
				Usage:   "time a client has to send a request's headers (slowloris); 0 = none",
				Sources: cli.EnvVars("SWITCHYARD_HTTP_HEADER_TIMEOUT")},
			&cli.DurationFlag{Name: "http-body-timeout", Destination: &c.HTTPBodyTimeout, Category: "limits", Value: def.HTTPBodyTimeout,
				Usage:   "time a client has to send a request's body, a chunked one included; later is a 408; 0 = none",
				Sources: cli.EnvVars("SWITCHYARD_HTTP_BODY_TIMEOUT")},
			&cli.DurationFlag{Name: "http-idle-timeout", Destination: &c.HTTPIdleTimeout, Category: "limits", Value: def.HTTPIdleTimeout,
				Usage:   "how long a keep-alive connection may wait for its next request; 0 = none",
				Sources: cli.EnvVars("SWITCHYARD_HTTP_IDLE_TIMEOUT")},
			&cli.DurationFlag{Name: "http-write-timeout", Destination: &c.HTTPWriteTimeout, Category: "limits", Value: def.HTTPWriteTimeout,
				Usage: "a write to an HTTP client (an SSE event, an answer) it does not take within this fails: the connection closes " +
					"and its request is aborted, freeing its slot; per write, not the whole answer; 0 = none",
				Sources: cli.EnvVars("SWITCHYARD_HTTP_WRITE_TIMEOUT")},
			&cli.IntFlag{Name: "max-connections", Destination: &c.MaxConnections, Category: "limits", Value: def.MaxConnections,
				Usage: "open HTTP connections; at the cap the oldest one not in a request is closed for a new one, and when all are in requests " +
					"the new one gets a 503; lowered to fit the open-file limit; 0 = no cap",
				Sources: cli.EnvVars("SWITCHYARD_MAX_CONNECTIONS")},
			&cli.IntFlag{Name: "max-concurrent-requests", Destination: &c.MaxConcurrentRequests, Category: "limits", Value: def.MaxConcurrentRequests,
				Usage:   "completions requests served at once over HTTP; more get a 503 with Retry-After: 1; 0 = no cap",
				Sources: cli.EnvVars("SWITCHYARD_MAX_CONCURRENT_REQUESTS")},
			&cli.IntFlag{Name: "client-max-frame-bytes", Destination: &c.ClientMaxFrameBytes, Category: "limits", Value: def.ClientMaxFrameBytes,
				Usage:   "largest frame a msgpack client may send; a client that sends more is disconnected before it is read",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_MAX_FRAME_BYTES")},
			&cli.IntFlag{Name: "client-max-message-bytes", Destination: &c.ClientMaxMessageBytes, Category: "limits", Value: def.ClientMaxMessageBytes,
				Usage:   "largest message (all its frames) a msgpack client may send; a client that sends more is disconnected",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_MAX_MESSAGE_BYTES")},
			&cli.IntFlag{Name: "client-max-connections", Destination: &c.ClientMaxConnections, Category: "limits", Value: def.ClientMaxConnections,
				Usage:   "msgpack client connections (a handshaking one counts); more are closed as they are accepted; 0 = no cap",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_MAX_CONNECTIONS")},
			&cli.StringSliceFlag{Name: "api-key", Destination: &c.APIKeys, Category: "clients",
				Usage: "require \"Authorization: Bearer KEY\" on /v1/* (vLLM's --api-key; repeatable, any one of them is accepted); " +
					"/health and /metrics stay open",
				Sources: cli.EnvVars("SWITCHYARD_API_KEY", "VLLM_API_KEY")},
			&cli.StringSliceFlag{Name: "allowed-origins", Destination: &c.CORS.AllowedOrigins, Category: "clients", Value: []string{"*"},
				Usage:   "CORS: origins a browser page may call from (vLLM's flag; repeatable, comma-separated or a JSON list; \"*\" = any)",
				Sources: cli.EnvVars("SWITCHYARD_ALLOWED_ORIGINS")},
			&cli.StringSliceFlag{Name: "allowed-methods", Destination: &c.CORS.AllowedMethods, Category: "clients", Value: []string{"*"},
				Usage:   "CORS: methods a preflight allows (vLLM's flag; \"*\" = all)",
				Sources: cli.EnvVars("SWITCHYARD_ALLOWED_METHODS")},
			&cli.StringSliceFlag{Name: "allowed-headers", Destination: &c.CORS.AllowedHeaders, Category: "clients", Value: []string{"*"},
				Usage:   "CORS: request headers a preflight allows (vLLM's flag; \"*\" = whatever the browser asks)",
				Sources: cli.EnvVars("SWITCHYARD_ALLOWED_HEADERS")},
			&cli.BoolFlag{Name: "allow-credentials", Destination: &c.CORS.AllowCredentials, Category: "clients",
				Usage:   "CORS: answer Access-Control-Allow-Credentials: true (vLLM's flag)",
				Sources: cli.EnvVars("SWITCHYARD_ALLOW_CREDENTIALS")},
			&cli.BoolFlag{Name: "enable-request-id-headers", Destination: &c.RequestIDHeaders, Category: "clients",
				Usage:   "echo X-Request-Id on every HTTP answer: the client's, else a random one (vLLM's flag)",
				Sources: cli.EnvVars("SWITCHYARD_ENABLE_REQUEST_ID_HEADERS")},
			&cli.StringFlag{Name: "client-token", Destination: &c.ClientToken, Category: "clients",
				Usage: "token a msgpack client must present on each connection ([AUTH 0x10, msgpack token]) before any request is served; " +
					"required with --api-key when --client-address is not loopback",
				Sources: cli.EnvVars("SWITCHYARD_CLIENT_TOKEN")},
			&cli.StringFlag{Name: "admin-token", Destination: &c.AdminToken, Category: "clients",
				Usage:   "bearer token required by the admin endpoints POST /v1/engines/{rank}/drain and .../undrain (--api-key does not apply to them)",
				Sources: cli.EnvVars("SWITCHYARD_ADMIN_TOKEN")},
			&cli.StringSliceFlag{Name: "admin-allow", Destination: &c.AdminNetworks, Category: "clients",
				Usage:   "CIDR or IP allowed to call the admin endpoints (repeatable); default loopback only; a non-loopback network requires --admin-token",
				Sources: cli.EnvVars("SWITCHYARD_ADMIN_ALLOW")},
			&cli.StringFlag{Name: "tokenizer", Destination: &o.tokenizer, Aliases: []string{"model"}, Category: "text",
				Usage: "local model directory (what vLLM is given as MODEL) holding tokenizer.json, tokenizer_config.json and, when present, generation_config.json and config.json: " +
					"serve then takes and returns text (string prompts, /v1/chat/completions, stop strings, logprobs, /tokenize), and the EOS ids and vocabulary size come from it. Nothing is downloaded",
				Sources: cli.EnvVars("SWITCHYARD_TOKENIZER")},
			&cli.BoolFlag{Name: "mock-words", Destination: &o.mockWords, Category: "text", Value: true,
				Usage: "embedded default only (built-in mock engines, no --tokenizer): a small tokenizer built into the binary gives text requests (string prompts, chat) text, " +
					"and the mock engines answer them with words; token-id requests are answered exactly as without a tokenizer. false = token ids only",
				Sources: cli.EnvVars("SWITCHYARD_MOCK_WORDS")},
			&cli.StringFlag{Name: "generation-config", Destination: &o.generationConfig, Category: "text", Value: "auto",
				Usage: "auto: the model directory's generation_config.json sampling defaults (temperature, top_p, top_k, min_p, repetition_penalty, max_new_tokens) apply to the fields a request leaves out, as vLLM's default; " +
					"vllm: vLLM's own defaults only",
				Sources: cli.EnvVars("SWITCHYARD_GENERATION_CONFIG")},
			&cli.StringFlag{Name: "chat-template", Destination: &o.chatTemplate, Category: "text",
				Usage:   "a Jinja chat template file used instead of the model directory's (vLLM's --chat-template)",
				Sources: cli.EnvVars("SWITCHYARD_CHAT_TEMPLATE")},
			&cli.BoolFlag{Name: "enable-auto-tool-choice", Destination: &c.EnableAutoToolChoice, Category: "text",
				Usage:   "tool_choice \"auto\" (the default with tools) parses tool calls out of chat answers with --tool-call-parser (vLLM's flag; needs --tool-call-parser)",
				Sources: cli.EnvVars("SWITCHYARD_ENABLE_AUTO_TOOL_CHOICE")},
			&cli.StringFlag{Name: "tool-call-parser", Destination: &c.ToolCallParser, Category: "text",
				Usage: "the model family's tool-call format (vLLM's names): " + strings.Join(toolcall.Names(), ", ") +
					"; also needed for a named or \"required\" tool_choice",
				Sources: cli.EnvVars("SWITCHYARD_TOOL_CALL_PARSER")},
			&cli.StringFlag{Name: "reasoning-parser", Destination: &c.ReasoningParser, Category: "text",
				Usage:   "split chat answers into message.reasoning and content (vLLM's names): " + strings.Join(reasoning.Names(), ", "),
				Sources: cli.EnvVars("SWITCHYARD_REASONING_PARSER")},
			&cli.BoolFlag{Name: "trust-request-chat-template", Destination: &o.trustChatTemplate, Category: "text",
				Usage: "let requests bring their own chat template (chat_template, chat_template_kwargs.chat_template); without it such a request is a 400, as vLLM's flag of the same name. " +
					"A template is code: only trust clients that may run code on this host",
				Sources: cli.EnvVars("SWITCHYARD_TRUST_REQUEST_CHAT_TEMPLATE")},
			&cli.StringFlag{Name: "served-model-name", Destination: &c.ServedModelName, Category: "requests",
				Usage: "the model's name in /v1/models, in answers and in the model_name label of the vllm:* metrics (vLLM's --served-model-name); a request naming another model is a 404 with --tokenizer. " +
					"Default: the --tokenizer directory's base name, else " + server.DefaultServedModelName,
				Sources: cli.EnvVars("SWITCHYARD_SERVED_MODEL_NAME")},
			o.eosFlag,

			o.vocabFlag,

			&cli.Int64Flag{Name: "max-model-len", Destination: &c.MaxModelLen, Category: "requests",
				Usage:   "cap every engine's registered context length (vLLM's flag, which the engines take themselves): prompt plus max_tokens must fit the smaller; 0 = the engines' own",
				Sources: cli.EnvVars("SWITCHYARD_MAX_MODEL_LEN")},
			&cli.Int64Flag{Name: "max-logprobs", Destination: &c.MaxLogprobs, Category: "requests", Value: def.MaxLogprobs,
				Usage:   "cap on logprobs and prompt_logprobs per request (vLLM's --max-logprobs); -1 = no cap",
				Sources: cli.EnvVars("SWITCHYARD_MAX_LOGPROBS")},
			&cli.StringSliceFlag{Name: "allow-utility-method", Destination: &c.AllowUtilityMethods, Category: "clients",
				Usage:   "also let msgpack clients call this engine utility method (repeatable); the default list is the methods vLLM's own frontend calls",
				Sources: cli.EnvVars("SWITCHYARD_ALLOW_UTILITY_METHOD")},
			&cli.DurationFlag{Name: "engine-stall-timeout", Destination: &c.EngineStallTimeout, Category: "engines", Value: def.EngineStallTimeout,
				Usage: "an engine with requests in flight that sends no output and no scheduler stats for this long is stalled: it gets no new work, " +
					"its requests fail with a clear cause, and it is routable again when it speaks; 0 = off (keep it above your longest prefill)",
				Sources: cli.EnvVars("SWITCHYARD_ENGINE_STALL_TIMEOUT")},
			&cli.IntFlag{Name: "max-migrations", Destination: &c.MaxMigrations, Category: "engines", Value: def.MaxMigrations,
				Usage: "when an engine dies (or stalls) move each of its in-flight requests to another engine, continuing the client's stream " +
					"(prompt + tokens delivered so far), at most this many times per request; 0 = off (its requests fail). Off with --enable-wave-coordination",
				Sources: cli.EnvVars("SWITCHYARD_MAX_MIGRATIONS")},
			&cli.BoolFlag{Name: "migrate-pinned", Destination: &c.MigratePinned, Category: "engines",
				Usage:   "let requests pinned with data_parallel_rank move to another engine too (by default they fail with their engine)",
				Sources: cli.EnvVars("SWITCHYARD_MIGRATE_PINNED")},
			&cli.StringFlag{Name: "lb-policy", Destination: &c.LBPolicy, Category: "requests", Value: def.LBPolicy,
				Usage: "rank choice for unpinned requests: least-loaded, power-of-two, round-robin, kv (where the prompt's prefix is cached, from the engines' KV events, " +
					"traded against load) or prefix (the same from the prompts switchyard routed, for engines that publish no events)",
				Sources: cli.EnvVars("SWITCHYARD_LB_POLICY")},
			&cli.BoolFlag{Name: "enable-wave-coordination", Destination: &c.EnableWaves, Category: "coordinator",
				Usage:   "run the DP wave protocol (MoE data-parallel engines that step in lockstep)",
				Sources: cli.EnvVars("SWITCHYARD_ENABLE_WAVE_COORDINATION")},
			&cli.StringFlag{Name: "coordinator-publish-address", Destination: &c.CoordinatorPublishAddress, Category: "coordinator",
				Usage:   "tcp://HOST:PORT where the coordinator publishes load and wave state to other frontends; empty = off",
				Sources: cli.EnvVars("SWITCHYARD_COORDINATOR_PUBLISH_ADDRESS")},
			&cli.StringFlag{Name: "external-coordinator-address", Destination: &c.ExternalCoordinatorAddress, Category: "coordinator",
				Usage: "follow vLLM's own Python DP coordinator at this stats address (its frontend_stats_publish_address) instead of running one in-process: " +
					"load and wave state come from its publishes, FIRST_REQ wakes paused engines; empty = off",
				Sources: cli.EnvVars("SWITCHYARD_EXTERNAL_COORDINATOR_ADDRESS")},
			&cli.StringFlag{Name: "bootstrap-address", Destination: &c.BootstrapAddress, Category: "bootstrap registry",
				Usage:   "HOST:PORT of the embedded KV-transfer bootstrap registry (vLLM's default port is 8998); empty = off",
				Sources: cli.EnvVars("SWITCHYARD_BOOTSTRAP_ADDRESS")},
			&cli.BoolFlag{Name: "disable-log-requests", Destination: &c.DisableLogRequests, Category: "logs",
				Usage:   "no access-log line per request (by default one per HTTP and client-protocol request: method/path or client, status, duration, tokens, rank), as vLLM's flag",
				Sources: cli.EnvVars("SWITCHYARD_DISABLE_LOG_REQUESTS")},
			&cli.DurationFlag{Name: "log-stats-interval", Destination: &c.LogStatsInterval, Category: "logs", Value: def.LogStatsInterval,
				Usage:   "log a stats line per engine (prompt and generation tokens/s, running, waiting, KV-cache usage) this often, quiet while idle; 0 = off",
				Sources: cli.EnvVars("SWITCHYARD_LOG_STATS_INTERVAL")},
			&cli.BoolFlag{Name: "disable-log-stats", Destination: &o.disableLogStats, Category: "logs",
				Usage:   "no periodic stats line (vLLM's flag; the same as --log-stats-interval 0)",
				Sources: cli.EnvVars("SWITCHYARD_DISABLE_LOG_STATS")},
			&cli.StringFlag{Name: "otlp-traces-endpoint", Destination: &c.OTLPTracesEndpoint, Category: "logs",
				Usage: "trace every completions request (a span under the client's traceparent, its context sent to the engines in trace_headers) " +
					"and export the spans over OTLP/HTTP to this URL, e.g. http://collector:4318 (vLLM's flag; vLLM's default is gRPC on 4317); empty = off",
				Sources: cli.EnvVars("SWITCHYARD_OTLP_TRACES_ENDPOINT")},
			&cli.DurationFlag{Name: "shutdown-timeout", Destination: &c.ShutdownTimeout, Value: def.ShutdownTimeout,
				Usage:   "on SIGTERM/SIGINT, how long in-flight requests may run before they are aborted",
				Sources: cli.EnvVars("SWITCHYARD_SHUTDOWN_TIMEOUT")},
		}, append(append(registryFlags("bootstrap-", "SWITCHYARD_BOOTSTRAP_", "bootstrap registry", &c.Bootstrap), pdFlags(&c.PD)...), append(append(append(o.cluster.flags(), kvFlags(&c.KV)...), o.vllm.flags()...), loraFlags(&c.LoRA)...)...)...),
		Action:       func(ctx context.Context, cmd *cli.Command) error { return runServe(ctx, cmd, o) },
		ArgsUsage:    "[MODEL]",
		OnUsageError: unknownFlag,
	}
}

// serveOptions holds what serve's flags are bound to: the server's Config, and
// the flags that need parsing or a choice before they become part of it.
type serveOptions struct {
	cfg                          server.Config
	stepMS                       float64
	layouts                      []string
	mockLayouts, eos             string
	mockPooling                  string
	tokenizer, chatTemplate      string
	generationConfig             string
	mockWords, trustChatTemplate bool
	disableLogStats              bool
	eosFlag                      *cli.StringFlag
	vocabFlag                    *cli.Int64Flag
	cluster                      clusterOptions
	vllm                         vllmArgs // MODEL, --host, --port (vllmargs.go)
}

func runServe(ctx context.Context, cmd *cli.Command, o *serveOptions) error {
	log := newLogger(cmd, os.Stderr)
	cfg := o.cfg
	if err := o.vllm.apply(cmd, o, &cfg); err != nil {
		return err
	}
	if err := o.complete(&cfg, log); err != nil {
		return err
	}
	cfg.Logger = log
	cfg.Registry = newRegistry()
	so, err := setupCluster(ctx, &o.cluster, &cfg, log)
	if err != nil {
		return err
	}
	defer so.stop()
	if cfg.Embedded() && cfg.MockEngines == 0 {
		return errors.New("--mock-engines 0: built-in mock engines refused, and there is no engine configuration: " +
			"set --handshake-address (engines connect to it) or --input-address and --output-address (bootstrapped engines)")
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Embedded() {
		log.Warn("NO ENGINE CONFIGURATION: serving built-in MOCK engines, whose answers are made up; "+
			"answers carry "+server.EnginesHeader+": "+server.EnginesMock+". Set --handshake-address for real engines; "+
			"--mock-engines 0 refuses to start without them", "mock_engines", cfg.MockEngines)
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
	so.run(srv)
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

// complete turns the flags that need parsing into cfg, and loads the text
// model (a --tokenizer directory, or the embedded default's small tokenizer).
func (o *serveOptions) complete(cfg *server.Config, log *slog.Logger) error {
	cfg.MockStep = msDuration(o.stepMS)
	var err error
	if cfg.Layouts, err = layoutSet(o.layouts); err != nil {
		return err
	}
	if cfg.MockLayouts, err = mockLayouts(o.mockLayouts); err != nil {
		return err
	}
	cfg.MockPooling = mockPooling(o.mockPooling)
	if cfg.EOSTokenIDs, err = parseEOS(o.eos); err != nil {
		return err
	}
	if o.disableLogStats {
		cfg.LogStatsInterval = 0
	}
	if err := o.loadText(cfg, log); err != nil {
		return err
	}
	if cfg.Text != nil {
		cfg.Text.TrustRequestChatTemplate = o.trustChatTemplate
	}
	return cfg.Text.SetParsers(cfg.EnableAutoToolChoice, cfg.ToolCallParser, cfg.ReasoningParser)
}

// loadText sets cfg.Text from --tokenizer, or with the embedded default and
// --mock-words from the tokenizer built into the binary.
func (o *serveOptions) loadText(cfg *server.Config, log *slog.Logger) error {
	if o.chatTemplate != "" && o.tokenizer == "" {
		return fmt.Errorf("--chat-template: needs --tokenizer (the model directory)")
	}
	if o.tokenizer == "" {
		if !cfg.Embedded() || !o.mockWords {
			return nil
		}
		text, err := server.LoadEmbeddedText(cfg.ModelName())
		if err != nil {
			return fmt.Errorf("embedded tokenizer: %w", err)
		}
		cfg.Text = text
		cfg.MockWords, cfg.MockCapitals, cfg.MockPeriod = minitok.Words()
		log.Info("embedded default: text requests use the built-in tokenizer and the mock engines answer them with words (--mock-words=false: token ids only; --tokenizer DIR: a real model's tokenizer)",
			"served_model_name", text.Name)
		return nil
	}
	text, m, err := server.LoadText(o.tokenizer, o.chatTemplate, cfg.ServedModelName)
	if err != nil {
		return fmt.Errorf("--tokenizer: %w", err)
	}
	cfg.Text = text
	cfg.ServedModelName = text.Name
	switch o.generationConfig {
	case "auto":
	case "vllm":
		text.DefaultSampling = nil
	default:
		return fmt.Errorf("--generation-config: want auto or vllm, got %q", o.generationConfig)
	}
	// The model's own EOS ids and vocabulary, unless the flags say otherwise.
	if !o.eosFlag.IsSet() {
		cfg.EOSTokenIDs = m.EOSTokenIDs
	}
	if !o.vocabFlag.IsSet() {
		cfg.VocabSize = m.VocabSize
	}
	// A directory without config.json has no context length: the engines' own,
	// from their registration, applies, and the log says so rather than 0.
	var maxLen any = m.MaxModelLen
	if m.MaxModelLen <= 0 {
		maxLen = "from the engines"
	}
	log.Info("text model", "dir", m.Dir, "served_model_name", text.Name, "eos_token_ids", cfg.EOSTokenIDs,
		"vocab_size", cfg.VocabSize, "max_model_len", maxLen, "chat_template", text.Template != nil)
	return nil
}

// parseEOS reads --eos-token-id: ids separated by commas (spaces allowed), the
// primary first. "" and "-1" (the old "none") mean no EOS.
func parseEOS(v string) ([]int64, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "-1" {
		return nil, nil
	}
	var ids []int64
	for _, f := range strings.Split(v, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--eos-token-id: %q: want non-negative token ids separated by commas, primary first", v)
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
