package server

import (
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/bootstrap"
	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/wire"
)

// Config is everything `switchyard serve` wires. Start from DefaultConfig.
type Config struct {
	// HandshakeAddress is the tcp://HOST:PORT engines send HELLO/READY to. Empty
	// (and no InputAddress) starts MockEngines built-in mock engine cores instead
	// (the embedded default).
	HandshakeAddress string
	// DataParallelSize is the number of engine ranks expected on HandshakeAddress,
	// or the deployment's total data-parallel size when bootstrapped.
	DataParallelSize int
	// InputAddress and OutputAddress select bootstrapped mode: a launcher already
	// did the handshake and gave the engines these two addresses (one input ROUTER
	// and one output PULL shared by all of them), which serve binds. Ranks
	// StartRank .. StartRank+LocalRanks-1 register on them. A death on the shared
	// output socket cannot be attributed and fails every engine on it.
	InputAddress, OutputAddress string
	// StartRank is the first rank served when bootstrapped (vLLM's
	// --data-parallel-start-rank).
	StartRank int
	// LocalRanks is how many ranks from StartRank register when bootstrapped
	// (vLLM's --data-parallel-size-local); 0 = DataParallelSize - StartRank.
	LocalRanks int
	// ExternalCoordinatorAddress follows vLLM's own Python DP coordinator (its
	// front stats publisher) instead of running the in-process one; empty = off.
	ExternalCoordinatorAddress string
	// FollowCoordinator, when set, is the coordinator this frontend follows
	// (scale-out: the cluster leader's); exclusive with
	// ExternalCoordinatorAddress.
	FollowCoordinator FollowedCoordinator
	// ClientIndex is this frontend's client index among the API servers
	// that share the engines: stamped on every ADD and UTILITY, so each
	// engine sends this frontend's outputs to outputs[ClientIndex] of its
	// INIT. 0 with a single frontend.
	ClientIndex int64
	// AbortOrphans aborts at the engine the requests whose outputs reach
	// this frontend unknown (dispatcher.Config.AbortOrphans): set with
	// several frontends, where a restarted one receives what its previous
	// run left running.
	AbortOrphans bool
	// EngineRegistrations, when bootstrapped, saves engines' registrations
	// and replays them for engines that reconnect without one
	// (frontend.RegistrationStore): a restarted frontend of several.
	EngineRegistrations frontend.RegistrationStore
	// MockEngines is the number of built-in mock engines when HandshakeAddress is
	// empty.
	MockEngines int
	// EngineTransport is "ipc" or "tcp" for the engine input/output sockets.
	EngineTransport string
	// EngineBindHost is the host the tcp engine sockets bind and advertise in INIT;
	// engines on other hosts must be able to reach it.
	EngineBindHost string
	// MockStep and MockTokensPerStep shape the built-in mock engines.
	MockStep          time.Duration
	MockTokensPerStep int
	// MockWords and MockPeriod make the built-in mock engines answer requests that
	// ask for text with these word tokens (mockengine.Config.Words).
	MockWords, MockCapitals []int64
	MockPeriod              int64
	// MockLayouts are the vLLM wire layouts the built-in mock engines speak, rank
	// i taking MockLayouts[i % len]; empty = the native (newest) layout.
	MockLayouts []*wire.Layout
	// MockPooling, when set, makes the built-in mock engines a pooling model
	// (embeddings, classification) instead of a generative one.
	MockPooling *mockengine.PoolingModel
	// mockTweak, when set (tests), adjusts a built-in mock engine's config
	// before each start of its rank: gen counts the restarts (0 = the first).
	mockTweak func(gen int, c *mockengine.Config)
	// Layouts places each engine on a vLLM wire layout (operator layout files, a
	// forced layout); nil = the built-in layouts.
	Layouts *wire.LayoutSet

	// HTTPAddress is the HOST:PORT of the HTTP API (port 0 picks one).
	HTTPAddress string
	// ClientAddress is the ZeroMQ ROUTER endpoint of the msgpack client protocol;
	// empty disables it.
	ClientAddress string
	// ClientTimeout: see clientapi.ClientConfig.Timeout.
	ClientTimeout time.Duration
	// ClientMaxFrameBytes and ClientMaxMessageBytes bound what one msgpack client
	// sends (a frame, and all frames of one message): a client that sends more is
	// disconnected before the excess is read. The defaults hold the largest legal
	// ADD (DefaultClientMaxBytes).
	ClientMaxFrameBytes, ClientMaxMessageBytes int
	// ClientMaxConnections caps msgpack client connections (a handshaking one
	// counts); more are closed as they are accepted. 0 = no cap.
	ClientMaxConnections int
	// ClientToken, when set, is the token a msgpack client presents (an AUTH
	// message) before it is served: see clientapi.ClientConfig.Token.
	ClientToken string

	// MaxBodyBytes caps an HTTP request body (--max-body-bytes).
	MaxBodyBytes int64
	// HTTPHeaderTimeout bounds reading a request's headers, HTTPBodyTimeout its
	// body, HTTPIdleTimeout a keep-alive connection's wait for its next request.
	// A stream lasts as long as its request; HTTPWriteTimeout bounds each write
	// instead (a client that stops reading), not the whole answer.
	HTTPHeaderTimeout, HTTPBodyTimeout, HTTPIdleTimeout time.Duration
	// HTTPWriteTimeout: a write to an HTTP client (an SSE event, an answer, in
	// pieces of writePiece bytes) the client does not take within it fails, and the
	// connection is closed with everything its request held. 0 = no bound.
	HTTPWriteTimeout time.Duration
	// MaxConnections caps open HTTP connections; at the cap the oldest one not in
	// a request is closed for a new one, and when all are in requests the new one
	// gets a 503. It is lowered to fit the process's file limit. 0 = no cap.
	MaxConnections int
	// MaxConcurrentRequests caps completions requests served at once; more get a
	// 503 with Retry-After. 0 = no cap.
	MaxConcurrentRequests int
	// APIKeys: when set, /v1/* requires "Authorization: Bearer KEY" with one of them.
	APIKeys []string
	// AdminToken, when set, is the bearer token POST /v1/engines/{rank}/drain and
	// .../undrain require; AdminNetworks may call them (empty = loopback only; a
	// non-loopback network requires AdminToken).
	AdminToken    string
	AdminNetworks []string
	// CORS is what the HTTP API answers browsers (vLLM's --allowed-origins,
	// --allowed-methods, --allowed-headers, --allow-credentials); the zero
	// value is vLLM's default, "*" for each list.
	CORS httpapi.CORS
	// RequestIDHeaders echoes X-Request-Id on every HTTP answer (vLLM's
	// --enable-request-id-headers).
	RequestIDHeaders bool

	// ServedModelName is the model_name label of the vllm:* series (vLLM's
	// --served-model-name); empty = DefaultServedModelName.
	ServedModelName string

	// Text is the model's tokenizer and chat template (serve --tokenizer); nil =
	// token ids only. Its Name is the served model name.
	Text *httpapi.Text
	// EnableAutoToolChoice, ToolCallParser and ReasoningParser are vLLM's
	// --enable-auto-tool-choice, --tool-call-parser and --reasoning-parser:
	// chat answers get tool_calls and reasoning (httpapi.Text.SetParsers).
	EnableAutoToolChoice bool
	ToolCallParser       string
	ReasoningParser      string

	// EOSTokenIDs are the model's EOS ids, the first one primary (sent as
	// _eos_token_id), the others the generation config's further EOS ids (added to
	// stop_token_ids and _all_stop_token_ids). Empty sends ignore_eos instead.
	EOSTokenIDs []int64
	// VocabSize bounds the token ids a request may carry; 0 = unchecked.
	VocabSize int64
	// MaxLogprobs caps logprobs and prompt_logprobs; -1 = no cap.
	MaxLogprobs int64
	// MaxModelLen caps every engine's registered context length (vLLM's
	// --max-model-len, which the engines are given themselves): requests are
	// checked against the smaller. 0 = the engines' own.
	MaxModelLen int64
	// LoRA is --enable-lora, --max-loras and --lora-modules (lora.go).
	LoRA LoRAConfig
	// AllowUtilityMethods extends the utility methods msgpack clients may call
	// (DefaultUtilityMethods).
	AllowUtilityMethods []string
	// LBPolicy is dispatcher.PolicyLeastLoaded, PolicyPowerOfTwo, PolicyRoundRobin,
	// PolicyKV (by the engines' KV events) or PolicyPrefix (by what was routed).
	LBPolicy string
	// KV configures the kv and prefix policies.
	KV KVConfig
	// EnableWaves runs the DP wave protocol (MoE data parallel).
	EnableWaves bool
	// CoordinatorPublishAddress is where the coordinator publishes to other
	// frontends; empty = off.
	CoordinatorPublishAddress string
	// BootstrapAddress is the HOST:PORT of the embedded bootstrap registry; empty =
	// off.
	BootstrapAddress string
	// EngineStallTimeout: an engine with requests in flight that sends no
	// output and no scheduler stats for this long is stalled: no new work, its
	// requests fail with a clear cause, routable again when it speaks. 0 = off.
	EngineStallTimeout time.Duration
	// MaxMigrations is how many times one request may move to another engine
	// when its engine is lost (died, garbage, stalled): the client's stream
	// continues there. 0 = off. Not with EnableWaves (a lockstep group's
	// survivors are blocked in the collective).
	MaxMigrations int
	// MigratePinned lets requests pinned with data_parallel_rank move too.
	MigratePinned bool
	// Bootstrap holds the embedded registry's other settings (token, admin
	// networks, limits); its Address, Logger and Registerer are set by Start.
	Bootstrap bootstrap.Config

	// ShutdownTimeout bounds how long in-flight requests may run after shutdown
	// begins before they are aborted.
	ShutdownTimeout time.Duration
	// ReadyTimeout bounds Start's wait for the built-in mock engines' handshakes.
	// Real engines are not waited for: they may take minutes to load a model.
	ReadyTimeout time.Duration

	// DisableLogRequests turns off the access log: one line per HTTP and
	// client-protocol request (vLLM's --disable-log-requests).
	DisableLogRequests bool
	// LogStatsInterval is how often the stats line per engine is logged
	// (throughput, running, waiting, KV-cache usage); 0 = never (vLLM's
	// --disable-log-stats).
	LogStatsInterval time.Duration

	// PD configures prefill engines (P/D disaggregation, pd.go); zero = off.
	PD PDConfig

	// OTLPTracesEndpoint, when set, traces every completions request and exports
	// the spans over OTLP/HTTP to this URL (vLLM's --otlp-traces-endpoint); the
	// trace context reaches the engines in trace_headers.
	OTLPTracesEndpoint string

	// Logger: nil discards.
	Logger *slog.Logger
	// Registry receives every component's metrics and is served on /metrics; nil
	// makes a fresh one.
	Registry *prometheus.Registry
}

