package mockengine

import (
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// addPrompt is an ADD of prompt asking for n tokens.
func addPrompt(id string, prompt []int64, n int64) *wire.EngineCoreRequest {
	r := add(id, n, nil)
	r.PromptTokenIDs = prompt
	return r
}

// firstTokens steps s at each time and reports, per request, the time of the
// step that brought its first token and the cached tokens it reported.
func firstTokens(s *Scheduler, times ...time.Duration) (map[string]time.Duration, map[string]int64) {
	at, cached := map[string]time.Duration{}, map[string]int64{}
	for _, now := range times {
		for _, o := range s.StepAt(now, nil) {
			if _, seen := at[o.RequestID]; !seen && len(o.NewTokenIDs) > 0 {
				at[o.RequestID], cached[o.RequestID] = now, o.NumCachedTokens
			}
		}
	}
	return at, cached
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// Prefills run one at a time in arrival order, each as long as its uncached
// tokens take; a request that shares the previous prompt's prefix starts after
// that prefill and is short.
func TestSchedulerPrefillSerialised(t *testing.T) {
	a, b := seqTokens(1, 100), seqTokens(1000, 100)
	tests := []struct {
		name       string
		reqs       []*wire.EngineCoreRequest
		arrive     []time.Duration
		wantAt     map[string]time.Duration
		wantCached map[string]int64
		stats      PrefixCacheStats
	}{
		{"distinct prompts queue", []*wire.EngineCoreRequest{addPrompt("a", a, 5), addPrompt("b", b, 5)}, []time.Duration{0, 0},
			map[string]time.Duration{"a": ms(100), "b": ms(200)}, map[string]int64{"a": 0, "b": 0},
			PrefixCacheStats{Requests: 2, Queries: 200}},
		{"a shared prefix is short", []*wire.EngineCoreRequest{addPrompt("a", a, 5), addPrompt("a2", a, 5)}, []time.Duration{0, 0},
			map[string]time.Duration{"a": ms(100), "a2": ms(110)}, map[string]int64{"a": 0, "a2": 96},
			PrefixCacheStats{Requests: 2, Queries: 200, Hits: 96}},
		{"a late arrival starts at once", []*wire.EngineCoreRequest{addPrompt("a", a, 5), addPrompt("b", b, 5)}, []time.Duration{0, ms(150)},
			map[string]time.Duration{"a": ms(100), "b": ms(250)}, map[string]int64{"a": 0, "b": 0},
			PrefixCacheStats{Requests: 2, Queries: 200}},
		{"prompt logprobs skip the lookup", []*wire.EngineCoreRequest{addPrompt("a", a, 5), skipRead(addPrompt("a2", a, 5))}, []time.Duration{0, 0},
			map[string]time.Duration{"a": ms(100), "a2": ms(200)}, map[string]int64{"a": 0, "a2": 0},
			PrefixCacheStats{Requests: 1, Queries: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScheduler(1, 0, 8)
			s.Clock = func() float64 { return 0 }
			var c CacheCounters
			s.EnableCache(CacheConfig{Blocks: 64, PrefillPerToken: time.Millisecond, Counters: &c})
			for i, r := range tt.reqs {
				if err := s.AddAt(tt.arrive[i], r); err != nil {
					t.Fatal(err)
				}
			}
			var steps []time.Duration
			for now := ms(0); now <= ms(300); now += ms(10) {
				steps = append(steps, now)
			}
			at, cached := firstTokens(s, steps...)
			for id, want := range tt.wantAt {
				if at[id] != want || cached[id] != tt.wantCached[id] {
					t.Errorf("%s: first token at %v with %d cached, want %v with %d", id, at[id], cached[id], want, tt.wantCached[id])
				}
			}
			if st, _ := s.TakePrefixCacheStats(); st != tt.stats {
				t.Errorf("stats %+v, want %+v", st, tt.stats)
			}
			if c.Hits.Load() != tt.stats.Hits || c.Queries.Load() != tt.stats.Queries || c.PrefillTokens.Load() != 200-tt.wantCached["a2"] {
				t.Errorf("counters: hits %d queries %d prefilled %d", c.Hits.Load(), c.Queries.Load(), c.PrefillTokens.Load())
			}
			if !s.Idle() || s.Cache().Usage() != 0 {
				t.Errorf("after every request ended: idle %v, usage %v", s.Idle(), s.Cache().Usage())
			}
		})
	}
}

func skipRead(r *wire.EngineCoreRequest) *wire.EngineCoreRequest {
	r.Sampling.SkipReadingPrefixCache = wire.OptBool{Value: true, Valid: true}
	return r
}

// While one prefill runs, the running requests keep decoding, the prefilling one
// counts as running and the queued one as waiting.
func TestSchedulerPrefillLoad(t *testing.T) {
	s := NewScheduler(1, 0, 8)
	s.EnableCache(CacheConfig{Blocks: 64, PrefillPerToken: time.Millisecond})
	s.AddAt(0, addPrompt("short", seqTokens(1, 10), 100))
	s.StepAt(ms(10), nil)
	s.AddAt(ms(10), addPrompt("long", seqTokens(100, 50), 5))
	s.AddAt(ms(10), addPrompt("next", seqTokens(200, 50), 5))
	for now := ms(20); now < ms(60); now += ms(10) {
		if out := s.StepAt(now, nil); len(out) != 1 || out[0].RequestID != "short" {
			t.Fatalf("step at %v: %+v", now, out)
		}
	}
	if st := s.Stats(); st.NumRunningReqs != 2 || st.NumWaitingReqs != 1 {
		t.Fatalf("stats %+v, want 2 running (one prefilling), 1 waiting", st)
	}
	s.Abort([]string{"long"}) // its prefill runs to its end (60 ms), then "next" starts
	if out := s.StepAt(ms(100), nil); len(out) != 1 {
		t.Fatalf("next ended its prefill early: %+v", out)
	}
	if out := s.StepAt(ms(110), nil); len(out) != 2 {
		t.Fatalf("next did not start after the aborted prefill: %+v", out)
	}
}

// With the cache on and no prefill time, a request's first token comes at the
// first step after its ADD, as without the cache.
func TestSchedulerCacheNoPrefillTime(t *testing.T) {
	s := NewScheduler(1, 0, 8)
	s.EnableCache(CacheConfig{Blocks: 8})
	s.Add(add("x", 3, nil))
	toks, fin, _ := run(t, s)
	if len(toks["x"]) != 3 || fin["x"] != wire.FinishLength {
		t.Fatalf("tokens %v finish %v", toks, fin)
	}
}
