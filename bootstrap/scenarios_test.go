package bootstrap

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// deployment is a fake prefill deployment: dp engines of tp x pp workers
// with their own ports, for the restart scenarios of the spec (section 4).
type deployment struct {
	prefix string // engine id prefix, a fresh uuid per start in vLLM
	host   string
	port   int
	dps    []int
	tp, pp int
}

func (d *deployment) regs() []Registration {
	var out []Registration
	port := d.port
	for _, dp := range d.dps {
		for t := range d.tp {
			for p := range d.pp {
				out = append(out, rg(fmt.Sprintf("%s_dp%d", d.prefix, dp), dp, t, p, fmt.Sprintf("tcp://%s:%d", d.host, port)))
				port++
			}
		}
	}
	return out
}

// up marks the deployment's ports live in n and registers every worker,
// returning the first refusal.
func (d *deployment) up(r *Registry, now time.Time, n fakeNet) error {
	for _, reg := range d.regs() {
		n[reg.Addr[len("tcp://"):]] = true
	}
	for _, reg := range d.regs() {
		if _, err := register(r, now, n, reg); err != nil {
			return err
		}
	}
	return nil
}

// down closes the deployment's ports, as a killed process does.
func (d *deployment) down(n fakeNet) {
	for _, reg := range d.regs() {
		delete(n, reg.Addr[len("tcp://"):])
	}
}

