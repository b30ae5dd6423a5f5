package server

// Start wires the components of `switchyard serve` in dependency order and Shutdown
// takes them down in reverse: coordinator, dispatcher, frontend (+ built-in mock
// engines), bootstrap registry, client protocol, HTTP. Both are callable in-process,
// which is how the tests run a whole server without the binary.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard-llm/switchyard/bootstrap"
	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/coordinator"
	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/httpserve"
	"github.com/switchyard-llm/switchyard/internal/kvroute"
	"github.com/switchyard-llm/switchyard/internal/lora"
	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
)

// Server is a running `switchyard serve`.
type Server struct {
	cfg Config
	log *slog.Logger

	node    *coordinator.Node     // nil with one rank, bootstrapped, or external
	ext     *coordinator.External // --external-coordinator-address
	follow  FollowedCoordinator   // scale-out: the cluster leader's coordinator
	d       *dispatcher.Dispatcher
	fe      *frontend.Frontend
	boot    *bootstrap.Server
	clients *clientapi.ClientServer
	http    *httpserve.Server

	events *engineEvents
	sender *frontendSender // the dispatcher's, set to the frontend once it exists
	pd     *pdSide         // prefill engines (pd.go); nil without
	// kv is the cache-aware routing (kvroute.go) of the pool that has it: the only
	// pool, or the prefill pool with P/D; nil unless --lb-policy kv or prefix.
	kv          *kvroute.Edge
	kvMockPorts *mockKVPorts
	mocks       sync.WaitGroup
	stopMocks   context.CancelFunc
	stopBoot    context.CancelFunc
	bootDone    chan error
	tracing     *sdktrace.TracerProvider // nil: no tracing
	stopStats   context.CancelFunc       // nil: no stats line
	statsDone   chan struct{}

	shutdownReason atomic.Pointer[error]
	done           chan struct{} // closed when a component fails on its own
	failOnce       sync.Once
	err            error
	shutOnce       sync.Once
	shutErr        error
}

// Start validates cfg, binds every socket and starts every component. ctx bounds
// the start only (the mock engines' handshakes included); the server runs until
// Shutdown.
func Start(ctx context.Context, cfg Config) (s *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	s = &Server{cfg: cfg, log: cfg.Logger, done: make(chan struct{}), stopMocks: func() {}, stopBoot: func() {}, events: &engineEvents{log: cfg.Logger, maxModelLen: cfg.MaxModelLen}, sender: &frontendSender{}}
	// The failure paths below `return nil, err`, which sets the named result s to
	// nil before deferred calls run: tear down through a copy, or a taken port
	// becomes a nil dereference and the started components (and the ipc dir) leak.
	started := s
	defer func() {
		if err != nil {
			started.teardown()
		}
	}()
	loads := &loadForward{} // the coordinator's loads reach the dispatcher once it exists
	if err = s.startCoordinator(ctx, loads); err != nil {
		return nil, err
	}
	if err = s.startDispatcher(ctx, loads); err != nil {
		return nil, err
	}
	if err = s.startFrontend(ctx); err != nil {
		return nil, err
	}
	if err = s.startEngines(ctx); err != nil {
		return nil, err
	}
	if cfg.BootstrapAddress != "" {
		if err = s.startBootstrap(); err != nil {
			return nil, err
		}
	}
	s.logKVTransferConfigs()

	reason := func() error {
		if p := s.shutdownReason.Load(); p != nil {
			return *p
		}
		return nil
	}
	tracerProvider, err := s.startTracing()
	if err != nil {
		return nil, err
	}
	stats := s.startStats()
	if err = s.startClients(ctx, reason, stats, tracerProvider); err != nil {
		return nil, err
	}
	if err = s.startHTTP(reason, stats, tracerProvider); err != nil {
		return nil, err
	}
	s.log.Info("serving", "http", "http://"+s.HTTPAddr(), "engines", cfg.Ranks(), "lb_policy", cfg.LBPolicy,
		"eos_token_ids", eosAttr(cfg.EOSTokenIDs))
	return s, nil
}

