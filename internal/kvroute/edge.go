package kvroute

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/kvsub"
)

// Sources says where each rank's KV events are, from the operator's flags; ranks
// they do not name are found in the engines' registrations.
type Sources struct {
	// Endpoint is the endpoint as given to vLLM, for every rank (vLLM's per-rank
	// offset applied); ByRank names one rank's exactly.
	Endpoint string
	ByRank   map[int]string
	// Replay and ReplayByRank are the replay endpoints, same forms.
	Replay       string
	ReplayByRank map[int]string
	Topic        string
}

// Edge is the cache-aware routing of one engine pool: its Router, and in Events mode
// the subscriber that feeds it. The server calls EngineUp and EngineDown from the
// frontend's handler.
type Edge struct {
	*Router
	src Sources
	sub *kvsub.Subscriber // nil in Routed mode
	log *slog.Logger

	mu     sync.Mutex
	warned map[int]bool // ranks told to have no event source
}

// NewEdge starts nothing until the first EngineUp.
func NewEdge(cfg Config, src Sources, subCfg kvsub.Config) (*Edge, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	e := &Edge{Router: r, src: src, log: r.log, warned: map[int]bool{}}
	if cfg.Mode == Events {
		subCfg.Logger = r.log
		e.sub = kvsub.New(subCfg, r)
		if cfg.Registerer != nil {
			if err := cfg.Registerer.Register(gapsCollector{e}); err != nil {
				return nil, fmt.Errorf("kvroute: registering metrics: %w", err)
			}
		}
	}
	return e, nil
}

// EngineUp starts over for rank (a rejoined engine's cache is not the old one's) and,
// in Events mode, follows its publisher.
func (e *Edge) EngineUp(rank int, info frontend.EngineInfo) {
	e.Clear(rank, "engine_up")
	blocks, bs := 0, 0
	if info.Ready.NumGPUBlocks.Valid {
		blocks = int(info.Ready.NumGPUBlocks.Value)
	}
	if info.Ready.BlockSize.Valid {
		bs = int(info.Ready.BlockSize.Value)
	}
	e.EngineCache(rank, blocks, bs)
	if e.sub == nil {
		return
	}
	t, err := e.target(rank, info)
	if err != nil {
		e.warnOnce(rank, "kv events: no event source for this engine; its requests are routed by load", "rank", rank, "why", err.Error())
		e.sub.Drop(rank)
		return
	}
	e.sub.Set(rank, t)
}

// EngineDown forgets rank's cache and stops following its publisher.
func (e *Edge) EngineDown(rank int) {
	e.Clear(rank, "engine_down")
	if e.sub != nil {
		e.sub.Drop(rank)
	}
}

func (e *Edge) warnOnce(rank int, msg string, args ...any) {
	e.mu.Lock()
	first := !e.warned[rank]
	e.warned[rank] = true
	e.mu.Unlock()
	if first {
		e.log.Warn(msg, args...)
	}
}

// Status is one rank's kv_events in /v1/engines.
type Status struct {
	kvsub.Status
	Blocks int `json:"blocks"`
}

// Status reports rank's event source; false when it has none.
func (e *Edge) Status(rank int) (Status, bool) {
	if e.sub == nil {
		return Status{}, false
	}
	st, ok := e.sub.Status(rank)
	if !ok {
		return Status{}, false
	}
	return Status{Status: st, Blocks: e.Blocks(rank)}, true
}

// Close stops the subscriber and joins its goroutines.
func (e *Edge) Close() error {
	if e.sub != nil {
		return e.sub.Close()
	}
	return nil
}

// target is where rank's events are: the flags, else its registration.
func (e *Edge) target(rank int, info frontend.EngineInfo) (kvsub.Target, error) {
	ep, epRank := pick(e.src.ByRank, e.src.Endpoint, rank)
	rep, repRank := pick(e.src.ReplayByRank, e.src.Replay, rank)
	topic := e.src.Topic
	if ep == "" {
		reg, err := registered(info)
		if err != nil {
			return kvsub.Target{}, err
		}
		ep, epRank = reg.Endpoint, rank
		if rep == "" {
			rep, repRank = reg.ReplayEndpoint, rank
		}
	}
	res, err := kvsub.Resolve(ep, epRank, info.RemoteHost, false)
	if err != nil {
		return kvsub.Target{}, err
	}
	t := kvsub.Target{Endpoint: res, Topic: topic, Given: ep}
	if rep != "" {
		rr, err := kvsub.Resolve(rep, repRank, info.RemoteHost, true)
		if err != nil {
			return kvsub.Target{}, fmt.Errorf("replay endpoint: %w", err)
		}
		t.Replay = rr.Addr
	}
	return t, nil
}

// pick is rank's endpoint from flags and the rank to offset it by: a per-rank one as
// given (offset 0), else the plain one offset by rank.
func pick(byRank map[int]string, all string, rank int) (string, int) {
	if ep, ok := byRank[rank]; ok {
		return ep, 0
	}
	return all, rank
}

// eventsConfig is the part of vLLM's KVEventsConfig that says where events go.
type eventsConfig struct {
	Enable         bool   `msgpack:"enable_kv_cache_events"`
	Publisher      string `msgpack:"publisher"`
	Endpoint       string `msgpack:"endpoint"`
	ReplayEndpoint string `msgpack:"replay_endpoint"`
	Topic          string `msgpack:"topic"`
}

// registered reads the kv_events_config of the engine's registration (newest vLLM).
func registered(info frontend.EngineInfo) (eventsConfig, error) {
	raw := info.Ready.KVEventsConfig
	if len(raw) == 0 || isNil(raw) {
		return eventsConfig{}, fmt.Errorf("its registration has no kv_events_config (vLLM before the newest sends none): name it with --kv-events-endpoint")
	}
	var c eventsConfig
	if err := msgpack.Unmarshal(raw, &c); err != nil {
		return eventsConfig{}, fmt.Errorf("its registration's kv_events_config does not decode: %v", err)
	}
	switch {
	case !c.Enable:
		return c, fmt.Errorf("its kv_events_config has enable_kv_cache_events false")
	case c.Publisher != "" && c.Publisher != "zmq":
		return c, fmt.Errorf("its kv_events_config publisher is %q; switchyard follows zmq", c.Publisher)
	case c.Endpoint == "":
		return c, fmt.Errorf("its kv_events_config has no endpoint")
	}
	return c, nil
}

var gapsDesc = prometheus.NewDesc("switchyard_kv_event_gaps_total",
	"Gaps in an engine rank's KV-event sequence (lost messages; replayed or its index cleared).", []string{"rank"}, nil)

// gapsCollector reads the subscriber's per-rank counts at scrape time.
type gapsCollector struct{ e *Edge }

func (c gapsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- gapsDesc }

func (c gapsCollector) Collect(ch chan<- prometheus.Metric) {
	for _, rank := range c.e.m.knownRanks() {
		if st, ok := c.e.sub.Status(rank); ok {
			ch <- prometheus.MustNewConstMetric(gapsDesc, prometheus.CounterValue, float64(st.Gaps), rankLabel(rank))
		}
	}
}
