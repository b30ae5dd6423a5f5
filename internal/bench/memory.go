package bench

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"time"
)

// runMemory is the in-flight memory scenario: Inflight requests held at once by
// engines that never step, weighed once through the relay and once through
// switchyard. Client and engine state per request is the same in both phases, so the
// difference of the two heaps is what switchyard keeps per request.
func runMemory(ctx context.Context, cfg Config, opt Options) (*Memory, error) {
	if cfg.Mode != ModeEmbedded || cfg.EnginesAsProcesses {
		return nil, &ConfigError{Field: "inflight", Msg: "the memory scenario needs the embedded mode with in-process engines"}
	}
	m := &Memory{Inflight: cfg.Inflight}
	base, rss, _, err := weighInflight(ctx, cfg, opt, func(ctx context.Context) (system, error) { return startRelaySystem(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	m.BaselineHeapPerRequest, m.BaselinePeakRSSBytes = base, rss
	runtime.GC()
	sw, rss, gs, err := weighInflight(ctx, cfg, opt, func(ctx context.Context) (system, error) { return startSystem(ctx, cfg) })
	if err != nil {
		return nil, fmt.Errorf("switchyard: %w", err)
	}
	m.SwitchyardHeapPerRequest, m.SwitchyardPeakRSSBytes, m.SwitchyardGoroutinesAtTop = sw, rss, gs
	m.FrontendBytesPerRequest = sw - base
	return m, nil
}

// liveHeap is the heap held by live objects, after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func weighInflight(ctx context.Context, cfg Config, opt Options, start func(context.Context) (system, error)) (perReq float64, peakRSS int64, goroutines int, err error) {
	c := cfg
	c.StepTime = time.Hour // the engines hold every request: nothing finishes
	c.Rate, c.Concurrency, c.Warmup, c.Duration, c.Requests = 0, cfg.Inflight, 0, time.Hour, 0
	sys, err := start(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		if cerr := sys.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	engines, err := startEngines(ctx, c, opt, sys.handshake())
	if err != nil {
		return 0, 0, 0, err
	}
	defer engines.stop()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	if err := sys.ready(rctx, c.Engines); err != nil {
		return 0, 0, 0, err
	}
	l := newLoad(c)
	cn, err := sys.connect(ctx, l)
	if err != nil {
		return 0, 0, 0, err
	}
	defer cn.close()
	before := liveHeap()
	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() { runDone <- l.run(runCtx, cn, time.Now()) }()
	deadline := time.Now().Add(2 * time.Minute)
	for engines.received.Load() < int64(cfg.Inflight) {
		if time.Now().After(deadline) {
			stop()
			<-runDone
			return 0, 0, 0, fmt.Errorf("bench: only %d of %d requests reached the engines", engines.received.Load(), cfg.Inflight)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			stop()
			<-runDone
			return 0, 0, 0, ctx.Err()
		}
	}
	after := liveHeap()
	goroutines = runtime.NumGoroutine()
	peakRSS = rssBytes(0)
	stop()
	<-runDone
	return (float64(after) - float64(before)) / float64(cfg.Inflight), peakRSS, goroutines, nil
}
