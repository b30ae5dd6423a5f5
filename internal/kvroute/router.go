package kvroute

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/kvindex"
	"github.com/switchyard-llm/switchyard/wire"
)

// Mode says where the index learns what each engine caches.
type Mode uint8

const (
	// Events: from the engines' own KV events (--lb-policy kv).
	Events Mode = iota
	// Routed: from the prompts switchyard routed, bounded per engine by its
	// reported cache size (--lb-policy prefix), for engines that publish none.
	Routed
)

// Config configures a Router. Zero fields take defaults.
type Config struct {
	Mode  Mode
	Index kvindex.Config
	// BalanceThreshold: see kvindex.Scorer; 0 = its default.
	BalanceThreshold float64
	// Registerer receives the switchyard_kv_* metrics; nil = not registered.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	Now        func() time.Time
}

// Router is the index behind one mutex, fed by events and asked for ranks. All
// methods are safe for concurrent use; the lock is held for one lookup or one
// batch, never across IO.
type Router struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu      sync.Mutex
	ix      *kvindex.Index
	sc      kvindex.Scorer
	matches []kvindex.Match
	cands   []kvindex.Candidate
	stored  kvindex.Stored
	hashes  []uint64
	engines map[int]engineCache // Routed mode: what each engine reported

	// For the stats line: prompt and predicted-cached tokens routed so far.
	promptTokens, cachedTokens atomic.Int64
}

// engineCache is an engine's reported cache, which bounds its prefix-mode entries.
type engineCache struct{ blocks, blockSize int }

// New returns a Router with an empty index.
func New(cfg Config) (*Router, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Index.Seed == 0 {
		// A random content-hash key: a client cannot aim colliding prompts at it.
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Index.Seed = binary.LittleEndian.Uint64(b[:]) | 1
	}
	ix, err := kvindex.New(cfg.Index)
	if err != nil {
		return nil, fmt.Errorf("kvroute: %w", err)
	}
	r := &Router{cfg: cfg, log: cfg.Logger, ix: ix, engines: map[int]engineCache{},
		sc: kvindex.Scorer{BalanceThreshold: cfg.BalanceThreshold}}
	if r.m, err = newMetrics(cfg.Registerer, r); err != nil {
		return nil, fmt.Errorf("kvroute: registering metrics: %w", err)
	}
	return r, nil
}

// Route implements dispatcher.CacheRouter: the rank whose cached prefix of the prompt
// saves the most prefill for its load, or -1 (least-loaded decides) when the prompt
// cannot be keyed.
func (r *Router) Route(req *wire.EngineCoreRequest, loads []dispatcher.Load, seq uint64) int {
	n := len(req.PromptTokenIDs)
	if n == 0 || len(loads) == 0 {
		return -1
	}
	q := kvindex.Query{Tokens: req.PromptTokenIDs, StopAt: stopAt(req), Now: r.cfg.Now().UnixNano()}
	if req.LoRA != nil {
		q.LoRAName = req.LoRA.Name
	}
	if req.CacheSalt.Valid {
		q.CacheSalt, q.HasSalt = req.CacheSalt.Value, true
	}
	r.mu.Lock()
	r.matches = r.ix.Lookup(&q, r.matches[:0])
	r.cands = r.candidates(loads)
	d := r.sc.Choose(r.cands, n, seq)
	if d.Index >= 0 {
		r.remember(loads[d.Index].Rank, &q)
	}
	r.mu.Unlock()
	r.m.decisions[d.Reason].Inc()
	if d.Index >= 0 {
		r.promptTokens.Add(int64(n))
		r.cachedTokens.Add(int64(d.CachedTokens))
		r.m.promptTokens.Add(float64(n))
		r.m.cachedTokens.Add(float64(d.CachedTokens))
	}
	return d.Index
}

// candidates lines the lookup's matches up with loads. Caller holds r.mu.
func (r *Router) candidates(loads []dispatcher.Load) []kvindex.Candidate {
	c := r.cands[:0]
	for i := range loads {
		c = append(c, kvindex.Candidate{Ready: loads[i].Ready, Load: loads[i].Score()})
	}
	for _, m := range r.matches {
		// loads are in rank order, usually rank i at index i.
		i := m.Rank
		if i >= len(loads) || loads[i].Rank != m.Rank {
			i = indexOfRank(loads, m.Rank)
		}
		if i >= 0 {
			c[i].CachedTokens, c[i].PendingTokens = m.CachedTokens, m.PendingTokens
		}
	}
	return c
}

func indexOfRank(loads []dispatcher.Load, rank int) int {
	for i := range loads {
		if loads[i].Rank == rank {
			return i
		}
	}
	return -1
}

// remember notes that the prompt is on its way to rank: a pending mark until the
// engine's events confirm it, or, in prefix mode, the index entry itself. Caller
// holds r.mu.
func (r *Router) remember(rank int, q *kvindex.Query) {
	if r.cfg.Mode == Routed {
		ec := r.engines[rank]
		bs := ec.blockSize
		if bs <= 0 {
			bs = 16 // vLLM's default block_size
		}
		r.ix.Routed(rank, q, ec.blocks, bs)
		return
	}
	r.ix.MarkPending(rank, q, q.Now)
}

// stopAt is the first prompt position switchyard cannot key as the engine does:
// multimodal content (its extra keys hold the items' hashes) or prompt embeddings.
// Conservative: any multimodal feature stops the lookup at the start.
func stopAt(req *wire.EngineCoreRequest) int {
	if req.PromptEmbeds != nil || (len(req.MMFeatures) > 0 && !isNil(req.MMFeatures)) {
		return 0
	}
	return -1
}

func isNil(raw wire.Raw) bool {
	return len(raw) == 1 && (raw[0] == 0xc0 || raw[0] == 0x90)
}

// EngineCache records an engine's reported cache (num_gpu_blocks, block_size), which
// bounds what prefix mode indexes for it.
func (r *Router) EngineCache(rank, blocks, blockSize int) {
	r.m.rank(rank) // its series exist from now on
	r.mu.Lock()
	defer r.mu.Unlock()
	r.engines[rank] = engineCache{blocks: blocks, blockSize: blockSize}
}

// Clear forgets everything rank holds: it left, rejoined or restarted, its events
// had a gap no replay covered, or it said AllBlocksCleared.
func (r *Router) Clear(rank int, reason string) {
	r.mu.Lock()
	r.ix.Clear(rank)
	r.mu.Unlock()
	r.m.clears.WithLabelValues(rankLabel(rank), reason).Inc()
}

// Blocks is how many blocks the index holds for rank.
func (r *Router) Blocks(rank int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ix.Blocks(rank)
}

// Predicted returns the prompt tokens routed and those predicted cached, so far.
func (r *Router) Predicted() (prompt, cached int64) {
	return r.promptTokens.Load(), r.cachedTokens.Load()
}