// startCoordinator starts the DP coordinator this serve uses, if any: the
// cluster leader's, an external one, or its own with more than one rank.
func (s *Server) startCoordinator(ctx context.Context, loads *loadForward) error {
	cfg, reg, ranks := s.cfg, s.cfg.Registry, s.cfg.Ranks()
	var err error
	// The coordinator feeds load to the dispatcher and the dispatcher stamps waves
	// from the coordinator; loads is the forward reference that breaks the cycle.
	switch {
	case cfg.FollowCoordinator != nil:
		s.follow = cfg.FollowCoordinator
		if err = s.follow.Start(ctx, loads); err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
	case cfg.ExternalCoordinatorAddress != "":
		// vLLM's own coordinator runs elsewhere (several API servers share it):
		// follow its publishes instead of running one.
		xcfg := coordinator.DefaultExternalConfig()
		xcfg.StatsAddress = cfg.ExternalCoordinatorAddress
		xcfg.EnableWaves = cfg.EnableWaves
		xcfg.Logger = cfg.Logger.With("component", "coordinator")
		xcfg.Registerer = reg
		if s.ext, err = coordinator.NewExternal(xcfg, loads); err != nil {
			return fmt.Errorf("--external-coordinator-address: %w", err)
		}
		if err = s.ext.Start(ctx); err != nil {
			return fmt.Errorf("--external-coordinator-address: %w", err)
		}
		s.log.Info("following an external DP coordinator", "stats_address", cfg.ExternalCoordinatorAddress, "waves", cfg.EnableWaves)
	case ranks > 1 && cfg.Bootstrapped():
		// The launcher gave the engines their coordinator addresses; an in-process
		// coordinator would never hear from them.
		s.log.Info("bootstrapped engines: no in-process DP coordinator (use --external-coordinator-address to follow the launcher's)")
	case ranks > 1:
		ccfg := coordinator.DefaultConfig()
		ccfg.Engines = ranks
		ccfg.EnableWaves = cfg.EnableWaves
		ccfg.PublishAddress = cfg.CoordinatorPublishAddress
		ccfg.Logger = cfg.Logger.With("component", "coordinator")
		ccfg.Registerer = reg
		if s.node, err = coordinator.NewNode(ccfg, loads); err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
		if err = s.node.Start(ctx); err != nil {
			return fmt.Errorf("coordinator: %w", err)
		}
	}
	return nil
}

