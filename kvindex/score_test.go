package kvindex

import (
	"slices"
	"testing"
)

func TestScorerChoose(t *testing.T) {
	ready := func(load float64, cachedTok, pendingTok int) Candidate {
		return Candidate{Ready: true, Load: load, CachedTokens: cachedTok, PendingTokens: pendingTok}
	}
	tests := []struct {
		name   string
		cands  []Candidate
		prompt int
		seq    uint64
		want   int
		reason Reason
	}{
		{"cache wins under equal load", []Candidate{ready(2, 0, 0), ready(2, 3000, 0), ready(2, 1000, 0)},
			4096, 0, 1, ReasonCacheHit},
		{"the longer prefix wins", []Candidate{ready(1, 1000, 0), ready(1, 2000, 0)},
			4096, 0, 1, ReasonCacheHit},
		{"a small hit loses to a lighter rank", []Candidate{ready(3, 16, 0), ready(0, 0, 0)},
			4096, 0, 1, ReasonLoad},
		{"load wins past the guard", []Candidate{ready(10, 4000, 0), ready(1, 0, 0), ready(2, 0, 0)},
			4096, 0, 1, ReasonBalanceGuard},
		{"past the guard, the best of the rest keeps its cache", []Candidate{ready(10, 4000, 0), ready(1, 0, 0), ready(3, 2000, 0)},
			4096, 0, 2, ReasonBalanceGuard},
		{"within the guard, cache wins over load", []Candidate{ready(5, 4000, 0), ready(1, 0, 0)},
			4096, 0, 0, ReasonCacheHit},
		{"the guard grows with the least load", []Candidate{ready(30, 4000, 0), ready(20, 0, 0)},
			4096, 0, 0, ReasonCacheHit},
		{"pending counts like cached", []Candidate{ready(1, 0, 0), ready(1, 0, 3000), ready(0, 0, 0)},
			4096, 0, 1, ReasonCacheHit},
		{"no hit: least loaded", []Candidate{ready(3, 0, 0), ready(1, 0, 0), ready(2, 0, 0)},
			4096, 0, 1, ReasonNoHit},
		{"ties spread by seq (0)", []Candidate{ready(1, 512, 0), ready(1, 512, 0), ready(1, 512, 0)},
			4096, 0, 0, ReasonTie},
		{"ties spread by seq (1)", []Candidate{ready(1, 512, 0), ready(1, 512, 0), ready(1, 512, 0)},
			4096, 1, 1, ReasonTie},
		{"ties spread by seq (5)", []Candidate{ready(1, 512, 0), ready(1, 512, 0), ready(1, 512, 0)},
			4096, 5, 2, ReasonTie},
		{"no-hit ties spread too", []Candidate{ready(0, 0, 0), ready(0, 0, 0)},
			100, 1, 1, ReasonNoHit},
		{"not ready is never chosen", []Candidate{{Ready: false, CachedTokens: 4096}, ready(9, 0, 0)},
			4096, 0, 1, ReasonNoHit},
		{"not ready does not set the least load", []Candidate{{Ready: false, Load: 0}, ready(9, 4000, 0), ready(12, 0, 0)},
			4096, 0, 1, ReasonCacheHit},
		{"none ready", []Candidate{{}, {}}, 4096, 0, -1, ReasonNoneReady},
		{"no candidates", nil, 4096, 0, -1, ReasonNoneReady},
		{"zero-token prompt: least loaded", []Candidate{ready(2, 0, 0), ready(1, 0, 0)},
			0, 0, 1, ReasonNoHit},
		{"a tiny prompt is not worth a queue", []Candidate{ready(1, 9999, 0), ready(0, 0, 0)},
			16, 0, 1, ReasonLoad},
		{"a hit past the prompt counts as the prompt", []Candidate{ready(0, 9999, 0), ready(0, 16, 0)},
			16, 0, 0, ReasonTie},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Scorer
			d := s.Choose(tt.cands, tt.prompt, tt.seq)
			if d.Index != tt.want || d.Reason != tt.reason {
				t.Errorf("Choose = %d (%v), want %d (%v)", d.Index, d.Reason, tt.want, tt.reason)
			}
			if d.Index >= 0 && d.CachedTokens != tt.cands[d.Index].CachedTokens {
				t.Errorf("CachedTokens = %d", d.CachedTokens)
			}
		})
	}
}

