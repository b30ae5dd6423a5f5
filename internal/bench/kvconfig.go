package bench

import (
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
)

// KVBenchConfig is a cache-aware routing run (Config.KV): the workload, replayed
// unchanged against each policy, on mock engines with simulated prefix caches.
type KVBenchConfig struct {
	Workload KVWorkloadConfig `json:"workload"`
	// Policies are the --lb-policy values to run, in order, each with a fresh
	// switchyard and fresh engines (empty caches).
	Policies []string `json:"policies"`
	// CacheShare sizes every engine's cache: this share of the workload's working
	// set (KVWorkload.BlocksPerEngine), whatever the engine count. At the default
	// quarter, four engines hold the working set between them only if each holds
	// its own part of it, which is what cache-aware routing is for.
	CacheShare float64 `json:"cache_share"`
	// PrefillPerToken is the engines' simulated prefill time per uncached prompt
	// token, serialised per engine: large enough that prefill dominates TTFT, as on
	// a GPU with long prompts.
	PrefillPerToken time.Duration `json:"prefill_per_token_ns"`
}

// DefaultCacheShare is the cache sizing the targets are stated for.
const DefaultCacheShare = 0.25

// DefaultKVPolicies are the policies a kv run compares by default: the load-only
// baseline, the index of routed prompts, and the index of the engines' events.
var DefaultKVPolicies = []string{dispatcher.PolicyLeastLoaded, dispatcher.PolicyPrefix, dispatcher.PolicyKV}

// DefaultKVBench is the kv run of workload kind the README quotes.
func DefaultKVBench(kind string) *KVBenchConfig {
	return &KVBenchConfig{Workload: DefaultKVWorkload(kind), Policies: slices.Clone(DefaultKVPolicies),
		CacheShare: DefaultCacheShare, PrefillPerToken: 20 * time.Microsecond}
}

// validateKV checks a kv run; the dispatch-latency knobs (rate, prompt and output
// lengths, duration) do not apply to it.
func (c *Config) validateKV() error {
	bad := func(field, why string) error { return &ConfigError{Field: field, Msg: why} }
	k := c.KV
	switch {
	case c.Mode != ModeEmbedded:
		return bad("mode", "a kv workload runs its own engines: embedded mode only")
	case c.Engines < 1 || c.Engines > 1024:
		return bad("engines", "must be in 1..1024")
	case c.EnginesAsProcesses || c.HTTP || c.Inflight > 0 || len(c.Sweep) > 0 || c.BaselineVsBaseline:
		return bad("workload", "a kv workload takes none of --engines-as-processes, --http, --inflight, --sweep, --baseline-vs-baseline")
	case c.Transport != "ipc" && c.Transport != "tcp":
		return bad("transport", `must be "ipc" or "tcp"`)
	case c.TokensPerStep < 1:
		return bad("tokens_per_step", "must be at least 1")
	case c.StepTime <= 0:
		return bad("step_time", "must be positive (the mock engines step on a clock)")
	case c.Repeat < 0:
		return bad("repeat", "must not be negative")
	case len(k.Policies) == 0:
		return bad("lb_policy", "name at least one policy")
	case k.CacheShare <= 0 || k.CacheShare > 64:
		return bad("cache_share", "must be in (0, 64]")
	case k.PrefillPerToken < 0:
		return bad("prefill_per_token", "must not be negative")
	}
	known := []string{dispatcher.PolicyLeastLoaded, dispatcher.PolicyPowerOfTwo, dispatcher.PolicyRoundRobin,
		dispatcher.PolicyPrefix, dispatcher.PolicyKV}
	for i, p := range k.Policies {
		if !slices.Contains(known, p) {
			return bad("lb_policy", fmt.Sprintf("unknown policy %q (want some of %v)", p, known))
		}
		if slices.Contains(k.Policies[:i], p) {
			return bad("lb_policy", fmt.Sprintf("policy %q named twice", p))
		}
	}
	return k.Workload.Validate()
}