// startDispatcher builds the dispatcher (and the cache-aware routing it may
// use) and the prefill side of P/D, if configured.
func (s *Server) startDispatcher(ctx context.Context, loads *loadForward) error {
	cfg, reg, ranks := s.cfg, s.cfg.Registry, s.cfg.Ranks()
	var err error
	if s.kvMockPorts, err = pickMockKVPorts(cfg, ranks); err != nil {
		return err
	}
	if s.kv, err = newKVEdge(cfg, reg, s.log, s.kvMockPorts); err != nil {
		return err
	}
	dcfg := dispatcher.DefaultConfig()
	dcfg.Policy = cfg.LBPolicy
	if s.kv != nil && !cfg.PD.Enabled() {
		dcfg.CacheRouter = s.kv
		s.events.kv = s.kv
	} else if s.kv != nil {
		// P/D: the prefill pool is chosen by cache (pd.go), the decode pool by load.
		dcfg.Policy = dispatcher.PolicyLeastLoaded
	}
	if s.events.loraActivity, err = newLoRAActivity(cfg); err != nil {
		return err
	}
	if s.events.loraActivity != nil {
		dcfg.LoRARouter = &lora.Router{Activity: s.events.loraActivity, Slack: lora.DefaultSlack}
	}
	dcfg.StallTimeout = cfg.EngineStallTimeout
	dcfg.MaxMigrations, dcfg.MigratePinned = cfg.MaxMigrations, cfg.MigratePinned
	if cfg.MaxMigrations == 0 || cfg.EnableWaves {
		// Off; and a lockstep group's survivors cannot take a dead rank's work.
		dcfg.MaxMigrations = -1
	}
	dcfg.Logger = cfg.Logger.With("component", "dispatcher")
	dcfg.Registerer = reg
	if reg != nil {
		// vLLM's own series beside switchyard's, so its dashboards and alerts work.
		if dcfg.VLLM, err = vllmmetrics.New(reg, cfg.ModelName(), 0); err != nil {
			return fmt.Errorf("vllm metrics: %w", err)
		}
	}
	if s.node != nil && cfg.EnableWaves {
		dcfg.Waves = s.node
	}
	if s.ext != nil {
		dcfg.Waves = s.ext // the coordinator's wave, and FIRST_REQ to wake paused engines
	}
	if s.follow != nil && cfg.EnableWaves {
		dcfg.Waves = s.follow
	}
	dcfg.ClientIndex = cfg.ClientIndex
	dcfg.AbortOrphans = cfg.AbortOrphans
	if cfg.EnableWaves && ranks > 1 {
		// Every forward pass is a collective over all ranks: one dead rank
		// blocks the rest, so they live and fail as one group. A bootstrapped
		// serve that owns only some of the ranks cannot see the others die,
		// nor come back, so it keeps them independent.
		if !cfg.Bootstrapped() || (cfg.StartRank == 0 && cfg.localRanks() == ranks) {
			dcfg.LockstepRanks = ranks
		} else {
			s.log.Warn("wave coordination with a part of the ranks: lockstep group handling is off (this frontend cannot see the other ranks die)",
				"start_rank", cfg.StartRank, "ranks", cfg.localRanks(), "data_parallel_size", ranks)
		}
	}
	if s.d, err = dispatcher.New(dcfg, s.sender); err != nil {
		return fmt.Errorf("dispatcher: %w", err)
	}
	loads.d.Store(s.d)
	if s.events.lora, err = newLoRARegistry(cfg, s.d); err != nil {
		return err
	}
	if err = s.startPrefill(ctx); err != nil { // prefill engines, if any (pd.go)
		return err
	}
	return nil
}

// startFrontend starts the engine side: the handshake or bootstrapped
// sockets every engine connects to.
func (s *Server) startFrontend(ctx context.Context) error {
	cfg, reg, ranks := s.cfg, s.cfg.Registry, s.cfg.Ranks()
	var err error
	events := s.events
	events.d, events.node = s.d, s.node
	fcfg := frontend.DefaultConfig()
	switch {
	case cfg.Bootstrapped():
		fcfg.Bootstrapped = &frontend.BootstrappedConfig{
			InputAddress: cfg.InputAddress, OutputAddress: cfg.OutputAddress,
			StartRank: cfg.StartRank, Count: cfg.localRanks(),
			Registrations: cfg.EngineRegistrations,
		}
	case !cfg.Embedded():
		fcfg.HandshakeAddress = cfg.HandshakeAddress
	}
	fcfg.EngineTransport = cfg.EngineTransport
	fcfg.BindHost = cfg.EngineBindHost
	fcfg.DataParallelSize = ranks
	if s.node != nil {
		fcfg.CoordinatorInput, fcfg.CoordinatorOutput = s.node.InputAddress(), s.node.OutputAddress()
	}
	fcfg.Logger = cfg.Logger.With("component", "frontend")
	fcfg.Registerer = reg
	fcfg.Layouts = cfg.Layouts
	fcfg.ClientIndex = cfg.ClientIndex
	if s.fe, err = frontend.New(fcfg, events); err != nil {
		return fmt.Errorf("frontend: %w", err)
	}
	s.sender.f.Store(s.fe)
	if err = s.fe.Start(ctx); err != nil {
		return fmt.Errorf("frontend: %w", err)
	}
	return nil
}

