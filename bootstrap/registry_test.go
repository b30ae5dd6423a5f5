package bootstrap

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)

func rg(id string, dp, tp, pp int, addr string) Registration {
	return Registration{EngineID: id, DP: dp, TP: tp, PP: pp, Addr: addr}
}

func testPolicy() Policy {
	return Policy{FailureThreshold: 3, Retention: 10 * time.Minute}
}

// fakeNet says which dial addresses accept connections; it stands in for the
// TCP prober in state tests.
type fakeNet map[string]bool

func (n fakeNet) probe(ts []ProbeTarget, sync bool) []ProbeResult {
	out := make([]ProbeResult, 0, len(ts))
	for _, t := range ts {
		res := ProbeResult{ProbeTarget: t, Sync: sync}
		if !n[t.Dial] {
			res.Err = errors.New("connection refused")
		}
		out = append(out, res)
	}
	return out
}

// register does what the HTTP edge does: register; on a conflict probe the
// holder, record the results and try once more.
func register(r *Registry, now time.Time, n fakeNet, reg Registration) (Outcome, error) {
	out, err := r.Register(now, reg)
	var ce *ConflictError
	if errors.As(err, &ce) {
		r.RecordProbes(now, n.probe(ce.Probe, true))
		out, err = r.Register(now, reg)
	}
	return out, err
}

// sweep is one periodic probe round.
func sweep(r *Registry, now time.Time, n fakeNet) []Transition {
	return r.RecordProbes(now, n.probe(r.ProbeTargets(), false))
}

func mustRegister(t *testing.T, r *Registry, now time.Time, n fakeNet, reg Registration) Outcome {
	t.Helper()
	out, err := register(r, now, n, reg)
	if err != nil {
		t.Fatalf("register %+v: %v", reg, err)
	}
	return out
}

