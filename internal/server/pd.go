package server

// Prefill/decode disaggregation in `serve`: the engines of
// --handshake-address (or the built-in mocks, or the bootstrapped ranks) are the
// decode engines; prefill engines join a second frontend of their own
// (--prefill-handshake-address, --prefill-data-parallel-size, or bootstrapped with
// --prefill-input-address/--prefill-output-address), with their own ranks,
// coordinator and dispatcher. The decode dispatcher splits each request over both
// (dispatcher.EnablePD). Without a prefill role nothing here runs.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/coordinator"
	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
)

// PDConfig configures the prefill role. The zero value is off.
type PDConfig struct {
	// PrefillHandshakeAddress is the tcp://HOST:PORT prefill engines send HELLO to
	// (their --data-parallel-address/--data-parallel-rpc-port).
	PrefillHandshakeAddress string
	// PrefillDataParallelSize is the number of prefill ranks (their own DP group).
	PrefillDataParallelSize int
	// PrefillInputAddress and PrefillOutputAddress: bootstrapped prefill engines
	// (a launcher did their handshake), ranks PrefillStartRank ..
	// PrefillStartRank+PrefillLocalRanks-1.
	PrefillInputAddress, PrefillOutputAddress string
	PrefillStartRank, PrefillLocalRanks       int
	// MockPrefillEngines starts built-in prefill mock engines (with the built-in
	// decode mocks of the embedded default).
	MockPrefillEngines int
	// MinPromptTokens: shorter prompts are prefilled by their decode engine.
	MinPromptTokens int
	// PrefillBusyThreshold: when every prefill engine's load score (requests in
	// flight or queued) is at least this, the decode engine prefills. 0 = never.
	PrefillBusyThreshold float64
	// MaxPrefillAttempts is how many prefill engines a request tries before its
	// decode engine prefills it; 0 = 2.
	MaxPrefillAttempts int
	// KVConnector names the connector in the printed --kv-transfer-config
	// (MooncakeConnector when empty).
	KVConnector string
	// OnHandoff gets every P/D handoff's duration (dispatcher.PDConfig.OnHandoff).
	OnHandoff func(time.Duration)
}

// Enabled reports whether a prefill role is configured.
func (p PDConfig) Enabled() bool {
	return p.PrefillHandshakeAddress != "" || p.PrefillInputAddress != "" || p.MockPrefillEngines > 0
}

func (p PDConfig) bootstrapped() bool {
	return p.PrefillInputAddress != "" || p.PrefillOutputAddress != ""
}

func (p PDConfig) ranks() int {
	if p.PrefillHandshakeAddress == "" && !p.bootstrapped() {
		return p.MockPrefillEngines
	}
	return max(p.PrefillDataParallelSize, 1)
}

func (p PDConfig) localRanks() int {
	if p.PrefillLocalRanks > 0 {
		return p.PrefillLocalRanks
	}
	return p.ranks() - p.PrefillStartRank
}

// validate names the flag at fault.
func (p PDConfig) validate(c *Config) error {
	if !p.Enabled() {
		if p.PrefillDataParallelSize > 1 || p.MinPromptTokens != 0 || p.PrefillBusyThreshold != 0 {
			return fmt.Errorf("--pd-*/--prefill-data-parallel-size: no prefill engines (--prefill-handshake-address, --prefill-input-address or --mock-prefill-engines)")
		}
		return nil
	}
	switch {
	case p.PrefillHandshakeAddress != "" && p.bootstrapped():
		return fmt.Errorf("--prefill-handshake-address: not with --prefill-input-address/--prefill-output-address")
	case p.bootstrapped() && (!strings.Contains(p.PrefillInputAddress, "://") || !strings.Contains(p.PrefillOutputAddress, "://")):
		return fmt.Errorf("--prefill-input-address/--prefill-output-address: both required, as tcp://HOST:PORT or ipc://PATH")
	case p.MockPrefillEngines > 0 && (p.PrefillHandshakeAddress != "" || p.bootstrapped()):
		return fmt.Errorf("--mock-prefill-engines: not with real prefill engines")
	case p.MockPrefillEngines > 0 && !c.Embedded():
		return fmt.Errorf("--mock-prefill-engines: only with the built-in decode mocks (no --handshake-address)")
	case p.MockPrefillEngines < 0 || p.PrefillDataParallelSize < 0 || p.MinPromptTokens < 0 || p.PrefillBusyThreshold < 0 || p.MaxPrefillAttempts < 0:
		return fmt.Errorf("--prefill-*/--pd-*: negative value")
	case p.bootstrapped() && (p.PrefillStartRank < 0 || p.localRanks() < 1 || p.PrefillStartRank+p.localRanks() > p.ranks()):
		return fmt.Errorf("--prefill-data-parallel-start-rank/--prefill-data-parallel-size-local: ranks %d..%d outside --prefill-data-parallel-size %d",
			p.PrefillStartRank, p.PrefillStartRank+p.localRanks()-1, p.ranks())
	case c.EnableWaves:
		return fmt.Errorf("--enable-wave-coordination: not with prefill engines (a lockstep group cannot be split in two)")
	}
	return nil
}