// startEngines starts the built-in mock engines without an engine
// configuration, or says what it waits for.
func (s *Server) startEngines(ctx context.Context) error {
	cfg, ranks := s.cfg, s.cfg.Ranks()
	if cfg.Embedded() {
		if err := s.startMocks(ctx, ranks); err != nil {
			return err
		}
	} else {
		if len(cfg.EOSTokenIDs) == 0 {
			s.log.Warn(noEOSWarning)
		}
		if cfg.Bootstrapped() {
			s.log.Info("waiting for bootstrapped engines to register", "input_address", cfg.InputAddress, "output_address", cfg.OutputAddress,
				"start_rank", cfg.StartRank, "ranks", cfg.localRanks(), "data_parallel_size", ranks)
		} else {
			s.log.Info("waiting for engines", "handshake_address", s.fe.HandshakeAddress(), "data_parallel_size", ranks,
				"engine_command", fmt.Sprintf("vllm serve MODEL --headless --data-parallel-size %d --data-parallel-size-local 1 --data-parallel-start-rank R --data-parallel-address HOST --data-parallel-rpc-port PORT", ranks))
		}
	}
	return nil
}

// startTracing sets up the OTLP exporter with --otlp-traces-endpoint; nil
// provider: no tracing.
func (s *Server) startTracing() (trace.TracerProvider, error) {
	cfg := s.cfg
	var tracerProvider trace.TracerProvider
	if cfg.OTLPTracesEndpoint != "" {
		tp, err := apicore.NewTracerProvider(cfg.OTLPTracesEndpoint)
		if err != nil {
			return nil, err
		}
		s.tracing, tracerProvider = tp, tp
		// The SDK's own errors (a collector that refuses an export) go to our log.
		tlog := cfg.Logger.With("component", "tracing")
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { tlog.Warn("tracing", "err", err) }))
		s.log.Info("tracing", "otlp_traces_endpoint", cfg.OTLPTracesEndpoint)
	}
	return tracerProvider, nil
}

// startStats runs the periodic stats line with --log-stats-interval; nil: off.
func (s *Server) startStats() *statsLog {
	cfg := s.cfg
	var stats *statsLog
	if cfg.LogStatsInterval > 0 {
		stats = newStatsLog(cfg.Logger.With("component", "stats"), s.d, cfg.Registry, time.Now)
		if s.kv != nil {
			stats.predicted = s.kv.Predicted
		}
		sctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{}) // not s.statsDone: a failed Start sets s to nil
		s.stopStats, s.statsDone = stop, done
		go func() {
			defer close(done)
			stats.run(sctx, cfg.LogStatsInterval)
		}()
	}
	return stats
}

// startClients listens for msgpack clients on --client-address, if set.
func (s *Server) startClients(ctx context.Context, reason func() error, stats *statsLog, tracerProvider trace.TracerProvider) error {
	cfg := s.cfg
	if cfg.ClientAddress != "" {
		var err error
		s.clients, err = clientapi.ListenClients(ctx, clientapi.ClientConfig{
			Address: cfg.ClientAddress, Timeout: cfg.ClientTimeout, Model: cfg.Model(), ShutdownReason: reason,
			AllowUtilityMethods: cfg.AllowUtilityMethods,
			MaxFrameBytes:       cfg.ClientMaxFrameBytes, MaxMessageBytes: cfg.ClientMaxMessageBytes,
			MaxConnections: cfg.ClientMaxConnections, Token: cfg.ClientToken,
			LogRequests: !cfg.DisableLogRequests, Stats: stats, TracerProvider: tracerProvider,
			Logger: cfg.Logger.With("component", "clients"),
		}, s.d)
		if err != nil {
			return err
		}
		s.events.clients.Store(s.clients)
		s.log.Info("client protocol listening", "address", s.clients.Addr())
	}
	return nil
}

