package dispatcher

import "fmt"

// Load is one engine as the rank policy sees it: a snapshot of its state, taken per
// request from the engine's atomics. The policy is a pure function of a []Load.
type Load struct {
	Rank  int
	Ready bool // connected and up; a dead or stuck engine is never chosen
	// InFlight is our own count of live requests on the engine.
	InFlight int64
	// Waiting and Running are from the engine's last scheduler_stats (or the
	// coordinator's publish); zero before the first one arrives.
	Waiting, Running int64
	// Admitted counts requests we sent since those stats, which they cannot reflect yet.
	Admitted int64
	// Ended counts our requests that ended (finished, aborted, failed) since those
	// stats: an engine that goes idle sends no more stats, so without this its last
	// report would keep counting them and the policy would starve it.
	Ended int64
	// Stale: the stats are older than Config.StatsMaxAge (the engine went quiet, e.g.
	// stats taken just before our ABORTs reached it); only InFlight counts.
	Stale        bool
	KVCacheUsage float64 // 0..1
}

// kvPressureWeight and kvPressureKnee are vLLM's DPLBAsyncMPClient KV-cache term:
// waiting * 6.0 * max(0, kv_cache_usage - 0.5).
const (
	kvPressureWeight = 6.0
	kvPressureKnee   = 0.5
)

// Score is the least-loaded cost of sending one more request to the engine; lower is
// better. It is max(in-flight, waiting + running + admitted-since-stats -
// ended-since-stats), so our own admissions count before the engine's next stats
// report them and a stale report never hides them nor outlives our requests, plus
// vLLM's KV-cache pressure term on the queue, which steers work away from an engine
// that is about to preempt. Stale stats are ignored: the score is the in-flight count.
func (l Load) Score() float64 {
	if l.Stale {
		return float64(l.InFlight)
	}
	queued := l.Waiting + l.Admitted
	s := float64(max(l.InFlight, queued+l.Running-l.Ended))
	if queued > 0 && l.KVCacheUsage > kvPressureKnee {
		s += float64(queued) * kvPressureWeight * (l.KVCacheUsage - kvPressureKnee)
	}
	return s
}

// Policy chooses a rank for a request that does not pin one.
type Policy uint8

// The policies.
const (
	LeastLoaded Policy = iota // minimum Score, scanning from a rotating start so ties spread
	PowerOfTwo                // the lower Score of two distinct random ready engines
	RoundRobin                // the next ready engine after the previous choice
)

func parsePolicy(name string) (Policy, error) {
	switch name {
	case "", PolicyLeastLoaded:
		return LeastLoaded, nil
	case PolicyPowerOfTwo:
		return PowerOfTwo, nil
	case PolicyRoundRobin:
		return RoundRobin, nil
	case PolicyKV, PolicyPrefix:
		// The CacheRouter chooses first; least-loaded is its fallback.
		return LeastLoaded, nil
	}
	return 0, fmt.Errorf("dispatcher: config: unknown Policy %q (want %s, %s, %s, %s or %s)",
		name, PolicyLeastLoaded, PolicyPowerOfTwo, PolicyRoundRobin, PolicyKV, PolicyPrefix)
}

// String returns the Config.Policy name.
func (p Policy) String() string {
	switch p {
	case LeastLoaded:
		return PolicyLeastLoaded
	case PowerOfTwo:
		return PolicyPowerOfTwo
	case RoundRobin:
		return PolicyRoundRobin
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// Choose returns the index in loads of the engine to use, or -1 when none is ready.
// seq rotates the scan start (one step per request) so that equal scores spread over
// the engines instead of piling onto the lowest rank; rnd is a random word for
// PowerOfTwo. Choose is pure and allocation-free.
func (p Policy) Choose(loads []Load, seq, rnd uint64) int {
	n := len(loads)
	if n == 0 {
		return -1
	}
	switch p {
	case PowerOfTwo:
		ready := 0
		for i := range loads {
			if loads[i].Ready {
				ready++
			}
		}
		switch ready {
		case 0:
			return -1
		case 1:
			return nthReady(loads, 0)
		}
		a := int(rnd % uint64(ready))
		b := int((rnd >> 32) % uint64(ready-1))
		if b >= a {
			b++
		}
		ia, ib := nthReady(loads, a), nthReady(loads, b)
		if loads[ib].Score() < loads[ia].Score() {
			return ib
		}
		return ia
	case RoundRobin:
		start := int(seq % uint64(n))
		for i := range n {
			j := (start + i) % n
			if loads[j].Ready {
				return j
			}
		}
		return -1
	default: // LeastLoaded
		start := int(seq % uint64(n))
		best, bestScore := -1, 0.0
		for i := range n {
			j := (start + i) % n
			if !loads[j].Ready {
				continue
			}
			// Strict < keeps the first engine in scan order on a tie, as vLLM does.
			if s := loads[j].Score(); best < 0 || s < bestScore {
				best, bestScore = j, s
			}
		}
		return best
	}
}

// nthReady returns the index of the k-th (0-based) ready entry.
func nthReady(loads []Load, k int) int {
	for i := range loads {
		if loads[i].Ready {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return -1
}

// pinRank resolves an explicit data_parallel_rank: the index of that rank if it is
// ready, else *InvalidDataParallelRank listing the ready ranks (loads are in rank order).
func pinRank(loads []Load, rank int64) (int, error) {
	for i := range loads {
		if int64(loads[i].Rank) == rank && loads[i].Ready {
			return i, nil
		}
	}
	connected := make([]int, 0, len(loads))
	for i := range loads {
		if loads[i].Ready {
			connected = append(connected, loads[i].Rank)
		}
	}
	return -1, &InvalidDataParallelRank{Rank: int(rank), ConnectedRanks: connected}
}