// pdSide is the prefill role: its dispatcher, frontend, coordinator and mocks.
type pdSide struct {
	cfg       PDConfig
	d         *dispatcher.Dispatcher
	fe        *frontend.Frontend
	node      *coordinator.Node
	events    *engineEvents
	stopMocks context.CancelFunc
	mocks     chan struct{} // closed when the mocks have stopped
}

// startPrefill starts the prefill side and makes the decode dispatcher split
// requests over it. Its metrics carry the prefix "prefill_" (the dispatcher's and
// frontend's series are per process, so the second set is told apart by name).
func (s *Server) startPrefill(ctx context.Context) error {
	p := s.cfg.PD
	if !p.Enabled() {
		return nil
	}
	side := &pdSide{cfg: p, stopMocks: func() {}}
	s.pd = side
	log := s.log.With("role", "prefill")
	reg := prometheus.WrapRegistererWithPrefix("prefill_", s.cfg.Registry)
	ranks := p.ranks()
	loads := &loadForward{}
	if ranks > 1 && !p.bootstrapped() {
		ccfg := coordinator.DefaultConfig()
		ccfg.Engines = ranks
		ccfg.Logger = log.With("component", "coordinator")
		ccfg.Registerer = reg
		var err error
		if side.node, err = coordinator.NewNode(ccfg, loads); err != nil {
			return fmt.Errorf("prefill coordinator: %w", err)
		}
		if err = side.node.Start(ctx); err != nil {
			return fmt.Errorf("prefill coordinator: %w", err)
		}
	}
	sender := &frontendSender{}
	dcfg := dispatcher.DefaultConfig()
	dcfg.Policy = dispatcher.PolicyLeastLoaded
	if s.kv != nil {
		// The prefill pool is where a cached prefix saves work: chosen by cache.
		dcfg.Policy, dcfg.CacheRouter = s.cfg.LBPolicy, s.kv
	}
	dcfg.StallTimeout = s.cfg.EngineStallTimeout
	dcfg.MaxMigrations = -1 // a lost prefill leg is resent by the decode side
	dcfg.Logger = log.With("component", "dispatcher")
	dcfg.Registerer = reg
	var err error
	if side.d, err = dispatcher.New(dcfg, sender); err != nil {
		return fmt.Errorf("prefill dispatcher: %w", err)
	}
	loads.d.Store(side.d)
	side.events = &engineEvents{d: side.d, node: side.node, log: log, kv: s.kv, maxModelLen: s.cfg.MaxModelLen}
	fcfg := frontend.DefaultConfig()
	switch {
	case p.bootstrapped():
		fcfg.Bootstrapped = &frontend.BootstrappedConfig{InputAddress: p.PrefillInputAddress, OutputAddress: p.PrefillOutputAddress,
			StartRank: p.PrefillStartRank, Count: p.localRanks()}
	case p.PrefillHandshakeAddress != "":
		fcfg.HandshakeAddress = p.PrefillHandshakeAddress
	}
	fcfg.EngineTransport, fcfg.BindHost = s.cfg.EngineTransport, s.cfg.EngineBindHost
	fcfg.DataParallelSize = ranks
	if side.node != nil {
		fcfg.CoordinatorInput, fcfg.CoordinatorOutput = side.node.InputAddress(), side.node.OutputAddress()
	}
	fcfg.Logger = log.With("component", "frontend")
	fcfg.Registerer = reg
	fcfg.Layouts = s.cfg.Layouts
	if side.fe, err = frontend.New(fcfg, side.events); err != nil {
		return fmt.Errorf("prefill frontend: %w", err)
	}
	sender.f.Store(side.fe)
	if err = side.fe.Start(ctx); err != nil {
		return fmt.Errorf("prefill frontend: %w", err)
	}
	if err = s.d.EnablePD(dispatcher.PDConfig{Prefill: side.d, MinPromptTokens: p.MinPromptTokens,
		BusyScore: p.PrefillBusyThreshold, MaxPrefillLegs: p.MaxPrefillAttempts, OnHandoff: p.OnHandoff}); err != nil {
		return err
	}
	if p.MockPrefillEngines > 0 {
		return side.startMocks(ctx, s, log)
	}
	if p.bootstrapped() {
		log.Info("waiting for bootstrapped prefill engines to register", "input_address", p.PrefillInputAddress,
			"output_address", p.PrefillOutputAddress, "start_rank", p.PrefillStartRank, "ranks", p.localRanks())
	} else {
		log.Info("waiting for prefill engines", "prefill_handshake_address", side.fe.HandshakeAddress(), "prefill_data_parallel_size", ranks)
	}
	return nil
}

