package dispatcher

import (
	"testing"

	"github.com/switchyard-llm/switchyard/wire"
)

// TestAbortOrphans: with AbortOrphans, an unfinished output of a request the
// dispatcher does not know (a restarted frontend's previous run sent it) is
// aborted at its engine; a finished one and known ones are left alone, and
// without the option nothing is sent (single-frontend behaviour).
func TestAbortOrphans(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AbortOrphans = true
	h := newHarness(t, cfg, 0, 1)
	before := OrphanAborts()
	h.d.HandleOutputs(1, batch(1, tokOut("gone-1", 5), finOut("gone-2", wire.FinishLength, 6)))
	f := h.s.next(t, wire.RequestAbort)
	if f.rank != 1 || len(f.ids) != 1 || f.ids[0] != "gone-1" {
		t.Fatalf("abort %+v, want gone-1 at rank 1", f)
	}
	if got := OrphanAborts() - before; got != 1 {
		t.Fatalf("orphan aborts %d", got)
	}

	off := newHarness(t, DefaultConfig(), 0)
	off.d.HandleOutputs(0, batch(0, tokOut("gone-3", 5)))
	if s := off.s.sent(wire.RequestAbort); len(s) != 0 {
		t.Fatalf("aborts without AbortOrphans: %+v", s)
	}
}
