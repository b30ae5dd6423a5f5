package bench

import (
	"math/rand/v2"
	"time"
)

// Arrivals yields the send times of an open-loop Poisson process: inter-arrival gaps are
// exponential with mean 1/rate, so load comes in bursts the way independent users make
// it, rather than at a metronome's even pace that hides queueing. The source is seeded,
// so the same seed replays the same schedule. Not safe for concurrent use.
type Arrivals struct {
	rng  *rand.Rand
	rate float64 // requests per second
	at   time.Duration
}

// NewArrivals returns the schedule for rate requests/s (rate > 0) from seed.
func NewArrivals(rate float64, seed uint64) *Arrivals {
	// The second PCG word is fixed: the seed alone names the schedule.
	return &Arrivals{rng: rand.New(rand.NewPCG(seed, 0x5357_4954_4348)), rate: rate}
}

// Next returns the offset of the next arrival from the start of the schedule.
func (a *Arrivals) Next() time.Duration {
	gap := a.rng.ExpFloat64() / a.rate
	a.at += time.Duration(gap * float64(time.Second))
	return a.at
}
