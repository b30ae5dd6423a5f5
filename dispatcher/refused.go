package dispatcher

// Why a rank that never came up is missing. The frontend refuses an engine whose
// vLLM wire layout it cannot place before the rank is ever routed to, so the rank
// policy never hears of it; a request pinned to that rank would otherwise only be
// told the rank "is not connected", which sends the operator looking at the
// network instead of at the layout.

import (
	"strings"
	"sync"
)

// maxRefusedReason bounds a kept reason: the frontend's refusal names the engine's
// keys and version, which are the engine's to choose.
const maxRefusedReason = 2048

// refusedRanks maps a rank to why its engine was refused, until the rank comes up.
// It holds at most one entry per rank the frontend accepts (its data parallel size).
type refusedRanks struct {
	mu  sync.Mutex
	why map[int]string
}

func (r *refusedRanks) set(rank int, why string) {
	if len(why) > maxRefusedReason {
		why = strings.ToValidUTF8(why[:maxRefusedReason], "") + "..."
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.why == nil {
		r.why = map[int]string{}
	}
	r.why[rank] = why
}

func (r *refusedRanks) clear(rank int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.why, rank)
}

func (r *refusedRanks) get(rank int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.why[rank]
}

// EngineRefused records that rank's engine was refused before it came up (err says
// why): a request pinned to the rank is then refused with an
// *InvalidDataParallelRank whose Reason is err's text. EngineUp forgets it.
func (d *Dispatcher) EngineRefused(rank int, err error) {
	why := "refused"
	if err != nil {
		why = err.Error()
	}
	d.refused.set(rank, why)
	d.log.Warn("dispatcher: engine refused before it came up", "rank", rank, "err", err)
}

// explainPin adds the refusal reason to a pinned request's InvalidDataParallelRank.
func (d *Dispatcher) explainPin(err error) error {
	if bad, ok := err.(*InvalidDataParallelRank); ok {
		bad.Reason = d.refused.get(bad.Rank)
	}
	return err
}