// startMocks runs the built-in prefill mock engines.
func (side *pdSide) startMocks(ctx context.Context, s *Server, log *slog.Logger) error {
	n := side.cfg.MockPrefillEngines
	mctx, cancel := context.WithCancel(context.Background())
	side.stopMocks = cancel
	side.mocks = make(chan struct{})
	done := make(chan struct{}, n)
	for rank := range n {
		mcfg := mockengine.DefaultConfig()
		mcfg.HandshakeAddress = side.fe.HandshakeAddress()
		mcfg.Rank, mcfg.DataParallelSize = rank, n
		mcfg.StepInterval, mcfg.TokensPerStep = s.cfg.MockStep, s.cfg.MockTokensPerStep
		mcfg.Role = mockengine.RolePrefill
		go func() {
			defer func() { done <- struct{}{} }()
			if err := mockengine.Run(mctx, mcfg); err != nil && mctx.Err() == nil {
				log.Error("built-in prefill mock engine stopped", "rank", rank, "err", err)
			}
		}()
	}
	go func() {
		for range n {
			<-done
		}
		close(side.mocks)
	}()
	log.Info("started built-in prefill mock engines", "mock_prefill_engines", n)
	rctx, rcancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer rcancel()
	if err := side.fe.WaitReady(rctx, n); err != nil {
		return fmt.Errorf("built-in prefill mock engines did not become ready: %w", err)
	}
	return nil
}

// close takes the prefill side down after the decode dispatcher has closed (which
// aborted every live prefill leg through it).
func (side *pdSide) close() {
	if side == nil {
		return
	}
	if side.d != nil {
		side.d.Close()
	}
	if side.events != nil {
		side.events.closing.Store(true)
	}
	if side.fe != nil {
		side.fe.Close()
	}
	side.stopMocks()
	if side.mocks != nil {
		<-side.mocks
	}
	if side.node != nil {
		side.node.Close()
	}
}

// decodeRole is the role of the built-in decode mocks: a decode mock checks the
// handle of every remote prefill and counts its local ones.
func (s *Server) decodeRole() string {
	if s.cfg.PD.Enabled() {
		return mockengine.RoleDecode
	}
	return ""
}

// withRoles labels each engine with its role and adds the prefill engines, when
// there are prefill engines.
func (s *Server) withRoles(views []httpapi.EngineView) []httpapi.EngineView {
	if s.pd == nil || s.pd.fe == nil {
		return views
	}
	for i := range views {
		views[i].Role = mockengine.RoleDecode
	}
	for _, v := range httpapi.MergeEngines(s.pd.fe.Engines(), s.pd.d.Engines()) {
		v.Role = mockengine.RolePrefill
		views = append(views, v)
	}
	return views
}

// PrefillDispatcher is the prefill side's dispatcher, nil without prefill engines.
func (s *Server) PrefillDispatcher() *dispatcher.Dispatcher {
	if s.pd == nil {
		return nil
	}
	return s.pd.d
}

// PrefillHandshakeAddr is the prefill engines' bound handshake endpoint, "" without.
func (s *Server) PrefillHandshakeAddr() string {
	if s.pd == nil || s.pd.fe == nil {
		return ""
	}
	return s.pd.fe.HandshakeAddress()
}

// KVTransferConfigs are the --kv-transfer-config values each role's vLLM engines
// need to meet at the embedded bootstrap registry (bootstrap is its HOST:PORT).
func KVTransferConfigs(connector, bootstrap string) (prefill, decode string) {
	if connector == "" {
		connector = "MooncakeConnector"
	}
	mk := func(role string) string {
		c := map[string]any{"kv_connector": connector, "kv_role": role}
		if bootstrap != "" {
			c["kv_connector_extra_config"] = map[string]any{"bootstrap_server_address": bootstrap}
		}
		b, _ := json.Marshal(c)
		return string(b)
	}
	return mk("kv_producer"), mk("kv_consumer")
}

// logKVTransferConfigs prints what each role's engines are started with.
func (s *Server) logKVTransferConfigs() {
	if !s.cfg.PD.Enabled() {
		return
	}
	pre, dec := KVTransferConfigs(s.cfg.PD.KVConnector, s.BootstrapAddr())
	s.log.Info("P/D disaggregation: start prefill engines with --kv-transfer-config "+pre, "role", "prefill")
	s.log.Info("P/D disaggregation: start decode engines with --kv-transfer-config "+dec, "role", "decode")
}
