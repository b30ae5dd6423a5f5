package bootstrap

import (
	"context"
	"net"
	"sync"
	"time"
)

// Prober checks that a worker's ZeroMQ listener is up. vLLM sends no
// heartbeats, so reachability of the registered port is the only liveness
// signal there is.
type Prober interface {
	// Probe returns nil if addr ("host:port") accepts a connection before
	// ctx ends.
	Probe(ctx context.Context, addr string) error
}

// TCPProber probes with a bare TCP connect, closed at once. A ZeroMQ ROUTER
// accepts it and drops it when the ZMTP greeting never comes, so the worker
// is not disturbed.
type TCPProber struct{}

// Probe implements Prober.
func (TCPProber) Probe(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// maxParallelProbes bounds the connects of one sweep, so a registry holding
// thousands of workers does not open thousands of sockets at once.
const maxParallelProbes = 64

// probeAll probes every target once with timeout each, in parallel.
func probeAll(ctx context.Context, p Prober, ts []ProbeTarget, timeout time.Duration) []ProbeResult {
	out := make([]ProbeResult, len(ts))
	sem := make(chan struct{}, maxParallelProbes)
	var wg sync.WaitGroup
	for i, t := range ts {
		out[i].ProbeTarget = t
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			out[i].Err = p.Probe(pctx, t.Dial)
		}()
	}
	wg.Wait()
	return out
}

// probeConflict probes the holder of a conflicting registration while the
// client waits. Each target gets up to attempts connects of timeout each,
// gap apart, all within budget: a worker is reported dead only if every
// attempt failed, so a single dropped SYN does not hand a live engine's rank
// to a newcomer. Results are marked Sync.
func probeConflict(ctx context.Context, p Prober, ts []ProbeTarget, timeout, budget, gap time.Duration, attempts int) []ProbeResult {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	out := make([]ProbeResult, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		out[i] = ProbeResult{ProbeTarget: t, Sync: true}
		wg.Go(func() {
			for a := 0; ; a++ {
				pctx, pcancel := context.WithTimeout(ctx, timeout)
				err := p.Probe(pctx, t.Dial)
				pcancel()
				out[i].Err = err
				if err == nil || a+1 >= attempts || ctx.Err() != nil {
					return
				}
				if gap > 0 {
					tm := time.NewTimer(gap)
					select {
					case <-ctx.Done():
						tm.Stop()
						return
					case <-tm.C:
					}
				}
			}
		})
	}
	wg.Wait()
	return out
}
