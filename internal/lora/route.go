package lora

import (
	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"
)

// DefaultSlack is how many requests more than the least-loaded engine an engine
// holding the adapter may carry and still be preferred. Every engine can load
// every adapter (add_lora went to all), so holding one only saves the engine a
// load and a batch slot among its max_loras; a queue longer than that costs more.
const DefaultSlack = 4

// Router prefers, for a request naming an adapter, the ready engines that hold
// it (Activity.Holds): the least loaded of them, unless its score exceeds the
// least-loaded engine's by more than Slack; then, or when none holds it, it
// leaves the choice to the policy. It is the dispatcher's LoRARouter.
type Router struct {
	Activity *Activity
	Slack    float64
}

var _ dispatcher.CacheRouter = (*Router)(nil)

// Route implements dispatcher.CacheRouter.
func (r *Router) Route(req *wire.EngineCoreRequest, loads []dispatcher.Load, seq uint64) int {
	if req.LoRA == nil || r.Activity == nil {
		return -1
	}
	return Prefer(loads, seq, r.Slack, func(rank int) bool { return r.Activity.Holds(rank, req.LoRA.Name) })
}

// Prefer is the choice itself, pure: the index of the lowest-scoring ready load
// whose rank holds the adapter, scanning from seq so ties rotate, if its score
// is within slack of the lowest ready score; else -1.
func Prefer(loads []dispatcher.Load, seq uint64, slack float64, holds func(rank int) bool) int {
	n := len(loads)
	if n == 0 {
		return -1
	}
	best, lowest := -1, 0.0
	haveLowest := false
	start := int(seq % uint64(n))
	for k := range n {
		i := (start + k) % n
		if !loads[i].Ready {
			continue
		}
		s := loads[i].Score()
		if !haveLowest || s < lowest {
			lowest, haveLowest = s, true
		}
		if holds(loads[i].Rank) && (best < 0 || s < loads[best].Score()) {
			best = i
		}
	}
	if best < 0 || loads[best].Score() > lowest+slack {
		return -1
	}
	return best
}