// DefaultConfig returns the defaults of `switchyard serve`.
func DefaultConfig() Config {
	return Config{
		DataParallelSize:      1,
		MockEngines:           2,
		EngineTransport:       "ipc",
		EngineBindHost:        "127.0.0.1",
		MockStep:              5 * time.Millisecond,
		MockTokensPerStep:     1,
		HTTPAddress:           "127.0.0.1:8000",
		ClientAddress:         "tcp://127.0.0.1:5570",
		ClientMaxFrameBytes:   DefaultClientMaxBytes,
		ClientMaxMessageBytes: DefaultClientMaxBytes,
		ClientMaxConnections:  1024,
		MaxBodyBytes:          httpapi.DefaultMaxBodyBytes,
		HTTPHeaderTimeout:     10 * time.Second,
		HTTPBodyTimeout:       30 * time.Second,
		HTTPIdleTimeout:       2 * time.Minute,
		HTTPWriteTimeout:      30 * time.Second,
		MaxConnections:        8192,
		MaxConcurrentRequests: 4096,
		LBPolicy:              dispatcher.PolicyLeastLoaded,
		KV:                    DefaultKVConfig(),
		MaxLogprobs:           apicore.DefaultMaxLogprobs,
		LoRA:                  LoRAConfig{MaxLoRAs: DefaultMaxLoRAs},
		ShutdownTimeout:       30 * time.Second,
		ReadyTimeout:          30 * time.Second,
		Bootstrap:             bootstrap.DefaultConfig(),
		EngineStallTimeout:    60 * time.Second,
		MaxMigrations:         3,
		LogStatsInterval:      10 * time.Second,
	}
}

