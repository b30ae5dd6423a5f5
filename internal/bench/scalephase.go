package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/switchyard-llm/switchyard/internal/bench/engine"
	"github.com/switchyard-llm/switchyard/wire"
)

// scaleRun is what a scale phase adds to a latency phase's configuration.
type scaleRun struct {
	park    int // streams the engines hold, never stepped, while the load runs
	clients int // client connections the load is spread over
	// profile, when set, is where switchyard's CPU profile of the measured load goes
	// (Config.Profile and the point: FILE.streams-100000).
	profile string
}

// scalePhase is one system's figures at one point.
type scalePhase struct {
	phase              *Phase
	heapPerStream      float64 // live heap per parked stream (park > 0)
	messagesPerRequest float64 // engine output messages per measured-load request
}

// runScalePhase is runPhase with the scale sweeps' additions: streams parked in the
// engines before the load starts (weighed on the way), the load spread over several
// client connections, and the engines' output messages counted.
func runScalePhase(ctx context.Context, cfg Config, opt Options, start func(context.Context) (system, error), sh scaleRun) (_ *scalePhase, err error) {
	sys, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sys.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	engines, err := startEngines(ctx, cfg, opt, sys.handshake())
	if err != nil {
		return nil, err
	}
	defer func() {
		if engines != nil {
			engines.stop()
		}
	}()
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second+time.Duration(cfg.Engines)*time.Second)
	defer cancel()
	if err := sys.ready(readyCtx, cfg.Engines); err != nil {
		return nil, err
	}
	out := &scalePhase{}
	if sh.park > 0 {
		pc, per, err := parkStreams(ctx, cfg, sys, engines, sh.park)
		if err != nil {
			return nil, err
		}
		defer pc.close()
		out.heapPerStream = per
	}
	sentBefore := engines.sent.Load()
	l := newLoad(cfg)
	c, err := connectClients(ctx, sys, l, sh.clients)
	if err != nil {
		return nil, err
	}
	stopProfile := func() {}
	if sh.profile != "" && sys.name() == "switchyard" {
		stopProfile = startCPUProfile(sh.profile)
	}
	began := time.Now()
	smp := startSampler(cfg, opt, sys, l, began)
	runErr := l.run(ctx, c, began)
	end := smp.finish()
	stopProfile()
	drainCtx, dcancel := context.WithTimeout(ctx, drainTimeout(cfg))
	l.drain(drainCtx)
	dcancel()
	if cerr := c.close(); cerr != nil && runErr == nil {
		opt.Logger.Warn("client connection", "err", cerr)
	}
	if runErr != nil {
		return nil, runErr
	}
	if n := l.n.Load(); n > 0 {
		out.messagesPerRequest = float64(engines.sent.Load()-sentBefore) / float64(n)
	}
	recs, err := engines.stop()
	engines = nil
	if err != nil {
		return nil, err
	}
	out.phase = buildPhase(sys.name(), cfg, l, recs, smp.begin, end, smp.peakRSS.Load())
	return out, nil
}

// connectClients opens n client connections to sys; the load's requests take them
// in turn.
func connectClients(ctx context.Context, sys system, sk sink, n int) (conn, error) {
	if n <= 1 {
		return sys.connect(ctx, sk)
	}
	m := &multiConn{}
	for range n {
		c, err := sys.connect(ctx, sk)
		if err != nil {
			m.close()
			return nil, err
		}
		m.conns = append(m.conns, c)
	}
	return m, nil
}

// multiConn spreads one load over several connections, request seq on connection
// seq mod n. Each connection reports to the same sink, which keys by seq, so an
// output that reaches another connection than its request's (the relay answers
// whoever spoke last) is still counted for its request.
type multiConn struct {
	conns []conn
}

func (m *multiConn) submit(seq int64, req *wire.EngineCoreRequest) error {
	return m.conns[seq%int64(len(m.conns))].submit(seq, req)
}

func (m *multiConn) close() error {
	var errs []error
	for _, c := range m.conns {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// parkStreams submits n requests the engines hold without stepping (HoldMarker) on a
// connection of their own, waits until every one reached an engine, and returns that
// connection (open: closing it may abort them) with the live heap each stream added.
func parkStreams(ctx context.Context, cfg Config, sys system, g *engineGroup, n int) (conn, float64, error) {
	before := liveHeap()
	received := g.received.Load()
	c, err := sys.connect(ctx, discardSink{})
	if err != nil {
		return nil, 0, err
	}
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(int64(cfg.OutputTokens))
	sp.IgnoreEOS = true
	sp.Normalize()
	prompt := make([]int64, cfg.PromptTokens)
	for i := range prompt {
		prompt[i] = int64(100 + i)
	}
	var req wire.EngineCoreRequest
	var id []byte
	for i := range n {
		prompt[0], prompt[1] = int64(i), engine.HoldMarker
		id = strconv.AppendInt(append(id[:0], "park-"...), int64(i), 10)
		req = wire.EngineCoreRequest{RequestID: string(id), PromptTokenIDs: prompt, Sampling: &sp,
			ArrivalTime: float64(time.Now().UnixNano()) / 1e9}
		if err := c.submit(-1, &req); err != nil {
			c.close()
			return nil, 0, fmt.Errorf("bench: parking stream %d: %w", i, err)
		}
	}
	deadline := time.Now().Add(2*time.Minute + time.Duration(n)*50*time.Microsecond)
	for g.received.Load()-received < int64(n) {
		if time.Now().After(deadline) {
			c.close()
			return nil, 0, fmt.Errorf("bench: only %d of %d parked streams reached the engines", g.received.Load()-received, n)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			c.close()
			return nil, 0, ctx.Err()
		}
	}
	after := liveHeap()
	return c, (float64(after) - float64(before)) / float64(n), nil
}

// discardSink takes the parked streams' answers: they have none until they are
// aborted when the phase ends.
type discardSink struct{}

func (discardSink) output(int64, int, bool, int64) {}
func (discardSink) failed(int64, int64)            {}

// startCPUProfile profiles this process into file until the returned func is
// called; a profile that cannot start is skipped (another may be running).
func startCPUProfile(file string) func() {
	f, err := os.Create(file)
	if err != nil {
		return func() {}
	}
	if pprof.StartCPUProfile(f) != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