func TestScenarios(t *testing.T) {
	settle := func(r *Registry) map[int]string { return engineIDs(r.Query(t0.Add(time.Hour))) }

	t.Run("F1 DP engines registering the same local dp_rank get the exact 400 naming both ids", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		a := &deployment{prefix: "X", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 1, pp: 1}
		b := &deployment{prefix: "Y", host: "10.0.0.2", port: 5000, dps: []int{0}, tp: 1, pp: 1}
		if err := a.up(r, t0, n); err != nil {
			t.Fatal(err)
		}
		err := b.up(r, t0, n)
		if got, want := detail(err), "Engine ID mismatch for dp_rank=0: expected X_dp0, got Y_dp0"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})

	t.Run("F2 one external registry serves every DP engine of a deployment on one port", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		d := &deployment{prefix: "P", host: "10.0.0.1", port: 5000, dps: []int{0, 1, 2, 3}, tp: 2, pp: 2}
		if err := d.up(r, t0, n); err != nil {
			t.Fatal(err)
		}
		q := r.Query(t0.Add(time.Hour))
		if len(q) != 4 || len(q[3].WorkerAddr) != 2 || len(q[3].WorkerAddr[1]) != 2 {
			t.Fatalf("query %v", q)
		}
	})

	t.Run("F3 a retry after a read timeout is accepted", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		d := &deployment{prefix: "P", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 2, pp: 1}
		if err := d.up(r, t0, n); err != nil {
			t.Fatal(err)
		}
		for _, reg := range d.regs() { // every worker retries once
			if out := mustRegister(t, r, t0, n, reg); out.Result != Idempotent {
				t.Fatalf("retry: %v", out.Result)
			}
		}
	})

	t.Run("F4 a dead engine is hidden and the rest of /query still answers", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(Policy{FailureThreshold: 1})
		a := &deployment{prefix: "A", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 1, pp: 1}
		b := &deployment{prefix: "B", host: "10.0.0.2", port: 5000, dps: []int{1}, tp: 1, pp: 1}
		_, _ = a.up(r, t0, n), b.up(r, t0, n)
		a.down(n)
		sweep(r, t0, n)
		if got := settle(r); !cmp.Equal(got, map[int]string{1: "B_dp1"}) {
			t.Fatalf("query %v", got)
		}
	})

	t.Run("F5/F7 a prefill restarted with a new engine id takes over its dp ranks at once", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		old := &deployment{prefix: "uuid1", host: "10.0.0.1", port: 5000, dps: []int{0, 1}, tp: 2, pp: 1}
		if err := old.up(r, t0, n); err != nil {
			t.Fatal(err)
		}
		// Killed and restarted before any periodic probe noticed: vLLM's
		// registry would answer "Engine ID mismatch" and abort the start.
		old.down(n)
		neu := &deployment{prefix: "uuid2", host: "10.0.0.1", port: 7000, dps: []int{0, 1}, tp: 2, pp: 1}
		if err := neu.up(r, t0, n); err != nil {
			t.Fatalf("restart refused: %v", err)
		}
		if got := settle(r); !cmp.Equal(got, map[int]string{0: "uuid2_dp0", 1: "uuid2_dp1"}) {
			t.Fatalf("query %v", got)
		}
		// Routers that cached dp -> engine id see the generation move.
		if got := r.Generations(); !cmp.Equal(got, map[int]uint64{0: 2, 1: 2}) {
			t.Fatalf("generations %v", got)
		}
		if in, _ := r.Engine(t0, "uuid1_dp0"); in.State != StateRetired || in.RetiredReason != "replaced by uuid2_dp0" {
			t.Fatalf("old engine %+v", in)
		}
	})

	t.Run("F5 restarted at the same ports (port reuse) also takes over", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		old := &deployment{prefix: "uuid1", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 1, pp: 1}
		_ = old.up(r, t0, n)
		neu := &deployment{prefix: "uuid2", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 1, pp: 1}
		if err := neu.up(r, t0, n); err != nil {
			t.Fatalf("restart refused: %v", err)
		}
	})

	t.Run("F6 a pinned engine id restarted on new ports replaces its dead workers", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		old := &deployment{prefix: "pinned", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 2, pp: 2}
		_ = old.up(r, t0, n)
		settle(r)
		old.down(n)
		neu := &deployment{prefix: "pinned", host: "10.0.0.1", port: 6000, dps: []int{0}, tp: 2, pp: 2}
		regs := neu.regs()
		for _, reg := range regs {
			n[reg.Addr[len("tcp://"):]] = true
		}
		// After the first replacement the conflict probe has found every
		// old worker dead, so the engine is hidden rather than published
		// with a mix of old and new addresses.
		if out := mustRegister(t, r, t0, n, regs[0]); out.Result != WorkerTakeover {
			t.Fatalf("first worker: %v", out.Result)
		}
		if got := settle(r); len(got) != 0 {
			t.Fatalf("half-replaced engine published: %v", got)
		}
		for _, reg := range regs[1:] {
			if out := mustRegister(t, r, t0, n, reg); out.Result != WorkerTakeover {
				t.Fatalf("worker %+v: %v", reg, out.Result)
			}
		}
		want := neu.regs()
		q := r.Query(t0.Add(time.Hour))[0]
		for _, reg := range want {
			if q.WorkerAddr[reg.TP][reg.PP] != reg.Addr {
				t.Fatalf("worker_addr %v, want new addresses", q.WorkerAddr)
			}
		}
	})

	t.Run("F6 a pinned engine id used by two live processes still gets the exact 400", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		a := &deployment{prefix: "pinned", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 1, pp: 1}
		b := &deployment{prefix: "pinned", host: "10.0.0.2", port: 5000, dps: []int{0}, tp: 1, pp: 1}
		_ = a.up(r, t0, n)
		err := b.up(r, t0, n)
		want := "Worker with dp_rank=0, tp_rank=0, pp_rank=0 is already registered at tcp://10.0.0.1:5000, but still want to register at tcp://10.0.0.2:5000"
		if got := detail(err); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})

	t.Run("F7 a prefill restarted after the prober marked it dead takes over without a probe", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(Policy{FailureThreshold: 2})
		old := &deployment{prefix: "uuid1", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 1, pp: 2}
		_ = old.up(r, t0, n)
		old.down(n)
		sweep(r, t0, n)
		sweep(r, t0, n)
		neu := &deployment{prefix: "uuid2", host: "10.0.0.1", port: 6000, dps: []int{0}, tp: 1, pp: 2}
		for _, reg := range neu.regs() {
			n[reg.Addr[len("tcp://"):]] = true
			// Plain Register, no probe: the holder is already known dead.
			if _, err := r.Register(t0, reg); err != nil {
				t.Fatal(err)
			}
		}
		if got := settle(r); !cmp.Equal(got, map[int]string{0: "uuid2_dp0"}) {
			t.Fatalf("query %v", got)
		}
	})

	t.Run("F8 two live deployments on one registry collide loudly on every dp rank", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		a := &deployment{prefix: "A", host: "10.0.0.1", port: 5000, dps: []int{0, 1}, tp: 1, pp: 1}
		b := &deployment{prefix: "B", host: "10.0.0.2", port: 5000, dps: []int{0, 1}, tp: 1, pp: 1}
		_ = a.up(r, t0, n)
		for _, reg := range b.regs() {
			n[reg.Addr[len("tcp://"):]] = true
			_, err := register(r, t0, n, reg)
			want := fmt.Sprintf("Engine ID mismatch for dp_rank=%d: expected A_dp%d, got B_dp%d", reg.DP, reg.DP, reg.DP)
			if got := detail(err); got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		}
		if got := settle(r); !cmp.Equal(got, map[int]string{0: "A_dp0", 1: "A_dp1"}) {
			t.Fatalf("query %v", got)
		}
	})

	t.Run("F9 a registry restart keeps live engines and lets dead ones be replaced", func(t *testing.T) {
		n, r := fakeNet{}, NewRegistry(testPolicy())
		a := &deployment{prefix: "A", host: "10.0.0.1", port: 5000, dps: []int{0}, tp: 2, pp: 1}
		b := &deployment{prefix: "B", host: "10.0.0.2", port: 5000, dps: []int{1}, tp: 2, pp: 1}
		_, _ = a.up(r, t0, n), b.up(r, t0, n)
		settle(r)
		data, err := MarshalSnapshot(r.Snapshot(t0))
		if err != nil {
			t.Fatal(err)
		}
		// The registry restarts; meanwhile B died. vLLM never
		// re-registers, so without the snapshot A would be lost for good.
		b.down(n)
		r2 := NewRegistry(testPolicy())
		if err := r2.Restore(t0, data); err != nil {
			t.Fatal(err)
		}
		sweep(r2, t0, n)
		if got := settle(r2); !cmp.Equal(got, map[int]string{0: "A_dp0"}) {
			t.Fatalf("after restart: %v", got)
		}
		// B's restart (new engine id) takes dp 1 over from the unverified
		// leftover.
		b2 := &deployment{prefix: "B2", host: "10.0.0.2", port: 6000, dps: []int{1}, tp: 2, pp: 1}
		if err := b2.up(r2, t0, n); err != nil {
			t.Fatal(err)
		}
		if got := settle(r2); !cmp.Equal(got, map[int]string{0: "A_dp0", 1: "B2_dp1"}) {
			t.Fatalf("after B restart: %v", got)
		}
		if g := r2.Generations()[1]; g != 2 {
			t.Fatalf("generation of dp 1 = %d, want 2 (kept across the registry restart)", g)
		}
	})
}
