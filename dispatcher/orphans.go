package dispatcher

import (
	"sync/atomic"

	"github.com/switchyard-llm/switchyard/wire"
)

// orphan aborts id at rank: an output arrived for a request this dispatcher
// does not know (Config.AbortOrphans). One ABORT per orphan output; an id
// we aborted ourselves a moment ago may get a second one, which the engine
// ignores. Only outputs of unknown ids pay for this, never the hot path; the
// log line is bounded the same way (an orphan's outputs stop once the ABORT
// lands, a step or two later).
func (d *Dispatcher) orphan(rank int, id string) {
	body := wire.AppendAbort(wire.GetBuffer(), []string{id})
	if err := d.sender.Send(rank, wire.RequestAbort, body, nil); err != nil {
		d.log.Debug("dispatcher: ABORT of an orphan output not sent", "rank", rank, "request_id", id, "err", err)
		return
	}
	orphanAborts.Add(1)
	d.log.Info("dispatcher: aborted at its engine a request this frontend does not know (left running by its previous run)", "rank", rank, "request_id", id)
}

// orphanAborts counts ABORTs sent for orphan outputs, process-wide (read by
// OrphanAborts; tests and the scale-out e2e check it).
var orphanAborts atomic.Uint64

// OrphanAborts is how many ABORTs were sent for outputs of unknown requests
// (Config.AbortOrphans) in this process.
func OrphanAborts() uint64 { return orphanAborts.Load() }
