package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Options are the run's edges that are not part of its configuration.
type Options struct {
	// Progress receives a progress bar per phase; nil draws none.
	Progress io.Writer
	// Lines receives a plain line at each phase's start, end of warm-up and end,
	// and at each repeated run (for output that is not a terminal); nil: none.
	Lines io.Writer
	// Logger receives phase boundaries; nil discards.
	Logger *slog.Logger
	// EngineCommand starts one bench engine as a child process (Config.EnginesAsProcesses):
	// the binary and the arguments before the engine flags, e.g.
	// [/usr/bin/switchyard bench engine]. See EngineFlags.
	EngineCommand []string
	// ServerCommand starts one HTTP server of the --http comparison as a child process
	// (the binary and the arguments before its flags, e.g. [/usr/bin/switchyard bench
	// http-server]), so its CPU and allocations are measured alone; nil runs both
	// servers in this process.
	ServerCommand []string
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// system is what one phase measures: the relay, an embedded switchyard or a target.
type system interface {
	name() string
	// handshake is where the bench's engines connect; "" when the system brings its
	// own engines (a target), so no engine-side figures exist.
	handshake() string
	ready(ctx context.Context, engines int) error
	connect(ctx context.Context, s sink) (conn, error)
	pid() int // process charged with CPU and RSS; 0 = this process
	close() error
}

// Run executes cfg: the baseline and switchyard under the same load (or each rate of
// a sweep, or the memory scenario) and returns the report.
func Run(ctx context.Context, cfg Config, opt Options) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	var reps, aa []*Report
	withAA := false
	for i := range max(cfg.Repeat, 1) {
		if i > 0 {
			opt.Logger.Info("bench: next run", "run", i+1, "of", cfg.Repeat)
			runtime.GC()
		}
		if cfg.Repeat > 1 {
			opt.linef("run %d of %d", i+1, cfg.Repeat)
		}
		r, err := runOnce(ctx, cfg, opt)
		if err != nil {
			return nil, err
		}
		reps = append(reps, r)
		if i == 0 {
			withAA = wantsAA(cfg, r)
		}
		if withAA {
			// The A/A run right after each measured one: the two series see the
			// same stretch of the machine's load.
			opt.linef("A/A run %d of %d (the baseline in switchyard's place)", i+1, cfg.Repeat)
			runtime.GC()
			ac := cfg
			ac.BaselineVsBaseline = true
			a, err := runOnce(ctx, ac, opt)
			if err != nil {
				return nil, fmt.Errorf("A/A run: %w", err)
			}
			aa = append(aa, a)
		}
	}
	return CombineAA(reps, aa), nil
}

// wantsAA: a repeated run whose first report has ratio targets is judged beside an
// A/A series, one A/A run after each measured run (CombineAA). An A/A run itself, a
// calibration with --relay-work and a target outside this process have none.
func wantsAA(cfg Config, first *Report) bool {
	if cfg.Repeat < 2 || cfg.BaselineVsBaseline || cfg.RelayWork > 0 || cfg.Mode != ModeEmbedded ||
		cfg.KV != nil || cfg.Inflight > 0 || (!cfg.Baseline && !cfg.HTTP) {
		return false
	}
	for _, t := range first.Targets {
		if isRatioTarget(t) {
			return true
		}
	}
	return false
}

