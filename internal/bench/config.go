package bench

import (
	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"

	"fmt"
	"time"
)

// Mode says how the harness reaches switchyard.
type Mode string

// Modes. The embedded modes run switchyard, the mock engines and the relay baseline in
// this process (or the engines as child processes), so both sides of every timestamp
// share one clock.
const (
	// ModeEmbedded drives an in-process switchyard through its Go API (dispatcher.Submit).
	ModeEmbedded Mode = "embedded"
	// ModeTarget drives a running frontend at Config.Target (http:// or tcp://, ipc://).
	ModeTarget Mode = "target"
)

// Config is every knob of one bench run. It is written verbatim into the JSON report so
// a run can be reproduced from its own output.
type Config struct {
	Mode   Mode   `json:"mode"`
	Target string `json:"target,omitempty"` // ModeTarget: http://HOST:PORT or tcp://HOST:PORT (msgpack client protocol)
	// EnginesTo (target mode) is the handshake address of a frontend started with
	// --handshake-address and no engines: the bench's engines connect there, so the
	// dispatch and return latencies are measured across processes.
	EnginesTo string `json:"engines_to,omitempty"`
	// TargetPID (target mode) is the frontend's process id: its CPU and RSS are read
	// from /proc and reported instead of this process's.
	TargetPID int `json:"target_pid,omitempty"`
	// Client is how the embedded switchyard is driven: "zmq" (the msgpack client
	// protocol over a DEALER, the same path the relay baseline takes) or "go" (the
	// in-process dispatcher API, one socket hop fewer than the baseline).
	Client string `json:"client"`

	// Policy is the embedded switchyard's --lb-policy; empty: its default
	// (least-loaded). `bench --http` sets round-robin, the floor's routing: in a
	// closed loop the policy decides which requests an engine steps together, so the
	// bursts a frontend works through (see docs/benchmarks.md), and a latency ratio
	// between two frontends is a ratio of their costs only when both route alike.
	Policy string `json:"lb_policy,omitempty"`

	Engines            int    `json:"engines"`              // mock engine ranks (embedded)
	EnginesAsProcesses bool   `json:"engines_as_processes"` // run each engine as a child process
	Transport          string `json:"transport"`            // "ipc" or "tcp" between frontend/relay and engines
	Clients            int    `json:"clients"`              // logical clients submitting concurrently

	// Load: Rate > 0 is an open loop with Poisson arrivals at Rate requests/s;
	// Rate == 0 is a closed loop with Concurrency requests always in flight.
	Rate        float64 `json:"rate"`
	Concurrency int     `json:"concurrency"`

	PromptTokens  int `json:"prompt_tokens"`
	OutputTokens  int `json:"output_tokens"` // max_tokens of every request
	TokensPerStep int `json:"tokens_per_step"`
	// VLLMLayout is the vLLM wire layout the bench engines speak (a built-in name);
	// empty = the native (newest) one. switchyard translates between its client
	// protocol and that layout; the relay baseline's client speaks it directly.
	VLLMLayout string        `json:"vllm_layout,omitempty"`
	StepTime   time.Duration `json:"step_time_ns"`

	Duration time.Duration `json:"duration_ns"` // measured phase; ignored when Requests > 0
	Requests int           `json:"requests"`    // stop after this many measured requests (0: use Duration)
	Warmup   time.Duration `json:"warmup_ns"`   // requests submitted during warm-up are not measured
	Seed     uint64        `json:"seed"`

	// Sweep, when non-empty, repeats the run at each of these rates (open loop) and
	// records a throughput-vs-latency curve.
	Sweep []float64 `json:"sweep,omitempty"`

	// Baseline runs the relay baseline in the same run (the ratio needs it).
	Baseline bool `json:"baseline"`
	// RelayWork makes the relay spend this much CPU (a busy loop) on every message
	// it forwards, each way, as a frontend's decoding and routing would. It is a
	// calibration, not a baseline: how much latency a given CPU cost per message
	// adds on this machine. Latency targets are not judged when it is set.
	RelayWork time.Duration `json:"relay_work_ns,omitempty"`
	// BaselineVsBaseline measures the baseline a second time in the switchyard
	// phase's place (an A/A run): a second relay, or with HTTP a second floor. It is a
	// calibration of the ratio itself: identical systems measured one after the
	// other, so the spread of their ratio over runs is the noise any frontend's ratio
	// carries on this machine, and the targets' verdicts say how often a frontend
	// costing nothing would meet them.
	BaselineVsBaseline bool `json:"baseline_vs_baseline,omitempty"`

	// Inflight, when > 0, runs the memory scenario instead of the latency one: it holds
	// this many requests in flight at once and reports the frontend heap per request.
	Inflight int `json:"inflight,omitempty"`

	// Profile, when set, writes a CPU profile of the switchyard phase to this file.
	Profile string `json:"profile,omitempty"`
	// Trace, when set, writes a runtime execution trace (go tool trace) of the first
	// two seconds of each phase's measured window to Trace.<system>: where the
	// scheduler made a request wait.
	Trace string `json:"trace,omitempty"`

	// HTTP runs the HTTP comparison instead of the client-protocol one: an HTTP
	// floor (HTTPFloor) and switchyard's HTTP API with the same engines and load,
	// each answering JSON, then each streaming SSE (httpmode.go).
	HTTP bool `json:"http,omitempty"`
	// HTTPStream is the phase's answer shape in the HTTP comparison (set per phase).
	HTTPStream bool `json:"-"`

	// Repeat runs the whole measurement this many times (0 or 1: once). Targets are
	// judged met or missed only over two runs or more: one run's noise decides a
	// ratio either way.
	Repeat int `json:"repeat,omitempty"`

	// KV, when set, runs a cache-aware routing workload against each of its
	// policies instead of the dispatch-latency comparison (kvrun.go).
	KV *KVBenchConfig `json:"kv,omitempty"`

	// Scale, when set, runs the scale sweeps (RunScale, scale.go) with this
	// configuration as every point's load.
	Scale *ScaleConfig `json:"scale,omitempty"`
}