func detail(err error) string {
	var ce *ConflictError
	if errors.As(err, &ce) {
		return ce.Detail()
	}
	var te *TopologyError
	if errors.As(err, &te) {
		return te.Detail()
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

func engineIDs(q map[int]Entry) map[int]string {
	out := make(map[int]string)
	for dp, e := range q {
		out[dp] = e.EngineID
	}
	return out
}

// TestSeedErrorsByteForByte reproduces the two vLLM 400s that started the
// project, when the holder is alive.
func TestSeedErrorsByteForByte(t *testing.T) {
	n := fakeNet{"10.0.0.1:5000": true, "10.0.0.2:6000": true}
	r := NewRegistry(testPolicy())
	mustRegister(t, r, t0, n, rg("OLD", 3, 0, 0, "tcp://10.0.0.1:5000"))

	_, err := register(r, t0, n, rg("NEW", 3, 0, 0, "tcp://10.0.0.2:6000"))
	if got, want := detail(err), "Engine ID mismatch for dp_rank=3: expected OLD, got NEW"; got != want {
		t.Errorf("engine mismatch detail\n got %q\nwant %q", got, want)
	}
	_, err = register(r, t0, n, rg("OLD", 3, 0, 0, "tcp://10.0.0.2:6000"))
	if got, want := detail(err), "Worker with dp_rank=3, tp_rank=0, pp_rank=0 is already registered at tcp://10.0.0.1:5000, but still want to register at tcp://10.0.0.2:6000"; got != want {
		t.Errorf("worker conflict detail\n got %q\nwant %q", got, want)
	}
	if got := engineIDs(r.Query(t0)); !cmp.Equal(got, map[int]string{3: "OLD"}) {
		t.Errorf("refused registrations changed the registry: %v", got)
	}
}

func TestRegisterRules(t *testing.T) {
	const a, b, c = "tcp://10.0.0.1:5000", "tcp://10.0.0.2:5000", "tcp://[fd00::5]:40123"
	tests := []struct {
		name    string
		pol     Policy
		live    fakeNet // addresses that accept connections
		before  []Registration
		reg     Registration
		wResult Result
		wGen    uint64
		wErr    string // detail, or "invalid:<field>"
	}{
		{name: "first worker", reg: rg("E", 0, 0, 0, a), wResult: Registered, wGen: 1},
		{name: "ipv6 addr", reg: rg("E", 0, 0, 0, c), wResult: Registered, wGen: 1},
		{name: "second worker same engine", before: []Registration{rg("E", 0, 0, 0, a)}, reg: rg("E", 0, 1, 0, b), wResult: Registered, wGen: 1},
		{name: "identical re-registration is idempotent", live: fakeNet{"10.0.0.1:5000": true},
			before: []Registration{rg("E", 0, 0, 0, a)}, reg: rg("E", 0, 0, 0, a), wResult: Idempotent, wGen: 1},
		{name: "identical re-registration of a dead worker revives it",
			before: []Registration{rg("E", 0, 0, 0, a)}, reg: rg("E", 0, 0, 0, a), wResult: Idempotent, wGen: 1},
		{name: "new engine id, old holder live", live: fakeNet{"10.0.0.1:5000": true},
			before: []Registration{rg("OLD", 0, 0, 0, a)}, reg: rg("NEW", 0, 0, 0, b),
			wErr: "Engine ID mismatch for dp_rank=0: expected OLD, got NEW"},
		{name: "new engine id, old holder dead", before: []Registration{rg("OLD", 0, 0, 0, a)},
			reg: rg("NEW", 0, 0, 0, b), wResult: EngineTakeover, wGen: 2},
		{name: "new engine id at the old address", live: fakeNet{"10.0.0.1:5000": true},
			before: []Registration{rg("OLD", 0, 0, 0, a)}, reg: rg("NEW", 0, 0, 0, a), wResult: EngineTakeover, wGen: 2},
		{name: "new engine id, one of two old workers dead", live: fakeNet{"10.0.0.1:5000": true},
			before: []Registration{rg("OLD", 0, 0, 0, a), rg("OLD", 0, 1, 0, b)}, reg: rg("NEW", 0, 0, 0, c), wResult: EngineTakeover, wGen: 2},
		{name: "new address, old worker live", live: fakeNet{"10.0.0.1:5000": true},
			before: []Registration{rg("E", 0, 0, 0, a)}, reg: rg("E", 0, 0, 0, b),
			wErr: "Worker with dp_rank=0, tp_rank=0, pp_rank=0 is already registered at tcp://10.0.0.1:5000, but still want to register at tcp://10.0.0.2:5000"},
		{name: "new address, old worker dead", before: []Registration{rg("E", 0, 0, 0, a)},
			reg: rg("E", 0, 0, 0, b), wResult: WorkerTakeover, wGen: 2},
		{name: "same engine id live on another dp rank", live: fakeNet{"10.0.0.1:5000": true},
			before: []Registration{rg("E", 0, 0, 0, a)}, reg: rg("E", 1, 0, 0, b),
			wErr: "Engine ID E is already registered for dp_rank=0, cannot register it for dp_rank=1"},
		{name: "same engine id dead on another dp rank", before: []Registration{rg("E", 0, 0, 0, a)},
			reg: rg("E", 1, 0, 0, b), wResult: Registered, wGen: 1},
		{name: "other dp ranks are independent", live: fakeNet{"10.0.0.1:5000": true},
			before: []Registration{rg("E0", 0, 0, 0, a)}, reg: rg("E1", 1, 0, 0, b), wResult: Registered, wGen: 1},
		{name: "negative rank", reg: rg("E", 0, -1, 0, a), wErr: "invalid:tp_rank"},
		{name: "empty engine id", reg: rg("", 0, 0, 0, a), wErr: "invalid:engine_id"},
		{name: "addr without scheme", reg: rg("E", 0, 0, 0, "10.0.0.1:5000"), wErr: "invalid:addr"},
		{name: "addr without port", reg: rg("E", 0, 0, 0, "tcp://10.0.0.1"), wErr: "invalid:addr"},
		{name: "tp rank beyond configured size", pol: Policy{TPSize: 2, PPSize: 1}, reg: rg("E", 0, 2, 0, a),
			wErr: "TP rank 2 must be less than TP size 2."},
		{name: "tp rank beyond client tp_size", reg: Registration{EngineID: "E", TP: 4, Addr: a, TPSize: 4},
			wErr: "TP rank 4 must be less than TP size 4."},
		{name: "client tp_size disagrees with engine", before: []Registration{{EngineID: "E", Addr: a, TPSize: 2}},
			live: fakeNet{"10.0.0.1:5000": true}, reg: Registration{EngineID: "E", TP: 1, Addr: b, TPSize: 4},
			wErr: "TP size mismatch for dp_rank=0: expected 2, got 4"},
		{name: "client pp_size disagrees with config", pol: Policy{PPSize: 2},
			reg: Registration{EngineID: "E", Addr: a, PPSize: 4}, wErr: "PP size mismatch for dp_rank=0: expected 2, got 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := tt.pol
			pol.FailureThreshold, pol.Retention = 3, time.Minute
			r := NewRegistry(pol)
			for _, b := range tt.before {
				mustRegister(t, r, t0, fakeNet{}, b)
			}
			rev := r.Revision()
			out, err := register(r, t0.Add(time.Second), tt.live, tt.reg)
			var inv *InvalidError
			switch {
			case tt.wErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.wErr == "":
				if out.Result != tt.wResult || out.Generation != tt.wGen {
					t.Errorf("got %v gen %d, want %v gen %d", out.Result, out.Generation, tt.wResult, tt.wGen)
				}
			case errors.As(err, &inv):
				if got := "invalid:" + inv.Field; got != tt.wErr {
					t.Errorf("got %s, want %s", got, tt.wErr)
				}
			default:
				if got := detail(err); got != tt.wErr {
					t.Errorf("got %q, want %q", got, tt.wErr)
				}
				if r.Revision() != rev {
					t.Errorf("a refused registration changed the revision")
				}
			}
		})
	}
}

func TestConflictCarriesHint(t *testing.T) {
	n := fakeNet{"10.0.0.1:5000": true}
	r := NewRegistry(testPolicy())
	mustRegister(t, r, t0, n, rg("OLD", 0, 0, 0, "tcp://10.0.0.1:5000"))
	_, err := register(r, t0, n, rg("NEW", 0, 0, 0, "tcp://10.0.0.2:5000"))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Hint() == "" || len(ce.Probe) != 1 || ce.Probe[0].Dial != "10.0.0.1:5000" {
		t.Fatalf("got %#v", err)
	}
	if got, want := err.Error(), "bootstrap: "+ce.Detail(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// TestPublishOnlyComplete: decodes cache len(worker_addr) as the remote TP
// size forever, so an engine missing a worker must not be in /query.
func TestPublishOnlyComplete(t *testing.T) {
	addr := func(tp, pp int) string { return fmt.Sprintf("tcp://10.0.0.%d:%d", tp+1, 5000+pp) }
	tests := []struct {
		name    string
		pol     Policy
		sizes   [2]int // tp_size, pp_size sent by the client
		ranks   [][2]int
		at      time.Duration // query time after the last registration
		wantPub bool
	}{
		{name: "config 2x2, 3 workers", pol: Policy{TPSize: 2, PPSize: 2}, ranks: [][2]int{{0, 0}, {0, 1}, {1, 0}}, wantPub: false},
		{name: "config 2x2, 4 workers", pol: Policy{TPSize: 2, PPSize: 2}, ranks: [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 1}}, wantPub: true},
		{name: "client tp_size 2, 1 worker", sizes: [2]int{2, 1}, ranks: [][2]int{{0, 0}}, wantPub: false},
		{name: "client tp_size 2, 2 workers", sizes: [2]int{2, 1}, ranks: [][2]int{{0, 0}, {1, 0}}, wantPub: true},
		{name: "unknown, grid, settle not over", pol: Policy{Settle: 3 * time.Second}, ranks: [][2]int{{0, 0}}, at: time.Second, wantPub: false},
		{name: "unknown, grid, settled", pol: Policy{Settle: 3 * time.Second}, ranks: [][2]int{{0, 0}, {1, 0}}, at: 3 * time.Second, wantPub: true},
		{name: "unknown, hole in tp", ranks: [][2]int{{0, 0}, {2, 0}}, at: time.Hour, wantPub: false},
		{name: "unknown, ragged pp", ranks: [][2]int{{0, 0}, {0, 1}, {1, 0}}, at: time.Hour, wantPub: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := tt.pol
			pol.FailureThreshold = 1
			r := NewRegistry(pol)
			for _, k := range tt.ranks {
				reg := rg("E", 0, k[0], k[1], addr(k[0], k[1]))
				reg.TPSize, reg.PPSize = tt.sizes[0], tt.sizes[1]
				mustRegister(t, r, t0, fakeNet{}, reg)
			}
			q := r.Query(t0.Add(tt.at))
			if _, pub := q[0]; pub != tt.wantPub {
				t.Errorf("published = %v, want %v", pub, tt.wantPub)
			}
			tps := make(map[int]bool)
			for _, k := range tt.ranks {
				tps[k[0]] = true
			}
			if tt.wantPub && len(q[0].WorkerAddr) != len(tps) {
				t.Errorf("worker_addr %v, want TP size %d", q[0].WorkerAddr, len(tps))
			}
		})
	}
}

// TestLearnedShapeIsFrozen: once published as TP=2, deleting tp 1 must hide
// the engine, not republish it as TP=1.
func TestLearnedShapeIsFrozen(t *testing.T) {
	r := NewRegistry(testPolicy())
	mustRegister(t, r, t0, nil, rg("E", 0, 0, 0, "tcp://10.0.0.1:5000"))
	mustRegister(t, r, t0, nil, rg("E", 0, 1, 0, "tcp://10.0.0.2:5000"))
	if q := r.Query(t0); len(q[0].WorkerAddr) != 2 {
		t.Fatalf("query %v", q)
	}
	if err := r.DeleteWorker(t0, "E", 1, 0); err != nil {
		t.Fatal(err)
	}
	if q := r.Query(t0.Add(time.Hour)); len(q) != 0 {
		t.Fatalf("engine with a deleted worker published: %v", q)
	}
	// The slot is free: a new address registers without a probe.
	if out := mustRegister(t, r, t0, nil, rg("E", 0, 1, 0, "tcp://10.0.0.3:5000")); out.Result != Registered {
		t.Fatalf("got %v", out.Result)
	}
	if q := r.Query(t0); q[0].WorkerAddr[1][0] != "tcp://10.0.0.3:5000" {
		t.Fatalf("query %v", q)
	}
	if err := r.DeleteWorker(t0, "E", 7, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete unknown worker: %v", err)
	}
}

func TestProbeLiveness(t *testing.T) {
	const a = "tcp://10.0.0.1:5000"
	n := fakeNet{"10.0.0.1:5000": true}
	r := NewRegistry(testPolicy()) // threshold 3
	mustRegister(t, r, t0, n, rg("E", 0, 0, 0, a))
	state := func(now time.Time) EngineState {
		in, err := r.Engine(now, "E")
		if err != nil {
			t.Fatal(err)
		}
		return in.State
	}
	if got := sweep(r, t0, n); len(got) != 0 || state(t0) != StateReady {
		t.Fatalf("healthy sweep: %v %v", got, state(t0))
	}
	n["10.0.0.1:5000"] = false
	sweep(r, t0, n)
	if state(t0) != StateSuspect || len(r.Query(t0)) != 1 {
		t.Fatalf("after one failure: %v, published %v", state(t0), r.Query(t0))
	}
	sweep(r, t0, n)
	tr := sweep(r, t0.Add(time.Second), n)
	if diff := cmp.Diff([]Transition{{EngineID: "E", DP: 0, Generation: 1, From: StateSuspect, To: StateDead}}, tr); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}
	if len(r.Query(t0)) != 0 {
		t.Fatal("dead engine published")
	}
	n["10.0.0.1:5000"] = true
	if tr := sweep(r, t0.Add(2*time.Second), n); len(tr) != 1 || tr[0].To != StateReady {
		t.Fatalf("revival transitions %v", tr)
	}
	if len(r.Query(t0)) != 1 {
		t.Fatal("revived engine not published")
	}
}

