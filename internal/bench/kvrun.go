package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/freeport"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/server"
)

// runKV replays cfg.KV's workload against each policy in turn, each with a fresh
// switchyard and fresh mock engines (empty caches), and fills r's kv figures.
func runKV(ctx context.Context, cfg Config, opt Options, r *Report) error {
	opt = opt.withDefaults()
	w, err := NewKVWorkload(cfg.KV.Workload)
	if err != nil {
		return err
	}
	blocks := w.BlocksPerEngine(cfg.KV.CacheShare)
	r.KVWorkload = &KVWorkloadFigures{Requests: len(w.Requests), PromptTokens: w.PromptTokens,
		OracleHitRatio: w.OracleHitRatio(), WorkingSetBlocks: w.WorkingSetBlocks, BlocksPerEngine: blocks}
	r.KV = map[string]*KVPolicy{}
	for _, policy := range cfg.KV.Policies {
		opt.Logger.Info("kv policy starting", "policy", policy, "workload", w.Config.Kind, "requests", len(w.Requests))
		p, err := runKVPolicy(ctx, cfg, w, policy, blocks, opt)
		if err != nil {
			return fmt.Errorf("kv %s: %w", policy, err)
		}
		r.KV[policy] = p
		if warn := kvLagWarning(p); warn != "" {
			r.Warnings = append(r.Warnings, warn)
		}
	}
	return nil
}

// runKVPolicy is one policy's replay: switchyard, the engines, the workload, the
// engines' counts.
func runKVPolicy(ctx context.Context, cfg Config, w *KVWorkload, policy string, blocks int, opt Options) (_ *KVPolicy, err error) {
	reg := prometheus.NewRegistry()
	srv, err := startKVServer(ctx, cfg, policy, reg)
	if err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if serr := srv.Shutdown(sctx); err == nil && serr != nil {
			err = serr
		}
	}()
	// Every interface: the engines bind tcp://*:PORT, as vLLM binds it.
	base, err := freeport.Run("", 2*cfg.Engines)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	engines := startKVEngines(cfg, w, srv.HandshakeAddr(), blocks, base, slog.New(warnOnly{opt.Logger.Handler()}))
	defer func() {
		if eerr := engines.stop(); err == nil && eerr != nil {
			err = eerr
		}
	}()
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := (&embeddedSystem{srv: srv}).ready(readyCtx, cfg.Engines); err != nil {
		return nil, err
	}
	if policy == dispatcher.PolicyKV {
		if err := waitKVSubscribed(readyCtx, srv, cfg.Engines); err != nil {
			return nil, err
		}
	}
	drv := newKVDriver(srv.Dispatcher(), w)
	lag := startLagProbe()
	began := time.Now()
	drv.run(ctx, began)
	lagP99 := lag.finish()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := drv.figures(policy, began)
	p.TimerLagP99MS = lagP99
	engines.count(p)
	p.OracleHitRatio = w.OracleHitRatio()
	return p, readKVMetrics(reg, p)
}

// startKVServer is switchyard as `serve --handshake-address ... --lb-policy
// policy` starts it, with no client port: the bench drives its Go API.
func startKVServer(ctx context.Context, cfg Config, policy string, reg *prometheus.Registry) (*server.Server, error) {
	sc := server.DefaultConfig()
	sc.HandshakeAddress = "tcp://127.0.0.1:0"
	sc.DataParallelSize = cfg.Engines
	sc.EngineTransport = cfg.Transport
	sc.HTTPAddress = "127.0.0.1:0"
	sc.ClientAddress = ""
	sc.LBPolicy = policy
	sc.ShutdownTimeout = time.Second // every answer is in; the rest is abandoned
	sc.LogStatsInterval = 0
	sc.DisableLogRequests = true
	sc.Logger = slog.New(slog.DiscardHandler)
	sc.Registry = reg
	srv, err := server.Start(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("bench: starting switchyard: %w", err)
	}
	return srv, nil
}

// kvEngines are one policy's mock engines, each with its own cache counters.
type kvEngines struct {
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error // the first engine that failed
	counters []*mockengine.CacheCounters
}

// startKVEngines starts n mock engines of the newest layout with prefix caches of
// blocks blocks, publishing KV events on tcp://*:base (rank R on base+R, as vLLM
// offsets) with the replay ROUTER on base+n. The registration carries the
// endpoints, so switchyard finds the publishers by itself.
func startKVEngines(cfg Config, w *KVWorkload, handshake string, blocks, base int, log *slog.Logger) *kvEngines {
	ctx, cancel := context.WithCancel(context.Background())
	e := &kvEngines{cancel: cancel}
	maxLen := 0
	for _, r := range w.Requests {
		maxLen = max(maxLen, len(r.Prompt)+len(r.Answer))
	}
	for rank := range cfg.Engines {
		mc := mockengine.DefaultConfig()
		mc.HandshakeAddress = handshake
		mc.Rank, mc.DataParallelSize = rank, cfg.Engines
		mc.StepInterval, mc.TokensPerStep = cfg.StepTime, cfg.TokensPerStep
		mc.MaxModelLen = max(mc.MaxModelLen, maxLen+w.Config.BlockSize)
		mc.KVCacheBlocks, mc.BlockSize, mc.PrefillPerToken = blocks, w.Config.BlockSize, cfg.KV.PrefillPerToken
		mc.KVEvents = mockengine.DefaultKVEventsConfig()
		mc.KVEvents.Endpoint = "tcp://*:" + strconv.Itoa(base)
		mc.KVEvents.ReplayEndpoint = "tcp://*:" + strconv.Itoa(base+cfg.Engines)
		mc.Cache = &mockengine.CacheCounters{}
		mc.Logger = log
		e.counters = append(e.counters, mc.Cache)
		e.wg.Go(func() {
			if err := mockengine.Run(ctx, mc); err != nil && ctx.Err() == nil {
				e.mu.Lock()
				if e.err == nil { // the first failure is the cause; later ones follow from it
					e.err = fmt.Errorf("bench: engine %d: %w", mc.Rank, err)
				}
				e.mu.Unlock()
			}
		})
	}
	return e
}

// stop ends the engines and waits for them (bounded: an engine that does not end
// is reported, not waited for).
func (e *kvEngines) stop() error {
	e.cancel()
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		return errors.New("bench: mock engines did not stop within 15 s")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// count reads the engines' own prefix-cache counts into p.
func (e *kvEngines) count(p *KVPolicy) {
	p.RequestsPerEngine = make([]int64, len(e.counters))
	p.QueryTokens, p.HitTokens = 0, 0
	for i, c := range e.counters {
		p.RequestsPerEngine[i] = c.Requests.Load()
		p.QueryTokens += c.Queries.Load()
		p.HitTokens += c.Hits.Load()
	}
	p.HitRatio = ratio(float64(p.HitTokens), float64(p.QueryTokens))
	p.MaxOverMean = maxOverMean(p.RequestsPerEngine)
}

// warnOnly passes warnings and errors: every policy starts fresh engines, whose
// start-up lines would bury the run's own.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }
func (h warnOnly) WithGroup(name string) slog.Handler    { return warnOnly{h.Handler.WithGroup(name)} }