// runOnce is one run of the configuration.
func runOnce(ctx context.Context, cfg Config, opt Options) (*Report, error) {
	r := &Report{Schema: SchemaVersion, StartedAt: time.Now().UTC(), Machine: ThisMachine(), Config: cfg}
	if cfg.KV != nil {
		if err := runKV(ctx, cfg, opt, r); err != nil {
			return nil, err
		}
		r.Targets = checkTargets(r)
		return r, nil
	}
	if cfg.Inflight > 0 {
		m, err := runMemory(ctx, cfg, opt)
		if err != nil {
			return nil, err
		}
		r.Memory = m
		r.Targets = checkTargets(r)
		return r, nil
	}
	if cfg.HTTP {
		h, err := runHTTP(ctx, cfg, opt)
		if err != nil {
			return nil, err
		}
		r.HTTP = h
		r.Targets = checkTargets(r)
		return r, nil
	}
	rates := []float64{cfg.Rate}
	if len(cfg.Sweep) > 0 {
		rates = cfg.Sweep
	}
	for i, rate := range rates {
		c := cfg
		c.Rate = rate
		c.Seed = cfg.Seed + uint64(i)
		var base *Phase
		if cfg.Baseline && cfg.Mode == ModeEmbedded {
			p, err := runPhase(ctx, c, opt, func(ctx context.Context) (system, error) { return startRelaySystem(ctx, c) })
			if err != nil {
				return nil, fmt.Errorf("baseline: %w", err)
			}
			base = p
			runtime.GC() // the next phase starts from a clean heap, not the relay's garbage
		}
		measured := startSystem
		if c.BaselineVsBaseline {
			measured = func(ctx context.Context, c Config) (system, error) { return startNamedRelay(ctx, c, "relay-2") }
		}
		sw, err := runPhase(ctx, c, opt, func(ctx context.Context) (system, error) { return measured(ctx, c) })
		if err != nil {
			return nil, fmt.Errorf("switchyard: %w", err)
		}
		if len(rates) > 1 {
			r.Sweep = append(r.Sweep, SweepPoint{OfferedRate: rate, Switchyard: sw, Baseline: base})
		}
		if i == len(rates)-1 {
			r.Switchyard, r.Baseline = sw, base
		}
	}
	r.OverheadRatio = ratioOf(r.Switchyard, r.Baseline)
	r.Targets = checkTargets(r)
	r.Warnings = lagWarnings(r)
	return r, nil
}