func TestStaleProbeResultIgnored(t *testing.T) {
	r := NewRegistry(Policy{FailureThreshold: 1})
	mustRegister(t, r, t0, nil, rg("E", 0, 0, 0, "tcp://10.0.0.1:5000"))
	stale := r.ProbeTargets()
	// While the probe was in flight, the worker was replaced.
	if err := r.DeleteWorker(t0, "E", 0, 0); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, r, t0, nil, rg("E", 0, 0, 0, "tcp://10.0.0.2:5000"))
	r.RecordProbes(t0, fakeNet{}.probe(stale, false))
	if in, _ := r.Engine(t0, "E"); in.State != StateReady {
		t.Fatalf("stale probe result applied: %v", in.State)
	}
}

func TestExpire(t *testing.T) {
	r := NewRegistry(Policy{FailureThreshold: 1, Retention: time.Minute})
	mustRegister(t, r, t0, nil, rg("A", 0, 0, 0, "tcp://10.0.0.1:5000"))
	mustRegister(t, r, t0, nil, rg("B", 1, 0, 0, "tcp://10.0.0.2:5000"))
	sweep(r, t0, fakeNet{"10.0.0.2:5000": true}) // A dies at t0
	mustRegister(t, r, t0, nil, rg("C", 1, 0, 0, "tcp://10.0.0.2:5000"))
	// B was replaced by C at its own address: retired at t0.
	if got := len(r.Engines(t0)); got != 3 {
		t.Fatalf("engines before expiry: %d", got)
	}
	if n := r.Expire(t0.Add(59 * time.Second)); n != 0 {
		t.Fatalf("expired %d too early", n)
	}
	if n := r.Expire(t0.Add(time.Minute)); n != 2 {
		t.Fatalf("expired %d, want 2 (retired B, dead A)", n)
	}
	var ids []string
	for _, e := range r.Engines(t0) {
		ids = append(ids, e.EngineID)
	}
	if !cmp.Equal(ids, []string{"C"}) {
		t.Fatalf("left %v", ids)
	}
	// dp 0 is free again, and its generation keeps counting.
	if out := mustRegister(t, r, t0, nil, rg("D", 0, 0, 0, "tcp://10.0.0.3:5000")); out.Generation != 2 {
		t.Fatalf("generation %d, want 2", out.Generation)
	}
}

