package server

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KVConfig configures cache-aware routing (--lb-policy kv and prefix). Zero fields
// take DefaultKVConfig's values.
type KVConfig struct {
	// EventsEndpoints are --kv-events-endpoint values: an endpoint as given to
	// vLLM's --kv-events-config (the per-rank port offset is applied), or
	// RANK=ENDPOINT for one rank exactly. Empty: each engine's registration says.
	EventsEndpoints []string
	// ReplayEndpoints are --kv-events-replay-endpoint values, same forms.
	ReplayEndpoints []string
	// Topic is the subscription prefix (--kv-events-topic); empty = every topic.
	Topic string
	// MaxBlocks caps the index's (block, rank) entries (--kv-index-max-blocks).
	MaxBlocks int
	// BalanceThreshold (--kv-balance-threshold): an engine whose load (queued and
	// running requests) exceeds the least-loaded engine's by more than this is not
	// chosen for its cache; the request goes by load.
	BalanceThreshold float64
	// PendingTTL bounds how long a routed prompt counts as on its way to an
	// engine's cache before the engine's own events say so.
	PendingTTL time.Duration

	// The built-in mock engines' simulated prefix cache (--mock-kv-cache-blocks,
	// --mock-prefill-us-per-token); with --lb-policy kv they also publish events.
	MockCacheBlocks     int
	MockPrefillPerToken time.Duration
}

// DefaultKVConfig: one million (block, rank) entries (about 64 MiB), a guard of 8
// requests, pending marks for 10 s, and mock caches of 4,096 blocks (64 Ki
// tokens) that prefill at 20 µs per uncached token.
func DefaultKVConfig() KVConfig {
	return KVConfig{
		MaxBlocks:           1 << 20,
		BalanceThreshold:    8,
		PendingTTL:          10 * time.Second,
		MockCacheBlocks:     4096,
		MockPrefillPerToken: 20 * time.Microsecond,
	}
}

// kvEndpoints parses endpoint flags: a plain ENDPOINT (for every rank, offset by
// rank) and RANK=ENDPOINT (one rank, as given). It returns the plain one ("" if
// none) and the per-rank ones.
func kvEndpoints(flag string, vals []string) (all string, byRank map[int]string, err error) {
	for _, v := range vals {
		r, ep, ok := strings.Cut(v, "=")
		if !ok || strings.Contains(r, "://") {
			if all != "" {
				return "", nil, bad(flag, "one plain endpoint at most (the others take RANK=ENDPOINT), got %q and %q", all, v)
			}
			all = v
			continue
		}
		rank, perr := strconv.Atoi(r)
		if perr != nil || rank < 0 || rank > 65535 {
			return "", nil, bad(flag, "%q: want ENDPOINT or RANK=ENDPOINT", v)
		}
		if byRank == nil {
			byRank = map[int]string{}
		}
		byRank[rank] = ep
	}
	for _, ep := range append([]string{all}, slices.Collect(maps.Values(byRank))...) {
		if ep != "" && !strings.HasPrefix(ep, "tcp://") && !strings.HasPrefix(ep, "ipc://") {
			return "", nil, bad(flag, "%q: want tcp://HOST:PORT or ipc://PATH", ep)
		}
	}
	return all, byRank, nil
}

// bad names the flag at fault, as Config.Validate does.
func bad(flag, format string, args ...any) error {
	return fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...))
}

// validate checks the KV flags against the policy they serve.
func (k KVConfig) validate(policy string) error {
	if _, _, err := kvEndpoints("kv-events-endpoint", k.EventsEndpoints); err != nil {
		return err
	}
	if _, _, err := kvEndpoints("kv-events-replay-endpoint", k.ReplayEndpoints); err != nil {
		return err
	}
	switch {
	case k.MaxBlocks < 0:
		return bad("kv-index-max-blocks", "must be >= 0, got %d", k.MaxBlocks)
	case k.BalanceThreshold < 0:
		return bad("kv-balance-threshold", "must be >= 0, got %v", k.BalanceThreshold)
	case k.PendingTTL < 0:
		return bad("kv-pending-ttl", "must be >= 0, got %v", k.PendingTTL)
	case k.MockCacheBlocks < 0:
		return bad("mock-kv-cache-blocks", "must be >= 0, got %d", k.MockCacheBlocks)
	case k.MockPrefillPerToken < 0:
		return bad("mock-prefill-us-per-token", "must be >= 0, got %v", k.MockPrefillPerToken)
	}
	if policy != "kv" && (len(k.EventsEndpoints) > 0 || len(k.ReplayEndpoints) > 0) {
		return bad("kv-events-endpoint", "KV events are followed only with --lb-policy kv (got %q)", policy)
	}
	return nil
}
