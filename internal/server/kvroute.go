package server

import (
	"fmt"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/freeport"
	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/kvroute"
	"github.com/switchyard-llm/switchyard/internal/kvsub"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/kvindex"
)

// cacheAware reports whether the policy routes by prefix cache.
func cacheAware(policy string) bool {
	return policy == dispatcher.PolicyKV || policy == dispatcher.PolicyPrefix
}

// newKVEdge builds the cache-aware routing of one engine pool (the only pool, or the
// prefill pool with P/D): the index, and with --lb-policy kv the subscriber that
// follows the pool's KV events. Nil for the other policies.
func newKVEdge(cfg Config, reg prometheus.Registerer, log *slog.Logger, mocks *mockKVPorts) (*kvroute.Edge, error) {
	if !cacheAware(cfg.LBPolicy) {
		return nil, nil
	}
	k := cfg.KV
	if mocks != nil {
		k.EventsEndpoints = []string{mocks.endpoint()}
		k.ReplayEndpoints = []string{mocks.replayEndpoint()}
	}
	all, byRank, err := kvEndpoints("kv-events-endpoint", k.EventsEndpoints)
	if err != nil {
		return nil, err
	}
	rall, rbyRank, err := kvEndpoints("kv-events-replay-endpoint", k.ReplayEndpoints)
	if err != nil {
		return nil, err
	}
	icfg := kvindex.DefaultConfig()
	icfg.MaxBlocks = k.MaxBlocks
	icfg.MaxRanks = max(icfg.MaxRanks, cfg.DataParallelSize, cfg.PD.ranks())
	icfg.PendingTTL = k.PendingTTL
	icfg.Seed = 0 // a random key per process
	mode := kvroute.Events
	if cfg.LBPolicy == dispatcher.PolicyPrefix {
		mode = kvroute.Routed
	}
	return kvroute.NewEdge(kvroute.Config{Mode: mode, Index: icfg, BalanceThreshold: k.BalanceThreshold,
		Registerer: reg, Logger: log.With("component", "kv")},
		kvroute.Sources{Endpoint: all, ByRank: byRank, Replay: rall, ReplayByRank: rbyRank, Topic: k.Topic},
		kvsub.Config{})
}

// mockKVPorts are the loopback ports of the built-in mock engines' KV events: each
// engine's PUB connects to 127.0.0.1:pub+rank, which switchyard binds (vLLM's rule for
// an endpoint with a concrete host), and binds its replay ROUTER at
// 127.0.0.1:replay+rank. Nothing listens beyond the loopback.
type mockKVPorts struct{ pub, replay int }

func (p *mockKVPorts) endpoint() string       { return "tcp://127.0.0.1:" + strconv.Itoa(p.pub) }
func (p *mockKVPorts) replayEndpoint() string { return "tcp://127.0.0.1:" + strconv.Itoa(p.replay) }

// pickMockKVPorts finds two runs of n free loopback ports, or nil when the built-in
// engines publish no events (no cache, or not --lb-policy kv).
func pickMockKVPorts(cfg Config, n int) (*mockKVPorts, error) {
	if !cfg.Embedded() || cfg.LBPolicy != dispatcher.PolicyKV || cfg.KV.MockCacheBlocks == 0 {
		return nil, nil
	}
	pub, err := freeport.Run("127.0.0.1", 2*n)
	if err != nil {
		return nil, fmt.Errorf("the mock engines' KV events: %w", err)
	}
	return &mockKVPorts{pub: pub, replay: pub + n}, nil
}

// mockKV gives a built-in mock engine the simulated prefix cache and, with
// --lb-policy kv, its KV-event publisher.
func (s *Server) mockKV(mcfg *mockengine.Config) {
	k := s.cfg.KV
	if !cacheAware(s.cfg.LBPolicy) || k.MockCacheBlocks == 0 {
		return
	}
	mcfg.KVCacheBlocks = k.MockCacheBlocks
	mcfg.PrefillPerToken = k.MockPrefillPerToken
	if p := s.kvMockPorts; p != nil {
		ev := mockengine.DefaultKVEventsConfig()
		ev.Endpoint, ev.ReplayEndpoint = p.endpoint(), p.replayEndpoint()
		mcfg.KVEvents = ev
	}
}

// withKV adds each rank's KV-event subscription to its view: the views of the pool
// that routes by cache (the prefill pool with P/D).
func (s *Server) withKV(views []httpapi.EngineView) []httpapi.EngineView {
	if s.kv == nil {
		return views
	}
	pd := s.cfg.PD.Enabled()
	for i := range views {
		if pd && views[i].Role != mockengine.RolePrefill {
			continue
		}
		if st, ok := s.kv.Status(views[i].Rank); ok {
			views[i].KVEvents = &st
		}
	}
	return views
}