func TestDeleteAndDrain(t *testing.T) {
	r := NewRegistry(testPolicy())
	mustRegister(t, r, t0, nil, rg("A", 0, 0, 0, "tcp://10.0.0.1:5000"))
	if err := r.SetDraining("A", true); err != nil {
		t.Fatal(err)
	}
	in, _ := r.Engine(t0, "A")
	if in.State != StateDraining || !in.Published || in.Routable {
		t.Fatalf("draining: %+v", in)
	}
	if err := r.Delete(t0, "A"); err != nil {
		t.Fatal(err)
	}
	if len(r.Query(t0)) != 0 {
		t.Fatal("deleted engine published")
	}
	if in, _ := r.Engine(t0, "A"); in.State != StateRetired || in.RetiredReason != "deleted" {
		t.Fatalf("deleted: %+v", in)
	}
	if err := r.Delete(t0, "A"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// A live engine id can take the rank without any probe.
	if out := mustRegister(t, r, t0, nil, rg("B", 0, 0, 0, "tcp://10.0.0.1:5000")); out.Result != Registered || out.Generation != 2 {
		t.Fatalf("after delete: %+v", out)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	r := NewRegistry(testPolicy())
	mustRegister(t, r, t0, nil, rg("A", 0, 0, 0, "tcp://10.0.0.1:5000"))
	mustRegister(t, r, t0, nil, rg("A", 0, 1, 0, "tcp://10.0.0.1:5001"))
	mustRegister(t, r, t0, nil, rg("B", 1, 0, 0, "tcp://10.0.0.2:5000"))
	r.Query(t0) // freezes the learned shapes
	data, err := MarshalSnapshot(r.Snapshot(t0))
	if err != nil {
		t.Fatal(err)
	}
	r2 := NewRegistry(testPolicy())
	if err := r2.Restore(t0, data); err != nil {
		t.Fatal(err)
	}
	if q := r2.Query(t0); len(q) != 0 {
		t.Fatalf("unverified engines published: %v", q)
	}
	sweep(r2, t0, fakeNet{"10.0.0.1:5000": true, "10.0.0.1:5001": true})
	if diff := cmp.Diff(r.Query(t0)[0], r2.Query(t0)[0]); diff != "" {
		t.Errorf("restored A differs (-want +got):\n%s", diff)
	}
	if _, ok := r2.Query(t0)[1]; ok {
		t.Error("B was never verified but is published")
	}
	if err := r2.Restore(t0, []byte(`{"version":99}`)); err == nil {
		t.Error("wrong version accepted")
	}
	if err := r2.Restore(t0, []byte(`{`)); err == nil {
		t.Error("bad JSON accepted")
	}
}
