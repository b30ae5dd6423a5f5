package server

// The periodic stats line, as vLLM's LoggingStatLogger writes one per engine every
// --log-stats-interval: prompt and generation throughput, running and waiting
// requests and KV-cache usage, per rank. Like vLLM it goes quiet while every engine
// stays idle (one idle report, then none until something happens).

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
)

// outputTokensSeries is the dispatcher's generated-token counter, by rank: the
// generation throughput is read from it so the hot path counts tokens once.
const outputTokensSeries = "switchyard_output_tokens_total"

// statsLog writes the stats lines. Its methods are safe on a nil *statsLog (stats
// logging off).
type statsLog struct {
	log    *slog.Logger
	d      *dispatcher.Dispatcher
	gather prometheus.Gatherer
	now    func() time.Time

	mu     sync.Mutex
	prompt map[int]int64 // prompt tokens accepted, by rank (addPrompt)

	// Owned by report's caller (one goroutine).
	lastAt             time.Time
	lastPrompt, lastGn map[int]int64
	quiet              bool // the last report was an idle one

	// predicted, when set (cache-aware routing), gives the prompt tokens routed
	// and those predicted cached, so far; lastKV is the previous report's pair.
	predicted func() (prompt, cached int64)
	lastKV    [2]int64
}

func newStatsLog(log *slog.Logger, d *dispatcher.Dispatcher, gather prometheus.Gatherer, now func() time.Time) *statsLog {
	s := &statsLog{log: log, d: d, gather: gather, now: now, prompt: map[int]int64{},
		lastPrompt: map[int]int64{}, lastGn: map[int]int64{}}
	s.lastAt = now()
	return s
}

// addPrompt counts n prompt tokens submitted to rank (vLLM counts a request's
// prompt once it is scheduled; switchyard, which does not see the schedule, when
// the engine is given it).
func (s *statsLog) AddPrompt(rank, n int) {
	if s == nil || rank < 0 {
		return
	}
	s.mu.Lock()
	s.prompt[rank] += int64(n)
	s.mu.Unlock()
}

// run reports every interval until ctx ends.
func (s *statsLog) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.report()
		}
	}
}

// generated reads the generated-token counter of every rank.
func (s *statsLog) generated() map[int]int64 {
	out := map[int]int64{}
	mfs, err := s.gather.Gather()
	if err != nil && mfs == nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != outputTokensSeries {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "rank" {
					if r, err := strconv.Atoi(lp.GetValue()); err == nil {
						out[r] = int64(m.GetCounter().GetValue())
					}
				}
			}
		}
	}
	return out
}

// report logs one line per engine that is up, unless every engine was idle in
// this interval and the last.
func (s *statsLog) report() {
	now := s.now()
	secs := now.Sub(s.lastAt).Seconds()
	if secs <= 0 {
		secs = 1
	}
	s.mu.Lock()
	prompt := make(map[int]int64, len(s.prompt))
	for r, n := range s.prompt {
		prompt[r] = n
	}
	s.mu.Unlock()
	gen := s.generated()
	type line struct {
		rank                int
		promptRate, genRate float64
		running, waiting    int64
		kv                  float64
		state               dispatcher.EngineState
		inFlight            int64
	}
	var lines []line
	idle := true
	for _, e := range s.d.Engines() {
		l := line{
			rank:       e.Rank,
			promptRate: float64(prompt[e.Rank]-s.lastPrompt[e.Rank]) / secs,
			genRate:    float64(gen[e.Rank]-s.lastGn[e.Rank]) / secs,
			running:    e.Running, waiting: e.Waiting, kv: e.KVCacheUsage, state: e.State, inFlight: e.InFlight,
		}
		if l.promptRate != 0 || l.genRate != 0 || l.running != 0 || l.waiting != 0 || l.inFlight != 0 {
			idle = false
		}
		lines = append(lines, l)
	}
	s.lastAt, s.lastPrompt, s.lastGn = now, prompt, gen
	if idle && s.quiet {
		return
	}
	s.quiet = idle
	for _, l := range lines {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "engine stats",
			slog.Int("rank", l.rank), slog.String("state", string(l.state)),
			slog.Float64("prompt_tokens_per_s", round1(l.promptRate)),
			slog.Float64("generation_tokens_per_s", round1(l.genRate)),
			slog.Int64("running", l.running), slog.Int64("waiting", l.waiting),
			slog.Float64("kv_cache_usage_pct", round1(100*l.kv)),
			slog.Int64("in_flight", l.inFlight))
	}
	s.reportKV()
}

// reportKV logs the cache-aware policy's predicted prefix-cache hit rate over the
// interval: the share of routed prompt tokens the index expected to be cached on
// the engine chosen.
func (s *statsLog) reportKV() {
	if s.predicted == nil {
		return
	}
	prompt, cached := s.predicted()
	dp, dc := prompt-s.lastKV[0], cached-s.lastKV[1]
	s.lastKV = [2]int64{prompt, cached}
	rate := 0.0
	if dp > 0 {
		rate = float64(dc) / float64(dp)
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "kv routing stats",
		slog.Int64("routed_prompt_tokens", dp), slog.Int64("predicted_cached_tokens", dc),
		slog.Float64("predicted_hit_rate_pct", round1(100*rate)))
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