// DefaultConfig is the run the README quotes for the first target: 8 engines, 5,000
// requests/s open loop, 10 s measured after 2 s of warm-up.
func DefaultConfig() Config {
	return Config{
		Mode:          ModeEmbedded,
		Engines:       8,
		Transport:     "ipc",
		Client:        "zmq",
		Clients:       1,
		Rate:          5000,
		Concurrency:   64,
		PromptTokens:  32,
		OutputTokens:  8,
		TokensPerStep: 1,
		StepTime:      time.Millisecond,
		Duration:      10 * time.Second,
		Warmup:        2 * time.Second,
		Seed:          1,
		Baseline:      true,
	}
}

// Validate names the first field at fault.
func (c *Config) Validate() error {
	if c.KV != nil {
		return c.validateKV()
	}
	bad := func(field, why string) error { return &ConfigError{Field: field, Msg: why} }
	switch c.Mode {
	case ModeEmbedded:
		if c.Engines < 1 || c.Engines > 65535 {
			return bad("engines", "must be in 1..65535")
		}
	case ModeTarget:
		if c.Target == "" {
			return bad("target", "required in target mode")
		}
	default:
		return bad("mode", fmt.Sprintf("unknown mode %q", c.Mode))
	}
	switch c.Policy {
	case "", dispatcher.PolicyLeastLoaded, dispatcher.PolicyPowerOfTwo, dispatcher.PolicyRoundRobin:
	default: // kv and prefix need KV events or prompts with shared prefixes: --workload
		return bad("lb_policy", fmt.Sprintf("want %s, %s or %s, got %q",
			dispatcher.PolicyLeastLoaded, dispatcher.PolicyPowerOfTwo, dispatcher.PolicyRoundRobin, c.Policy))
	}
	if c.Client != "zmq" && c.Client != "go" {
		return bad("client", `must be "zmq" or "go"`)
	}
	if c.Transport != "ipc" && c.Transport != "tcp" {
		return bad("transport", `must be "ipc" or "tcp"`)
	}
	if c.Clients < 1 {
		return bad("clients", "must be at least 1")
	}
	if c.Rate < 0 {
		return bad("rate", "must not be negative")
	}
	if c.Rate == 0 && c.Concurrency < 1 && c.Inflight == 0 {
		return bad("concurrency", "a closed loop (rate 0) needs concurrency >= 1")
	}
	// The first prompt token carries the request's sequence number and the second a
	// marker, so the engines can join their timestamps to the client's (see engine.go).
	if c.PromptTokens < 2 {
		return bad("prompt_tokens", "must be at least 2")
	}
	if c.OutputTokens < 1 {
		return bad("output_tokens", "must be at least 1")
	}
	if c.VLLMLayout != "" && wire.BuiltinLayout(c.VLLMLayout) == nil {
		return fmt.Errorf("bench: vllm layout %q: built-in layouts are %v", c.VLLMLayout, wire.LayoutNames())
	}
	if c.TokensPerStep < 1 {
		return bad("tokens_per_step", "must be at least 1")
	}
	if c.StepTime < 0 {
		return bad("step_time", "must not be negative")
	}
	if c.Requests < 0 {
		return bad("requests", "must not be negative")
	}
	if c.Requests == 0 && c.Duration <= 0 && c.Inflight == 0 {
		return bad("duration", "must be positive when requests is 0")
	}
	if c.Warmup < 0 {
		return bad("warmup", "must not be negative")
	}
	for _, r := range c.Sweep {
		if r <= 0 {
			return bad("sweep", "every rate must be positive")
		}
	}
	if c.Inflight < 0 {
		return bad("inflight", "must not be negative")
	}
	if c.Repeat < 0 {
		return bad("repeat", "must not be negative")
	}
	if c.Scale != nil {
		if err := c.validateScale(); err != nil {
			return err
		}
	}
	if c.BaselineVsBaseline {
		switch {
		case c.Mode != ModeEmbedded || (!c.Baseline && !c.HTTP):
			return bad("baseline_vs_baseline", "needs the embedded mode with its baseline")
		case c.RelayWork > 0:
			return bad("baseline_vs_baseline", "and relay_work are two different calibrations: pick one")
		case c.Inflight > 0:
			return bad("baseline_vs_baseline", "does not apply to the memory scenario")
		}
	}
	return nil
}

// layout is the engines' wire layout.
func (c *Config) layout() *wire.Layout {
	if l := wire.BuiltinLayout(c.VLLMLayout); l != nil {
		return l
	}
	return wire.Native()
}
