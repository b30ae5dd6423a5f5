package bootstrap

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the edge around a [Registry]: the HTTP handler, the periodic
// prober, the snapshot file and the metrics. One mutex serializes every use
// of the registry; no lock is held across a probe or a file write.
type Server struct {
	cfg      Config
	log      *slog.Logger
	prober   Prober
	now      func() time.Time
	retryGap time.Duration // between conflict-probe attempts

	mu  sync.Mutex // guards reg
	reg *Registry

	metrics   *metrics
	handler   http.Handler
	adminNets []*net.IPNet // who may use /v2 (Config.AdminNetworks)

	persistMu sync.Mutex // serializes snapshot writes, in revision order
	persisted uint64     // revision last written
	journal   journal    // the change log beside the snapshot; under persistMu

	storeRev int64 // the Store revision reg reflects; under mu

	lnMu sync.Mutex
	ln   net.Listener
}

// NewServer validates cfg and builds the registry, handler, prober and
// metrics. If cfg.SnapshotPath names an existing file, its engines are
// loaded as unverified (hidden until the first probe sweep reaches them); a
// snapshot that cannot be read is an error rather than a silent empty
// registry.
func NewServer(cfg Config) (*Server, error) {
	return newServer(cfg, NewRegistry(cfg.Policy()), TCPProber{}, time.Now)
}

// NewHandler returns the HTTP edge over reg alone, for embedding in another
// mux: conflicts are probed with p (nil: TCP) using the DefaultConfig
// timeouts, but nothing probes periodically, nothing is persisted and no
// metrics are registered. reg must not be used elsewhere while the handler
// serves. Use NewServer for the full registry.
func NewHandler(reg *Registry, p Prober, logger *slog.Logger) http.Handler {
	if p == nil {
		p = TCPProber{}
	}
	cfg := DefaultConfig()
	cfg.Logger = logger
	s, err := newServer(cfg, reg, p, time.Now)
	if err != nil {
		// DefaultConfig is valid and nothing is registered, so this is a
		// broken invariant, not bad input.
		panic(err)
	}
	return s.handler
}

func newServer(cfg Config, reg *Registry, p Prober, now func() time.Time) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{
		cfg: cfg, log: log.With("component", "bootstrap"), prober: p, now: now,
		retryGap: 100 * time.Millisecond, reg: reg,
	}
	m, err := newMetrics(cfg.Registerer, newStateCollector(&s.mu, reg, func() time.Time { return s.now() }))
	if err != nil {
		return nil, err
	}
	s.metrics = m
	if s.adminNets, err = cfg.adminNets(); err != nil {
		return nil, err
	}
	if cfg.SnapshotPath != "" {
		if err := s.loadSnapshot(); err != nil {
			return nil, err
		}
	}
	if cfg.Store != nil {
		if err := s.loadStore(context.Background()); err != nil {
			return nil, err
		}
	}
	var metricsHandler http.Handler
	if g, ok := cfg.Registerer.(prometheus.Gatherer); ok {
		metricsHandler = promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	}
	s.handler = s.routes(metricsHandler)
	return s, nil
}

// Handler returns the HTTP handler (/register, /query, /e/{id}/query, /v2,
// /healthz, and /metrics when the Registerer is a Gatherer).
func (s *Server) Handler() http.Handler { return s.handler }

// Listen binds cfg.Address and returns the bound address (useful with port
// 0). Serve calls it if it has not been called.
func (s *Server) Listen() (net.Addr, error) {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if s.ln != nil {
		return s.ln.Addr(), nil
	}
	ln, err := net.Listen("tcp", s.cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("bootstrap: listen %s: %w", s.cfg.Address, err)
	}
	s.ln = ln
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		// /register cannot be authenticated (vLLM sends no credentials) and
		// decodes send their KV memory descriptors to whatever address it
		// stores, so a reachable registry is a trust decision.
		s.log.Warn("bootstrap registry listens on a non-loopback address; /register is unauthenticated, keep this port on the internal network",
			"address", ln.Addr().String(), "token_protects_admin", s.cfg.Token != "")
	}
	return ln.Addr(), nil
}

// Addr returns the bound address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.lnMu.Lock()
	defer s.lnMu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Serve listens (if Listen was not called), serves HTTP and runs the
// periodic prober until ctx is cancelled, then shuts down gracefully,
// writes a last snapshot and returns nil. It returns an error if listening
// or serving fails.
func (s *Server) Serve(ctx context.Context) error {
	if _, err := s.Listen(); err != nil {
		return err
	}
	s.lnMu.Lock()
	ln := s.ln
	s.lnMu.Unlock()
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("bootstrap registry serving", "address", ln.Addr().String())

	probeCtx, stopProbes := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.probeLoop(probeCtx) })
	if s.cfg.Store != nil {
		wg.Go(func() { s.watchStore(probeCtx) })
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()

	var err error
	select {
	case <-ctx.Done():
	case err = <-serveErr:
		err = fmt.Errorf("bootstrap: serve: %w", err)
	}
	stopProbes()
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if serr := hs.Shutdown(shutCtx); serr != nil && err == nil {
		err = fmt.Errorf("bootstrap: shutdown: %w", serr)
	}
	if ctx.Err() != nil {
		<-serveErr // http.ErrServerClosed once Shutdown has closed the listener
	}
	wg.Wait()
	s.persist()
	s.closeJournal()
	return err
}

// probeLoop sweeps at once (so snapshot entries are verified without
// waiting a full interval) and then every ProbeInterval.
func (s *Server) probeLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ProbeInterval)
	defer t.Stop()
	for {
		s.sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep probes every worker once, applies the results, forgets what
// outlived Retention and persists any change.
func (s *Server) sweep(ctx context.Context) {
	s.mu.Lock()
	ts := s.reg.ProbeTargets()
	s.mu.Unlock()
	results := probeAll(ctx, s.prober, ts, s.cfg.ProbeTimeout)
	if ctx.Err() != nil {
		// Probes cut short by shutdown say nothing about the workers.
		return
	}
	failed := 0
	for _, r := range results {
		if r.Err != nil {
			failed++
		}
	}
	s.metrics.probeFailures.WithLabelValues("periodic").Add(float64(failed))
	s.mu.Lock()
	tr := s.reg.RecordProbes(s.now(), results)
	s.mu.Unlock()
	// Expiry changes the registry; probe results (liveness) are this
	// frontend's own and never stored.
	var expired int
	err := s.change(ctx, func(now time.Time) error {
		expired = s.reg.Expire(now)
		return nil
	})
	if err != nil {
		s.log.Warn("cannot commit expired engines to the store", "err", err)
	}
	s.logTransitions(tr, "periodic probe")
	if expired > 0 {
		s.metrics.evictions.WithLabelValues("expired").Add(float64(expired))
		s.log.Info("forgot engines past retention", "count", expired, "retention", s.cfg.Retention)
	}
	s.persist()
}

func (s *Server) logTransitions(tr []Transition, why string) {
	for _, t := range tr {
		lvl := slog.LevelInfo
		if t.To == StateDead {
			lvl = slog.LevelWarn
		}
		s.log.Log(context.Background(), lvl, "engine state changed", "engine_id", t.EngineID,
			"dp_rank", t.DP, "generation", t.Generation, "from", t.From, "to", t.To, "cause", why)
	}
}