// startHTTP builds the HTTP API and serves it on --http-address.
func (s *Server) startHTTP(reason func() error, stats *statsLog, tracerProvider trace.TracerProvider) error {
	cfg := s.cfg
	api := httpapi.NewAPI(httpapi.APIConfig{
		Dispatcher: s.d, Engines: s.Engines, Model: cfg.Model(),
		Logger: cfg.Logger.With("component", "http"), Registerer: cfg.Registry, Gatherer: cfg.Registry,
		ShutdownReason: reason,
		MaxBodyBytes:   cfg.MaxBodyBytes, BodyTimeout: cfg.HTTPBodyTimeout,
		MaxConcurrentRequests: cfg.MaxConcurrentRequests, APIKeys: cfg.APIKeys,
		AdminToken: cfg.AdminToken, AdminNetworks: cfg.AdminNetworks,
		ContextLen:  s.events.contexts.largest,
		LogRequests: !cfg.DisableLogRequests, Stats: stats, TracerProvider: tracerProvider,
		Text: cfg.Text, ServedModelName: cfg.ModelName(),
		CORS: cfg.CORS, RequestIDHeaders: cfg.RequestIDHeaders,
		LoRA: s.events.lora, LoRAActivity: s.events.loraActivity,
	})
	clientConns := 0
	if cfg.ClientAddress != "" {
		clientConns = cfg.ClientMaxConnections
	}
	srv, err := httpserve.Listen(httpserve.ListenConfig{
		Address: cfg.HTTPAddress, MaxConnections: cfg.MaxConnections, OtherConnections: clientConns,
		WriteTimeout: cfg.HTTPWriteTimeout, HeaderTimeout: cfg.HTTPHeaderTimeout, IdleTimeout: cfg.HTTPIdleTimeout,
		Registerer: cfg.Registry, Logger: s.log,
	}, markEngines(cfg, api.Handler()))
	if err != nil {
		return err
	}
	s.http = srv
	srv.Serve(s.fail)
	return nil
}

// noEOSWarning is logged at start when real engines are expected and no EOS is
// configured: switchyard has no model config to read it from.
const noEOSWarning = "no --eos-token-id: every request goes out with ignore_eos and runs to max_tokens (or a stop_token_ids hit); " +
	"set --eos-token-id to the model's EOS id(s), e.g. the generation config's eos_token_id, comma-separated, primary first"

func eosAttr(ids []int64) any {
	if len(ids) == 0 {
		return "none (requests are sent with ignore_eos)"
	}
	return ids
}

func (s *Server) startBootstrap() error {
	bcfg := s.cfg.Bootstrap
	bcfg.Address = s.cfg.BootstrapAddress
	bcfg.Logger = s.cfg.Logger // bootstrap adds its own component attribute
	bcfg.Registerer = s.cfg.Registry
	b, err := bootstrap.NewServer(bcfg)
	if err != nil {
		return fmt.Errorf("--bootstrap-address: %w", err)
	}
	if _, err := b.Listen(); err != nil {
		return fmt.Errorf("--bootstrap-address: %w", err)
	}
	s.boot = b
	bctx, cancel := context.WithCancel(context.Background())
	s.stopBoot = cancel
	s.bootDone = make(chan error, 1)
	go func() {
		err := b.Serve(bctx)
		if err != nil && bctx.Err() == nil {
			s.fail(fmt.Errorf("bootstrap registry: %w", err))
		}
		s.bootDone <- err
	}()
	return nil
}

// HTTPAddr is the bound HTTP address (HOST:PORT).
func (s *Server) HTTPAddr() string { return s.http.Addr() }

// ClientAddr is the bound client-protocol endpoint, "" when off.
func (s *Server) ClientAddr() string {
	if s.clients == nil {
		return ""
	}
	return s.clients.Addr()
}

