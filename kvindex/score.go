package kvindex

import "fmt"

// Candidate is one rank as the scorer sees it, in the caller's order.
type Candidate struct {
	Ready bool // connected and up; a rank not ready is never chosen
	// Load is the dispatcher's least-loaded score (dispatcher.Load.Score): requests
	// waiting and running, with the KV-pressure term.
	Load float64
	// CachedTokens and PendingTokens are the rank's Match for the prompt.
	CachedTokens, PendingTokens int
}

// Decision is the scorer's choice.
type Decision struct {
	Index         int // in the candidates; -1 when none is ready
	Reason        Reason
	CachedTokens  int // the chosen rank's cached prefix (the predicted hit)
	PendingTokens int // the chosen rank's prefix still on its way there
}

// Reason says why a rank was chosen; its String is the metric label.
type Reason uint8

// The reasons.
const (
	ReasonNoneReady    Reason = iota // no rank is ready
	ReasonCacheHit                   // the lowest score, with a prefix there
	ReasonNoHit                      // no ready rank holds any prefix: least-loaded
	ReasonBalanceGuard               // the lowest-scoring rank was too loaded; the best of the rest
	ReasonTie                        // several ranks shared the lowest score with a prefix; spread by seq
	ReasonLoad                       // a rank with a longer prefix scored worse for its load
)

func (r Reason) String() string {
	switch r {
	case ReasonNoneReady:
		return "none_ready"
	case ReasonCacheHit:
		return "cache_hit"
	case ReasonNoHit:
		return "no_hit"
	case ReasonBalanceGuard:
		return "balance_guard"
	case ReasonTie:
		return "tie"
	case ReasonLoad:
		return "load"
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Defaults of the Scorer.
const (
	// DefaultBalanceFloor and DefaultBalanceRatio make the default guard
	// max(4, 50% of the least-loaded ready rank's Load): a rank may carry four more
	// requests than the idlest for the sake of its cache, or half as many again
	// under heavy load, and no more.
	DefaultBalanceFloor = 4.0
	DefaultBalanceRatio = 0.5
	// DefaultMinRequestTokens floors the mean prefill per request, so that a run of
	// fully cached prompts cannot make load free.
	DefaultMinRequestTokens = 128.0
	// meanWeight is the running average's step: about the last 16 requests count.
	meanWeight = 1.0 / 16
)

// Scorer chooses a rank for a prompt by the prefill work each would still do:
//
//	score = (promptTokens − cached − pending) + Load × mean prefill per request
//
// both terms in tokens of prefill; the lowest wins, ties spread by seq. A rank whose
// Load exceeds the least-loaded ready rank's by more than the balance threshold is
// not a candidate: cache never beats overload. The mean is a running average of the
// prefill of what the Scorer routed, floored by MinRequestTokens. A Scorer is not
// safe for concurrent use (the caller's lock covers it with the Index).
type Scorer struct {
	// BalanceThreshold is the Load a rank may carry above the least-loaded ready
	// rank and still be chosen for its cache; 0 or less: max(DefaultBalanceFloor,
	// DefaultBalanceRatio × that least Load).
	BalanceThreshold float64
	// MinRequestTokens floors the mean prefill per request; 0 or less: the default.
	MinRequestTokens float64

	mean float64
}

// Choose returns the rank to use for a prompt of promptTokens tokens. seq rotates
// the scan start, one step per request, so that equal scores spread.
func (s *Scorer) Choose(cands []Candidate, promptTokens int, seq uint64) Decision {
	least, ok := leastLoad(cands)
	if !ok {
		return Decision{Index: -1, Reason: ReasonNoneReady}
	}
	limit := least + s.threshold(least)
	per := s.PerRequestTokens()
	best, pick, ties, maxHit := -1, -1, 0, 0
	var bestScore, pickScore float64
	start := int(seq % uint64(len(cands)))
	for k := range cands {
		i := (start + k) % len(cands)
		c := &cands[i]
		if !c.Ready {
			continue
		}
		sc := float64(prefill(c, promptTokens)) + c.Load*per
		if best < 0 || sc < bestScore {
			best, bestScore = i, sc
		}
		maxHit = max(maxHit, hit(c))
		if c.Load > limit {
			continue
		}
		switch {
		case pick < 0 || sc < pickScore:
			pick, pickScore, ties = i, sc, 1
		case sc == pickScore:
			ties++
		}
	}
	d := decide(cands, best, pick, ties, maxHit)
	s.observe(prefill(&cands[pick], promptTokens))
	return d
}

// decide names the reason for choosing pick.
func decide(cands []Candidate, best, pick, ties, maxHit int) Decision {
	c := &cands[pick]
	d := Decision{Index: pick, CachedTokens: c.CachedTokens, PendingTokens: c.PendingTokens}
	switch {
	case best != pick:
		// Only a rank holding a prefix can score below the least-loaded one, so the
		// guard took a cache winner away.
		d.Reason = ReasonBalanceGuard
	case maxHit == 0:
		d.Reason = ReasonNoHit
	case hit(c) < maxHit:
		d.Reason = ReasonLoad
	case ties > 1:
		d.Reason = ReasonTie
	default:
		d.Reason = ReasonCacheHit
	}
	return d
}

// threshold is the guard's allowance above the least Load.
func (s *Scorer) threshold(least float64) float64 {
	if s.BalanceThreshold > 0 {
		return s.BalanceThreshold
	}
	return max(DefaultBalanceFloor, DefaultBalanceRatio*least)
}

// PerRequestTokens is the prefill one queued request stands for: the running mean,
// floored.
func (s *Scorer) PerRequestTokens() float64 {
	floor := s.MinRequestTokens
	if floor <= 0 {
		floor = DefaultMinRequestTokens
	}
	return max(s.mean, floor)
}

// observe folds one routed request's prefill into the running mean. The mean starts
// at zero, so the floor holds until about a dozen requests have been seen: a cold
// start does not take its first, fully uncached prompt as the norm, which would make
// the first request of a burst outweigh the prefix it is about to share.
func (s *Scorer) observe(tokens int) {
	s.mean += (float64(tokens) - s.mean) * meanWeight
}

// leastLoad is the least Load of a ready candidate.
func leastLoad(cands []Candidate) (float64, bool) {
	least, ok := 0.0, false
	for i := range cands {
		if cands[i].Ready && (!ok || cands[i].Load < least) {
			least, ok = cands[i].Load, true
		}
	}
	return least, ok
}

func hit(c *Candidate) int { return max(c.CachedTokens, 0) + max(c.PendingTokens, 0) }

// prefill is the prompt tokens the rank would still compute.
func prefill(c *Candidate, promptTokens int) int {
	return max(promptTokens-hit(c), 0)
}