func TestScorerThreshold(t *testing.T) {
	c := []Candidate{{Ready: true, Load: 3, CachedTokens: 4000}, {Ready: true, Load: 0}}
	s := Scorer{BalanceThreshold: 2}
	if d := s.Choose(c, 4096, 0); d.Index != 1 || d.Reason != ReasonBalanceGuard {
		t.Errorf("threshold 2: %+v", d)
	}
	s = Scorer{BalanceThreshold: 3}
	if d := s.Choose(c, 4096, 0); d.Index != 0 || d.Reason != ReasonCacheHit {
		t.Errorf("threshold 3: %+v", d)
	}
}

// The mean prefill per request is learnt from what was routed: after long uncached
// prompts, load weighs more.
func TestScorerLearnsPrefillPerRequest(t *testing.T) {
	var s Scorer
	if got := s.PerRequestTokens(); got != DefaultMinRequestTokens {
		t.Fatalf("initial per-request = %v", got)
	}
	idle := []Candidate{{Ready: true}}
	for range 100 {
		s.Choose(idle, 2000, 0)
	}
	if got := s.PerRequestTokens(); got < 1900 || got > 2000 {
		t.Errorf("after 2000-token prompts: %v", got)
	}
	// Load 3 now costs ~6000 tokens: a 2000-token hit does not make up for it.
	c := []Candidate{{Ready: true, Load: 3, CachedTokens: 2000}, {Ready: true, Load: 0}}
	if d := s.Choose(c, 4000, 0); d.Index != 1 || d.Reason != ReasonLoad {
		t.Errorf("after learning: %+v", d)
	}
	// Fully cached prompts cannot make load free: the floor holds.
	for range 200 {
		s.Choose([]Candidate{{Ready: true, CachedTokens: 4000}}, 4000, 0)
	}
	if got := s.PerRequestTokens(); got != DefaultMinRequestTokens {
		t.Errorf("after cached prompts: %v", got)
	}
}

// A burst sharing a new system prompt lands together: the first request's marks make
// the next ones prefer its rank, until the guard (or the load term) sends the rest
// elsewhere, where they gather again.
func TestBurstLandsTogether(t *testing.T) {
	ix := newTestIndex(t, Config{})
	sys := seq(1000, 400) // 100 blocks shared by the burst
	var s Scorer
	loads := make([]float64, 4)
	var got []int
	for i := range 8 {
		q := &Query{Tokens: cat(sys, seq(5000+100*i, 40)), StopAt: -1, Now: int64(i)}
		cands := make([]Candidate, len(loads))
		for r := range cands {
			cands[r] = Candidate{Ready: true, Load: loads[r]}
		}
		for _, m := range ix.Lookup(q, nil) {
			cands[m.Rank].CachedTokens, cands[m.Rank].PendingTokens = m.CachedTokens, m.PendingTokens
		}
		d := s.Choose(cands, len(q.Tokens), uint64(i))
		ix.MarkPending(d.Index, q, int64(i))
		loads[d.Index]++
		got = append(got, d.Index)
	}
	// Four requests gather (a fifth would wait behind 4 × 128 tokens of queue to
	// save 400), then the next four gather on a second rank.
	want := []int{got[0], got[0], got[0], got[0], got[4], got[4], got[4], got[4]}
	if got[4] == got[0] || !slices.Equal(got, want) {
		t.Errorf("burst went to %v", got)
	}
}

func TestReasonString(t *testing.T) {
	want := map[Reason]string{ReasonNoneReady: "none_ready", ReasonCacheHit: "cache_hit",
		ReasonNoHit: "no_hit", ReasonBalanceGuard: "balance_guard", ReasonTie: "tie",
		ReasonLoad: "load", Reason(99): "Reason(99)"}
	for r, w := range want {
		if r.String() != w {
			t.Errorf("%d: %q, want %q", r, r.String(), w)
		}
	}
}