// DefaultClientMaxBytes is the default frame and message bound of the client
// protocol (clientapi.DefaultMaxBytes).
const DefaultClientMaxBytes = clientapi.DefaultMaxBytes

// DefaultServedModelName is the vllm:* series' model_name when none is configured.
const DefaultServedModelName = apicore.DefaultServedModelName

// ModelName is the model_name label of the vllm:* series.
func (c Config) ModelName() string {
	if c.ServedModelName == "" {
		return DefaultServedModelName
	}
	return c.ServedModelName
}

// Model is what the request paths need to know of the model.
func (c Config) Model() apicore.ModelRules {
	return apicore.ModelRules{EOSTokenIDs: c.EOSTokenIDs, VocabSize: c.VocabSize, MaxLogprobs: c.MaxLogprobs}
}

// Embedded reports whether Start runs built-in mock engines.
func (c Config) Embedded() bool { return c.HandshakeAddress == "" && !c.Bootstrapped() }

// Bootstrapped reports whether a launcher did the handshake (InputAddress set).
func (c Config) Bootstrapped() bool { return c.InputAddress != "" || c.OutputAddress != "" }

// Ranks is the number of engine ranks in the deployment (the data-parallel size).
func (c Config) Ranks() int {
	if c.Embedded() {
		return c.MockEngines
	}
	return c.DataParallelSize
}

