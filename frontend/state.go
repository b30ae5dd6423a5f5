package frontend

import (
	"slices"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// EngineState is where an engine is in its life.
type EngineState int32

// Engine states. Connecting covers NEW -> CONNECTED (HELLO) -> registered; Ready means
// routable; Dead and Stuck are terminal for that generation (a new HELLO or, in
// bootstrapped mode, a new registration starts the next one).
const (
	Connecting EngineState = iota
	Ready
	Dead
	Stuck
)

func (s EngineState) String() string {
	switch s {
	case Connecting:
		return "connecting"
	case Ready:
		return "ready"
	case Dead:
		return "dead"
	case Stuck:
		return "stuck"
	}
	return "unknown"
}

// EngineInfo is one engine as Engines() reports it.
type EngineInfo struct {
	Rank     int
	Identity wire.Identity
	State    EngineState
	Ready    wire.ReadyResponse // the registration frame's content
	// Layout is the vLLM wire layout the engine was placed on (nil until placed);
	// LayoutHow says how it was told. VLLMVersion is what it reported, if anything.
	Layout      *wire.Layout
	LayoutHow   string
	VLLMVersion string
	Since       time.Time // when State was entered
	LastOutput  time.Time // last output message seen (set when Engines() is called)
	Cause       string    // why the engine is Dead/Stuck
	Generation  int       // incremented on every rejoin
	// RemoteHost is the host the engine's HELLO came from ("" for ipc, a
	// bootstrapped engine, or before its HELLO): where an engine that publishes
	// KV events on a wildcard address is reached.
	RemoteHost string
}

// handshake is the per-engine handshake state machine: NEW -(HELLO)-> CONNECTED,
// then the input-socket registration and the handshake READY in either order (an
// engine registers before it sends READY, but they travel on different sockets), and
// up once both are seen. Each phase has a deadline. It is a plain value, owned by the
// control loop, and never reads the clock: time comes in as arguments.
//
// Bootstrapped mode starts it in CONNECTED with ready already true: a launcher did
// the handshake and only the registration is left.
type handshake struct {
	rank       int
	hello      bool
	registered bool
	ready      bool
	// leftAt: when the handshake connection closed after READY (vLLM closes it
	// then); zero while it is open.
	leftAt time.Time
	// helloConn: the handshake connection the HELLO came on (Frontend.hsConn).
	// Only its READY and its departure belong to this generation: a storm
	// connection's READY would otherwise kill it as a duplicate.
	helloConn uint64
	timeout   time.Duration
	deadline  time.Time // of the current phase; zero while waiting for HELLO
	reg       wire.ReadyResponse
	readyMsg  *wire.HandshakeStatus // READY as sent; nil when bootstrapped

	// Placing the engine on a wire layout, after READY and registration.
	layout      *wire.Layout
	prober      *wire.Prober
	probeMethod string // the method whose answer is awaited
	probeCall   uint64 // its call id
}

func newHandshake(rank int, timeout time.Duration) *handshake {
	return &handshake{rank: rank, timeout: timeout}
}

func newBootstrappedHandshake(rank int, timeout time.Duration, now time.Time) *handshake {
	return &handshake{rank: rank, timeout: timeout, hello: true, ready: true, deadline: now.Add(timeout)}
}

func (h *handshake) fail(phase, msg string) error {
	return &HandshakeError{Rank: h.rank, Phase: phase, Msg: msg}
}

// onHello: HELLO from the engine. A second HELLO in the same generation is refused
// (the Rust owner does the same; a restarted engine gets a new generation).
func (h *handshake) onHello(now time.Time, st wire.HandshakeStatus) error {
	if h.hello {
		return h.fail(PhaseHello, "duplicate HELLO")
	}
	if st.Status != "HELLO" {
		return h.fail(PhaseHello, "expected status HELLO, got "+quote(st.Status))
	}
	h.hello = true
	h.deadline = now.Add(h.timeout)
	return nil
}

// onRegistration: the engine's first frame on its input socket.
func (h *handshake) onRegistration(now time.Time, r wire.ReadyResponse) error {
	if !h.hello {
		return h.fail(PhaseRegistration, "registration before HELLO")
	}
	if h.registered {
		return h.fail(PhaseRegistration, "duplicate registration")
	}
	h.registered = true
	h.reg = r
	h.deadline = now.Add(h.timeout)
	return nil
}

// onReady: READY on the handshake socket.
func (h *handshake) onReady(now time.Time, st wire.HandshakeStatus) error {
	if !h.hello {
		return h.fail(PhaseReady, "READY before HELLO")
	}
	if h.ready {
		return h.fail(PhaseReady, "duplicate READY")
	}
	if st.Status != "READY" {
		return h.fail(PhaseReady, "expected status READY, got "+quote(st.Status))
	}
	h.ready = true
	h.readyMsg = &st
	h.deadline = now.Add(h.timeout)
	return nil
}

// seen reports READY and registration both seen: the engine can be placed on a layout.
func (h *handshake) seen() bool { return h.hello && h.registered && h.ready }

// up reports whether the engine may be routed to: seen, and placed on a layout.
func (h *handshake) up() bool { return h.seen() && h.layout != nil }

// phase names what the engine is waiting for.
func (h *handshake) phase() string {
	switch {
	case !h.hello:
		return PhaseHello
	case !h.registered:
		return PhaseRegistration
	case !h.ready:
		return PhaseReady
	case h.layout == nil:
		return PhaseLayout
	}
	return ""
}

// check returns a *PhaseTimeoutError once the current phase's deadline passed. There
// is no deadline for HELLO: an engine may be started at any time, and WaitReady's
// context bounds the wait for it.
func (h *handshake) check(now time.Time) error {
	if h.up() || h.deadline.IsZero() || now.Before(h.deadline) {
		return nil
	}
	return &PhaseTimeoutError{Rank: h.rank, Phase: h.phase(), Timeout: h.timeout}
}

func quote(s string) string { return "\"" + s + "\"" }

// table is the engine table: identity/rank -> engine, published copy-on-write behind
// an atomic.Pointer so Send and Engines never lock. A new table is built for every
// change (join, leave, state change), which happens a handful of times per engine
// lifetime.
type table struct {
	byRank map[int]*engine
	ranks  []int // every managed rank, in rank order (256 after 1, not byte order)
}

func newTable() *table { return &table{byRank: map[int]*engine{}} }

// with returns a copy with rank mapped to e.
func (t *table) with(rank int, e *engine) *table {
	n := &table{byRank: make(map[int]*engine, len(t.byRank)+1), ranks: t.ranks}
	for r, x := range t.byRank {
		n.byRank[r] = x
	}
	if _, ok := t.byRank[rank]; !ok {
		n.ranks = append(slices.Clone(t.ranks), rank)
		slices.Sort(n.ranks)
	}
	n.byRank[rank] = e
	return n
}

func (t *table) get(rank int) *engine { return t.byRank[rank] }

// readyRanks lists the ranks that are Ready, in rank order.
func (t *table) readyRanks() []int {
	var out []int
	for _, r := range t.ranks {
		if e := t.byRank[r]; e != nil && e.state() == Ready {
			out = append(out, r)
		}
	}
	return out
}
