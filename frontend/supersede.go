package frontend

import (
	"log/slog"
	"time"
)

// A HELLO storm: anyone who reaches the handshake address can send
// HELLO and READY as a rank and hang up. The generation that creates waits for
// a registration that never comes, until PhaseTimeout (10 minutes), and the
// real engine's HELLO would be refused as "already live" meanwhile: vLLM sends
// HELLO once and waits five minutes for an INIT, then exits.
//
// So a generation whose handshake connection closed after READY and that has
// not registered on its input socket is abandoned-looking, and a HELLO from a
// new connection may supersede it: not at once (a real engine closes its
// handshake connection right after READY, and its registration, on another
// connection, may arrive a little later), but once supersedeGrace (2 s) has passed
// since the close without a registration. The HELLO waits meanwhile (one per
// rank: the transport admits one connection per identity at a time, so a newer
// HELLO comes only after the older one's connection left, which drops it). A
// READY from the waiting HELLO's connection is not the generation's (its HELLO
// came on an earlier connection; Frontend.hsConn) and is ignored.
//
// The transport's part: a ROUTER refuses a duplicate identity before the
// peer's handshake completes, so a real engine refused while a storm
// connection holds its identity keeps its HELLO queued and sends it on its
// next connection (transport/conn.go, guardConn).

// supersedeGrace is how long after its handshake connection closed a
// generation that has not registered keeps its rank against a new HELLO.
const supersedeGrace = 2 * time.Second

// pendingHello is a HELLO waiting to supersede its rank's generation, and the
// handshake connection it came on (Frontend.hsConn).
type pendingHello struct {
	ev   event
	conn uint64
}

// abandoned reports whether e's handshake connection closed after READY and
// nothing registered on its input socket.
func (f *Frontend) abandoned(e *engine) bool {
	return e.state() == Connecting && !e.hs.leftAt.IsZero() && !e.hs.registered && !e.shared
}

// supersede handles a HELLO for an abandoned generation e: past the grace it
// marks e down and returns the next generation for the HELLO; before it, the
// HELLO waits (checkPending) and nil is returned.
func (f *Frontend) supersede(ev event, e *engine, now time.Time) *engine {
	if now.Sub(e.hs.leftAt) < supersedeGrace {
		if f.pending == nil {
			f.pending = make(map[int]pendingHello)
		}
		f.pending[e.rank] = pendingHello{ev: ev, conn: f.hsConn[e.rank]}
		return nil
	}
	delete(f.pending, e.rank)
	f.markDown(e, Dead, &HandshakeError{Rank: e.rank, Phase: PhaseRegistration,
		Msg: "superseded by a new HELLO: the handshake connection closed after READY and nothing registered"})
	return f.rejoin(e.rank, e)
}

// dropPending forgets rank's waiting HELLO when conn, which left, sent it.
func (f *Frontend) dropPending(rank int, conn uint64) bool {
	if p, ok := f.pending[rank]; !ok || p.conn != conn {
		return false
	}
	delete(f.pending, rank)
	return true
}

// checkPending resolves waiting HELLOs: refused when the generation they
// would supersede registered (or went down), replayed once the grace passed.
func (f *Frontend) checkPending(now time.Time) {
	for rank, p := range f.pending {
		e := f.table.Load().get(rank)
		switch {
		case p.conn != f.hsConn[rank]:
			// Its connection left (onHandshakeLeft drops it then; this keeps
			// an INIT from ever reaching a newer connection).
			delete(f.pending, rank)
		case e.state() == Connecting && e.hs.registered, e.state() == Ready:
			delete(f.pending, rank)
			f.churn.log(f.log, f.now(), rank, slog.LevelError, "frontend: refused HELLO: rank is already live", "rank", rank, "state", e.state().String())
			f.refuse()
		case !f.abandoned(e), now.Sub(e.hs.leftAt) >= supersedeGrace:
			delete(f.pending, rank)
			f.onHandshake(p.ev) // supersedes, or takes a free or dead rank
		}
	}
}
