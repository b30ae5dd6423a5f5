package main

import (
	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/server"
)

// kvFlags are serve's cache-aware routing flags (--lb-policy kv and prefix),
// bound to k; their defaults are server.DefaultKVConfig's.
func kvFlags(k *server.KVConfig) []cli.Flag {
	const cat = "cache-aware routing"
	def := server.DefaultKVConfig()
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "kv-events-endpoint", Destination: &k.EventsEndpoints, Category: cat,
			Usage: "with --lb-policy kv: the KV-event endpoint as given to vLLM's --kv-events-config (tcp://*:5557; the per-rank port offset is applied, " +
				"a wildcard host is the engine's handshake host), or RANK=ENDPOINT for one rank as given; repeatable. Default: each engine's registration says (newest vLLM)",
			Sources: cli.EnvVars("SWITCHYARD_KV_EVENTS_ENDPOINT")},
		&cli.StringSliceFlag{Name: "kv-events-replay-endpoint", Destination: &k.ReplayEndpoints, Category: cat,
			Usage:   "the replay endpoint of vLLM's --kv-events-config (replay_endpoint), same forms; without one a gap in the events clears that engine's index",
			Sources: cli.EnvVars("SWITCHYARD_KV_EVENTS_REPLAY_ENDPOINT")},
		&cli.StringFlag{Name: "kv-events-topic", Destination: &k.Topic, Category: cat,
			Usage:   "KV-event subscription prefix (vLLM's topic); empty = all",
			Sources: cli.EnvVars("SWITCHYARD_KV_EVENTS_TOPIC")},
		&cli.IntFlag{Name: "kv-index-max-blocks", Destination: &k.MaxBlocks, Category: cat, Value: def.MaxBlocks,
			Usage:   "cap on the prefix index's (block, engine) entries, evicting the fullest engine's oldest first (about 64 B each)",
			Sources: cli.EnvVars("SWITCHYARD_KV_INDEX_MAX_BLOCKS")},
		&cli.FloatFlag{Name: "kv-balance-threshold", Destination: &k.BalanceThreshold, Category: cat, Value: def.BalanceThreshold,
			Usage: "an engine whose load (queued + running requests) exceeds the least-loaded engine's by more than this is not chosen for its cache: " +
				"the request goes to the least-loaded engine",
			Sources: cli.EnvVars("SWITCHYARD_KV_BALANCE_THRESHOLD")},
		&cli.DurationFlag{Name: "kv-pending-ttl", Destination: &k.PendingTTL, Category: cat, Value: def.PendingTTL,
			Usage:   "how long a routed prompt counts as on its way into its engine's cache before the engine's events confirm it",
			Sources: cli.EnvVars("SWITCHYARD_KV_PENDING_TTL")},
		&cli.IntFlag{Name: "mock-kv-cache-blocks", Destination: &k.MockCacheBlocks, Category: "embedded default", Value: def.MockCacheBlocks,
			Usage:   "built-in mock engines: prefix-cache capacity in 16-token blocks (0 = no cache); with --lb-policy kv they publish KV events",
			Sources: cli.EnvVars("SWITCHYARD_MOCK_KV_CACHE_BLOCKS")},
		&cli.DurationFlag{Name: "mock-prefill-per-token", Destination: &k.MockPrefillPerToken, Category: "embedded default", Value: def.MockPrefillPerToken,
			Usage:   "built-in mock engines: simulated prefill time per uncached prompt token, one prefill at a time per engine",
			Sources: cli.EnvVars("SWITCHYARD_MOCK_PREFILL_PER_TOKEN")},
	}
}