// runPhase starts a system and the engines, drives the load and returns the figures.
func runPhase(ctx context.Context, cfg Config, opt Options, start func(context.Context) (system, error)) (_ *Phase, err error) {
	opt = opt.withDefaults()
	sys, err := start(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := sys.close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	opt.Logger.Info("phase starting", "system", sys.name(), "rate", cfg.Rate)
	var engines *engineGroup
	if hs := sys.handshake(); hs != "" {
		engines, err = startEngines(ctx, cfg, opt, hs)
		if err != nil {
			return nil, err
		}
		defer func() {
			if engines != nil {
				engines.stop()
			}
		}()
	}
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := sys.ready(readyCtx, cfg.Engines); err != nil {
		return nil, err
	}
	l := newLoad(cfg)
	c, err := sys.connect(ctx, l)
	if err != nil {
		return nil, err
	}
	closeConn := func() error {
		if c == nil {
			return nil
		}
		cerr := c.close()
		c = nil
		return cerr
	}
	defer closeConn()

	stopProfile := func() {}
	if cfg.Profile != "" && sys.name() == "switchyard" {
		if f, perr := os.Create(cfg.Profile); perr == nil {
			if pprof.StartCPUProfile(f) == nil {
				stopProfile = func() {
					pprof.StopCPUProfile()
					f.Close()
					// The allocation profile (go tool pprof -sample_index=alloc_objects)
					// covers the whole process life: read it against the CPU profile.
					if af, err := os.Create(cfg.Profile + ".allocs"); err == nil {
						pprof.Lookup("allocs").WriteTo(af, 0)
						af.Close()
					}
				}
			} else {
				f.Close()
			}
		}
	}
	stopTrace := startTrace(cfg.Trace, sys.name(), opt)
	began := time.Now()
	smp := startSampler(cfg, opt, sys, l, began)
	runErr := l.run(ctx, c, began)
	end := smp.finish()
	stopProfile()
	stopTrace()
	drainCtx, dcancel := context.WithTimeout(ctx, drainTimeout(cfg))
	l.drain(drainCtx)
	dcancel()
	if err := closeConn(); err != nil && runErr == nil {
		opt.Logger.Warn("client connection", "err", err)
	}
	if runErr != nil {
		return nil, runErr
	}
	var recs []EngineRecord
	if engines != nil {
		recs, err = engines.stop()
		engines = nil
		if err != nil {
			return nil, err
		}
	}
	return buildPhase(sys.name(), cfg, l, recs, smp.begin, end, smp.peakRSS.Load()), nil
}

// drainTimeout is how long stragglers may take after the last submission: a request
// needs OutputTokens/TokensPerStep steps, and queueing may double that.
func drainTimeout(cfg Config) time.Duration {
	steps := (cfg.OutputTokens + cfg.TokensPerStep - 1) / cfg.TokensPerStep
	return 5*time.Second + 2*time.Duration(steps)*cfg.StepTime
}

func buildPhase(name string, cfg Config, l *load, recs []EngineRecord, begin, end procSnap, peakRSS int64) *Phase {
	clients := l.records()
	ranks := max(cfg.Engines, 1)
	t := Join(clients, recs, l.from.Load(), ranks)
	secs := end.at.Sub(begin.at).Seconds()
	p := &Phase{
		Name: name, Requests: t.Measured, Failed: t.Failed, Unmatched: t.Unmatched, Seconds: secs,
		Dispatch: t.Dispatch.Summarize(), Return: t.Return.Summarize(), ReturnLast: t.ReturnLast.Summarize(),
		Overhead: t.Overhead.Summarize(), TTFT: t.TTFT.Summarize(), ITL: l.itl.Summarize(), E2E: t.E2E.Summarize(),
		PerRank: t.PerRank, PeakRSSBytes: peakRSS,
		SendLagP99US: us(int64(l.lag.Quantile(0.99))),
	}
	if len(recs) == 0 {
		p.PerRank = nil
	}
	if cfg.HTTP && !cfg.HTTPStream {
		// A JSON answer arrives whole after the final output: its overhead is the
		// dispatch plus the return of that final output.
		p.Overhead = t.OverheadLast.Summarize()
	}
	if secs > 0 {
		p.RequestsPerS = float64(l.winDone.Load()) / secs
		p.OutputTokensPerS = float64(l.winTokens.Load()) / secs
	}
	if n := float64(l.winDone.Load()); n > 0 {
		p.CPUSecondsPer1kRequests = (end.cpu - begin.cpu).Seconds() / n * 1000
		p.AllocsPerRequest = float64(end.allocs-begin.allocs) / n
		p.BytesAllocPerRequest = float64(end.bytes-begin.bytes) / n
	}
	return p
}

// sampler draws the progress bar, tracks peak RSS and takes the cost snapshot when
// the measured window opens.
type sampler struct {
	begin   procSnap
	peakRSS atomic.Int64
	stop    chan struct{}
	done    chan struct{}
	sys     system
	snap    func() procSnap
	// For the phase's closing progress line (Options.Lines).
	opt   Options
	load  *load
	began time.Time
}

func startSampler(cfg Config, opt Options, sys system, l *load, began time.Time) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{}), sys: sys, opt: opt, load: l, began: began}
	opt.phaseStarted(cfg, sys.name())
	snap := func() procSnap {
		if sn, ok := sys.(snapper); ok {
			return sn.snap()
		}
		if pid := sys.pid(); pid > 0 {
			return snapPID(pid)
		}
		return snapSelf()
	}
	from := began.Add(cfg.Warmup)
	s.begin = procSnap{at: from}
	if cfg.Warmup == 0 {
		s.begin = snap()
	}
	total := cfg.Warmup + cfg.Duration
	var bar *progressbar.ProgressBar
	if opt.Progress != nil {
		max := int64(total / time.Millisecond)
		if cfg.Requests > 0 {
			max = -1 // a spinner: the end is a count, not a time
		}
		bar = progressbar.NewOptions64(max, progressbar.OptionSetWriter(opt.Progress),
			progressbar.OptionSetDescription(sys.name()), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish())
	}
	go func() {
		defer close(s.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		opened := cfg.Warmup == 0
		var lastN int64
		lastAt := time.Now()
		for {
			select {
			case <-s.stop:
				if bar != nil {
					_ = bar.Finish()
				}
				return
			case now := <-t.C:
				if !opened && !now.Before(from) {
					s.begin, opened = snap(), true
					opt.windowOpened(cfg, sys.name())
				}
				if rss := rssBytes(sys.pid()); rss > s.peakRSS.Load() {
					s.peakRSS.Store(rss)
				}
				if bar != nil {
					n := l.n.Load()
					rate := float64(n-lastN) / now.Sub(lastAt).Seconds()
					lastN, lastAt = n, now
					phase := "warm-up"
					if opened {
						phase = "measuring"
					}
					bar.Describe(fmt.Sprintf("%-10s %-9s %7.0f req/s, %6d in flight", sys.name(), phase, rate, l.inflight.Load()))
					_ = bar.Set64(int64(now.Sub(began) / time.Millisecond))
				}
			}
		}
	}()
	s.snap = snap
	return s
}

// finish stops the sampler and returns the closing snapshot.
func (s *sampler) finish() procSnap {
	end := s.snap()
	close(s.stop)
	<-s.done
	s.opt.linef("%s: phase done: %d requests submitted in %v", s.sys.name(), s.load.n.Load(), time.Since(s.began).Round(time.Millisecond))
	if s.begin.cpu == 0 && s.begin.allocs == 0 {
		s.begin = end // the window never opened (a run shorter than its warm-up)
	}
	return end
}