// HandshakeAddr is the bound engine handshake endpoint.
func (s *Server) HandshakeAddr() string { return s.fe.HandshakeAddress() }

// BootstrapAddr is the bound registry address, "" when off.
func (s *Server) BootstrapAddr() string {
	if s.boot == nil {
		return ""
	}
	return s.boot.Addr().String()
}

// Dispatcher exposes the Go API (for in-process embedding and tests).
func (s *Server) Dispatcher() *dispatcher.Dispatcher { return s.d }

// Done is closed when a component fails on its own; Err says why.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is the failure that closed Done, or nil.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

func (s *Server) fail(err error) {
	s.failOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// Shutdown stops accepting work, lets in-flight requests finish for up to
// Config.ShutdownTimeout, aborts the rest at their engines with a reason the
// clients see, then closes everything in reverse order of Start. ctx bounds the
// whole of it. It is idempotent.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutOnce.Do(func() { s.shutErr = s.shutdown(ctx) })
	return s.shutErr
}

func (s *Server) shutdown(ctx context.Context) error {
	reason := fmt.Errorf("switchyard is shutting down: request aborted after --shutdown-timeout %v", s.cfg.ShutdownTimeout)
	s.shutdownReason.Store(&reason)

	// Stop accepting work but keep the HTTP listener open while in-flight requests
	// drain: a new request then gets the 503 the README promises (and its
	// connection closes) rather than a refused connection. Drain refuses new
	// requests on every path while in-flight ones run to completion.
	s.http.StopKeepAlives()
	inflight := s.d.InFlight()
	s.log.Info("draining", "in_flight", inflight, "timeout", s.cfg.ShutdownTimeout)
	dctx, cancel := context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
	err := s.d.Drain(dctx)
	cancel()
	if err != nil {
		s.log.Warn("shutdown timeout reached; aborting in-flight requests", "in_flight", s.d.InFlight())
	} else if inflight > 0 {
		s.log.Info("in-flight requests finished")
	}
	// Close aborts whatever is left at its engine; streams end with ErrClosed,
	// which the handlers and the client protocol turn into the reason above.
	s.d.Close()
	var errs []error
	if err := s.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("http: %w", err))
	}
	s.teardown()
	return errors.Join(errs...)
}

// teardown closes every component that was started, in reverse order of Start.
func (s *Server) teardown() {
	if s.http != nil {
		s.http.Close()
	}
	if s.clients != nil {
		s.clients.Close()
	}
	s.stopBoot()
	if s.tracing != nil {
		// Flush the last spans; a collector that does not answer costs at most this.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.tracing.Shutdown(ctx); err != nil {
			s.log.Warn("tracing: spans not exported at shutdown", "err", err)
		}
		cancel()
	}
	if s.bootDone != nil {
		<-s.bootDone
	}
	if s.stopStats != nil {
		s.stopStats()
		<-s.statsDone
	}
	s.events.lora.Close() // its pushes to joining engines call the dispatcher
	if s.d != nil {
		s.d.Close()
	}
	s.pd.close() // after the decode side: its Close aborted the live prefill legs
	s.events.closing.Store(true)
	// The frontend goes before the built-in engines, so their leaving is not
	// reported as engine failures.
	if s.fe != nil {
		s.fe.Close()
	}
	s.stopMocks()
	s.mocks.Wait()
	if s.kv != nil {
		s.kv.Close()
	}
	if s.node != nil {
		s.node.Close()
	}
	if s.follow != nil {
		s.follow.Close()
	}
	if s.ext != nil {
		s.ext.Close()
	}
}

// Engines merges the frontend's view (identity, handshake state) with the
// dispatcher's (load, in-flight) per rank.
func (s *Server) Engines() []httpapi.EngineView {
	return s.withKV(s.withRoles(httpapi.MergeEngines(s.fe.Engines(), s.d.Engines())))
}