// localRanks is the number of ranks registering with a bootstrapped serve.
func (c Config) localRanks() int {
	if c.LocalRanks > 0 {
		return c.LocalRanks
	}
	return c.DataParallelSize - c.StartRank
}

// Validate names the first flag at fault, in the flag's own words.
func (c Config) Validate() error {
	endpoint := func(s string) bool { return strings.HasPrefix(s, "tcp://") || strings.HasPrefix(s, "ipc://") }
	if c.Bootstrapped() {
		switch {
		case c.HandshakeAddress != "":
			return bad("handshake-address", "not with --input-address/--output-address (a launcher already did the handshake)")
		case !endpoint(c.InputAddress):
			return bad("input-address", "%q: want tcp://HOST:PORT or ipc://PATH (required with --output-address)", c.InputAddress)
		case !endpoint(c.OutputAddress):
			return bad("output-address", "%q: want tcp://HOST:PORT or ipc://PATH (required with --input-address)", c.OutputAddress)
		case c.DataParallelSize < 1 || c.DataParallelSize > 65536:
			return bad("data-parallel-size", "must be in [1, 65536], got %d", c.DataParallelSize)
		case c.StartRank < 0 || c.StartRank >= c.DataParallelSize:
			return bad("data-parallel-start-rank", "must be in [0, --data-parallel-size %d), got %d", c.DataParallelSize, c.StartRank)
		case c.LocalRanks < 0 || c.StartRank+c.localRanks() > c.DataParallelSize:
			return bad("data-parallel-size-local", "ranks [%d, %d) exceed --data-parallel-size %d", c.StartRank, c.StartRank+c.localRanks(), c.DataParallelSize)
		}
	} else if !c.Embedded() {
		if !endpoint(c.HandshakeAddress) {
			return bad("handshake-address", "%q: want tcp://HOST:PORT", c.HandshakeAddress)
		}
		if c.DataParallelSize < 1 || c.DataParallelSize > 65536 {
			return bad("data-parallel-size", "must be in [1, 65536], got %d", c.DataParallelSize)
		}
		if c.StartRank != 0 || c.LocalRanks != 0 {
			return bad("data-parallel-start-rank", "only with --input-address/--output-address (bootstrapped engines); with --handshake-address every rank 0..N-1 joins")
		}
	} else if c.MockEngines < 1 || c.MockEngines > 256 {
		return bad("mock-engines", "must be in [1, 256] when --handshake-address is empty, got %d", c.MockEngines)
	}
	if c.EngineTransport != "ipc" && c.EngineTransport != "tcp" {
		return bad("engine-transport", "want ipc or tcp, got %q", c.EngineTransport)
	}
	if c.EngineTransport == "tcp" && c.EngineBindHost == "" {
		return bad("engine-bind-host", "required with --engine-transport tcp")
	}
	if c.MockStep <= 0 {
		return bad("step-ms", "must be positive")
	}
	if c.MaxModelLen < 0 {
		return bad("max-model-len", "must be positive, or 0 for the engines' own, got %d", c.MaxModelLen)
	}
	if err := c.LoRA.validate(); err != nil {
		return err
	}
	if c.MockTokensPerStep < 1 {
		return bad("tokens-per-step", "must be at least 1, got %d", c.MockTokensPerStep)
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddress); err != nil {
		return bad("http-address", "%q: want HOST:PORT", c.HTTPAddress)
	}
	if c.ClientAddress != "" && !strings.HasPrefix(c.ClientAddress, "tcp://") && !strings.HasPrefix(c.ClientAddress, "ipc://") {
		return bad("client-address", "%q: want tcp://HOST:PORT or ipc://PATH", c.ClientAddress)
	}
	if c.ClientTimeout < 0 {
		return bad("client-timeout", "must not be negative")
	}
	if c.ClientMaxFrameBytes < 1<<10 {
		return bad("client-max-frame-bytes", "must be at least 1024, got %d", c.ClientMaxFrameBytes)
	}
	if c.ClientMaxMessageBytes < c.ClientMaxFrameBytes {
		return bad("client-max-message-bytes", "must be at least --client-max-frame-bytes %d, got %d", c.ClientMaxFrameBytes, c.ClientMaxMessageBytes)
	}
	if c.MaxBodyBytes < 1<<10 {
		return bad("max-body-bytes", "must be at least 1024, got %d", c.MaxBodyBytes)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"http-header-timeout", c.HTTPHeaderTimeout}, {"http-body-timeout", c.HTTPBodyTimeout}, {"http-idle-timeout", c.HTTPIdleTimeout},
		{"http-write-timeout", c.HTTPWriteTimeout}} {
		if d.v < 0 {
			return bad(d.flag, "must not be negative")
		}
	}
	if err := c.checkClientToken(); err != nil {
		return err
	}
	if c.ClientMaxConnections < 0 {
		return bad("client-max-connections", "must not be negative (0 = no cap)")
	}
	if c.MaxConnections < 0 {
		return bad("max-connections", "must not be negative (0 = no cap)")
	}
	if c.MaxConcurrentRequests < 0 {
		return bad("max-concurrent-requests", "must not be negative (0 = no cap)")
	}
	for _, k := range c.APIKeys {
		if k == "" || strings.ContainsAny(k, " \t\r\n") {
			return bad("api-key", "keys must be non-empty and contain no whitespace")
		}
	}
	if len(c.APIKeys) > 0 && c.AdminToken == "" {
		// --api-key does not cover the admin endpoints; without a token they trust
		// loopback, which is every client behind a reverse proxy on the same host.
		return bad("admin-token", "required with --api-key: the admin endpoints (drain, undrain) do not take the API keys, "+
			"and without --admin-token any loopback caller (every client of a reverse proxy on this host) could drain every rank")
	}
	if _, err := bootstrap.ParseAdminNetworks("--admin-allow", c.AdminNetworks, c.AdminToken); err != nil {
		return err // names the flag and says why; a non-loopback network needs --admin-token
	}
	if err := c.Model().Validate(); err != nil {
		return err
	}
	for _, m := range c.AllowUtilityMethods {
		if m == "" {
			return bad("allow-utility-method", "must not be empty")
		}
	}
	if c.ExternalCoordinatorAddress != "" {
		if !endpoint(c.ExternalCoordinatorAddress) {
			return bad("external-coordinator-address", "%q: want tcp://HOST:PORT or ipc://PATH", c.ExternalCoordinatorAddress)
		}
		if c.CoordinatorPublishAddress != "" {
			return bad("coordinator-publish-address", "not with --external-coordinator-address (the external coordinator publishes)")
		}
		if c.Embedded() {
			return bad("external-coordinator-address", "needs real engines (--handshake-address or --input-address)")
		}
	}
	switch c.LBPolicy {
	case dispatcher.PolicyLeastLoaded, dispatcher.PolicyPowerOfTwo, dispatcher.PolicyRoundRobin,
		dispatcher.PolicyKV, dispatcher.PolicyPrefix:
	default:
		return bad("lb-policy", "want least-loaded, power-of-two, round-robin, kv or prefix, got %q", c.LBPolicy)
	}
	if err := c.KV.validate(c.LBPolicy); err != nil {
		return err
	}
	if c.CoordinatorPublishAddress != "" && !strings.HasPrefix(c.CoordinatorPublishAddress, "tcp://") {
		return bad("coordinator-publish-address", "%q: want tcp://HOST:PORT", c.CoordinatorPublishAddress)
	}
	if c.BootstrapAddress != "" {
		if _, _, err := net.SplitHostPort(c.BootstrapAddress); err != nil {
			return bad("bootstrap-address", "%q: want HOST:PORT", c.BootstrapAddress)
		}
		b := c.Bootstrap
		b.Address = c.BootstrapAddress
		if err := b.Validate(); err != nil {
			return bad("bootstrap-address", "%v", err)
		}
	}
	if c.EngineStallTimeout < 0 {
		return bad("engine-stall-timeout", "must not be negative")
	}
	if c.MaxMigrations < 0 {
		return bad("max-migrations", "must not be negative")
	}
	if c.ShutdownTimeout < 0 {
		return bad("shutdown-timeout", "must not be negative")
	}
	if c.OTLPTracesEndpoint != "" {
		if u, err := url.Parse(c.OTLPTracesEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("otlp-traces-endpoint", "%q: want an OTLP/HTTP URL such as http://HOST:4318", c.OTLPTracesEndpoint)
		}
	}
	if c.LogStatsInterval < 0 {
		return bad("log-stats-interval", "must not be negative (0 = off)")
	}
	return c.PD.validate(&c)
}
