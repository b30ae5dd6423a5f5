package bootstrap

import (
	"context"
	"errors"
)

// Store holds the registry's state outside the process, so that several
// frontends answer /register and /query from one state and a restart loses
// nothing. The state is a set of records, one per dp rank (the same JSON a
// snapshot's change log holds: generation, current engine, workers), plus a
// revision that moves on every commit. Liveness is not stored: every
// frontend probes the workers itself, as a lone registry does.
//
// Commit is optimistic: it succeeds only when nothing was committed since
// rev, so a registration, a generation bump or a takeover decided on a stale
// view is never written; the Server then reloads and decides again. That
// makes every change a transaction over the whole registry (an engine id
// registered on dp 0 through one frontend cannot be registered on dp 1
// through another at the same moment).
type Store interface {
	// Load returns every record and the revision they are at.
	Load(ctx context.Context) (StoreState, error)
	// Commit writes recs if the store is still at rev, and returns the new
	// revision; [ErrStoreConflict] when another writer came first.
	Commit(ctx context.Context, rev int64, recs []StoreRecord) (int64, error)
	// Watch calls apply, in order, with every change committed after rev
	// (by anyone) until ctx ends. A StoreState with Full set replaces
	// everything (the store could not replay the changes, e.g. compacted).
	Watch(ctx context.Context, rev int64, apply func(StoreState))
	// Head returns the revision of the last commit, read linearizably: a
	// reader that is behind it reloads before it answers.
	Head(ctx context.Context) (int64, error)
}

// StoreRecord is the state of one dp rank.
type StoreRecord struct {
	DP int
	// Data is the dp rank's JSON record; nil when the rank was forgotten.
	Data []byte
}

// StoreState is a set of records at a revision.
type StoreState struct {
	Records []StoreRecord
	Rev     int64
	// Full: Records are the whole registry; ranks not in it are gone.
	Full bool
}

// ErrStoreConflict is returned by Commit when the store moved past rev.
var ErrStoreConflict = errors.New("bootstrap: store changed since it was read")

// maxStoreRetries bounds how often one change is decided again after
// losing a commit race; each loss means another frontend's change landed.
const maxStoreRetries = 16
