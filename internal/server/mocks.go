package server

// The built-in mock engines (no --handshake-address), and their restart. An
// external engine that wedges is restarted by whoever runs it and rejoins
// through the handshake; a built-in one had nobody to do that, so one declared
// stalled (or stuck, or dead) under a flood of fanned-out requests stayed so
// until switchyard restarted. Each built-in rank now runs under a supervisor
// that stops a wedged engine and starts a fresh one on the same rank, which
// rejoins through the handshake like a restarted vLLM engine. Its requests
// were already failed or moved when it was declared stalled or dead.

import (
	"context"
	"fmt"
	"time"

	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
)

// mockWatchEvery is how often a supervisor looks at its rank's state.
const mockWatchEvery = 100 * time.Millisecond

// mockRestartDelay spaces restarts of one rank, so an engine that wedges at
// once does not spin.
const mockRestartDelay = 500 * time.Millisecond

// startMocks runs the embedded default: ranks mock engine cores in this process,
// handshaking over loopback and talking over ipc like co-located vLLM engines.
func (s *Server) startMocks(ctx context.Context, ranks int) error {
	mctx, cancel := context.WithCancel(context.Background())
	s.stopMocks = cancel
	for rank := range ranks {
		mcfg := mockengine.DefaultConfig()
		mcfg.HandshakeAddress = s.fe.HandshakeAddress()
		mcfg.Rank = rank
		mcfg.DataParallelSize = ranks
		mcfg.StepInterval = s.cfg.MockStep
		mcfg.TokensPerStep = s.cfg.MockTokensPerStep
		mcfg.Words, mcfg.Capitals, mcfg.Period = s.cfg.MockWords, s.cfg.MockCapitals, s.cfg.MockPeriod
		mcfg.Role = s.decodeRole()
		if n := len(s.cfg.MockLayouts); n > 0 {
			mcfg.Layout = s.cfg.MockLayouts[rank%n]
		}
		mcfg.Pooling = s.cfg.MockPooling
		mcfg.MaxLoRAs = s.cfg.LoRA.mockMaxLoRAs()
		s.mockKV(&mcfg)
		s.mocks.Add(1)
		go func() {
			defer s.mocks.Done()
			s.superviseMock(mctx, mcfg)
		}()
	}
	s.log.Info("no --handshake-address: started built-in mock engines (the embedded default; point real engines at --handshake-address instead)",
		"mock_engines", ranks, "step", s.cfg.MockStep, "tokens_per_step", s.cfg.MockTokensPerStep)
	rctx, rcancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer rcancel()
	if err := s.fe.WaitReady(rctx, ranks); err != nil {
		return fmt.Errorf("built-in mock engines did not become ready: %w", err)
	}
	return nil
}

// superviseMock runs one rank's built-in engine until ctx ends, replacing it
// whenever it exits or wedges.
func (s *Server) superviseMock(ctx context.Context, mcfg mockengine.Config) {
	for gen := 0; ; gen++ {
		if s.cfg.mockTweak != nil {
			s.cfg.mockTweak(gen, &mcfg)
		}
		ictx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mockengine.Run(ictx, mcfg) }()
		why, err := s.watchMock(ictx, mcfg.Rank, done)
		cancel()
		if why != "exited" {
			err = <-done // Run returns once its context ends
		}
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("restarting built-in mock engine", "rank", mcfg.Rank, "why", why, "err", err)
		select {
		case <-time.After(mockRestartDelay):
		case <-ctx.Done():
			return
		}
	}
}

// watchMock returns why rank's engine must be replaced: it exited (err is
// Run's), or after it was ready it became stalled, stuck or dead. It returns
// when ctx ends too.
func (s *Server) watchMock(ctx context.Context, rank int, done <-chan error) (why string, err error) {
	t := time.NewTicker(mockWatchEvery)
	defer t.Stop()
	wasReady := false
	for {
		select {
		case err := <-done:
			return "exited", err
		case <-ctx.Done():
			return "stopped", nil
		case <-t.C:
		}
		if s.shutdownReason.Load() != nil || s.events.closing.Load() {
			continue // shutting down: engines going away is no fault
		}
		state := s.rankState(rank)
		switch {
		case state == "ready":
			wasReady = true
		case wasReady && (state == "stalled" || state == "stuck" || state == "dead"):
			return state, nil
		}
	}
}

// rankState is rank's state as /v1/engines shows it, "" when unknown.
func (s *Server) rankState(rank int) string {
	for _, v := range httpapi.MergeEngines(s.fe.Engines(), s.d.Engines()) {
		if v.Rank == rank {
			return v.State
		}
	}
	return ""
}
