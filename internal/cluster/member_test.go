package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/etcdtest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ownClient gives a member its own etcd connection, so closing it is what a
// kill -9 does to the member: keepalives stop, nothing is revoked.
func ownClient(t *testing.T, c *etcdtest.Cluster) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func memberConfig(cli *clientv3.Client, prefix, name string) Config {
	return Config{Client: cli, Prefix: prefix, Name: name,
		Input: "tcp://127.0.0.1:1" + name, Output: "tcp://127.0.0.1:2" + name, TTL: 1}
}

// TestJoinAssignsStableIndexes: frontends joining at once get distinct,
// dense indexes; a restarted one gets its own back.
func TestJoinAssignsStableIndexes(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := []string{"fa", "fb", "fc", "fd", "fe"}
	got := make([]int, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			m, err := Join(ctx, memberConfig(ownClient(t, c), "/j/", n))
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = m.Client().Index
			m.Close()
		})
	}
	testwait.Wait(t, &wg, "the members joining at once")
	seen := map[int]bool{}
	for _, g := range got {
		seen[g] = true
	}
	for i := range names {
		if !seen[i] {
			t.Fatalf("indexes %v are not 0..%d", got, len(names)-1)
		}
	}
	m, err := Join(ctx, memberConfig(ownClient(t, c), "/j/", "fc"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Client().Index != got[2] {
		t.Fatalf("restarted fc got index %d, had %d", m.Client().Index, got[2])
	}
	tab, err := m.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := tab.Addresses()
	if err != nil || len(in) != len(names) {
		t.Fatalf("table addresses: %v %v", in, err)
	}
	// Engine generations move by transaction, one per handshake.
	for want := uint64(1); want <= 2; want++ {
		rec, err := m.RecordEngineReady(ctx, 3)
		if err != nil || rec.Generation != want || rec.Leader != "fc" {
			t.Fatalf("engine record %+v %v, want generation %d", rec, err, want)
		}
	}
	if recs, err := m.Engines(ctx); err != nil || len(recs) != 1 || recs[0].Rank != 3 {
		t.Fatalf("engines %+v %v", recs, err)
	}
	cfg := memberConfig(ownClient(t, c), "/j/", "fc")
	cfg.Input = "tcp://127.0.0.1:9"
	if _, err := Join(ctx, cfg); err == nil {
		t.Fatal("a frontend came back on other addresses and was accepted")
	}
}

// TestLeaderFailover: one of three members leads; when it is killed (its
// etcd connection cut, nothing revoked) another leads within the lease TTL
// plus an election; a graceful stop hands over at once.
func TestLeaderFailover(t *testing.T) {
	c := etcdtest.Start(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type cand struct {
		m    *Member
		cli  *clientv3.Client
		stop context.CancelFunc
		done chan struct{}
	}
	var leading atomic.Int32
	var mu sync.Mutex
	var leaderName string
	var electedAt time.Time
	cands := map[string]*cand{}
	for _, n := range []string{"a", "b", "c"} {
		cli := ownClient(t, c)
		m, err := Join(ctx, memberConfig(cli, "/lf/", n))
		if err != nil {
			t.Fatal(err)
		}
		lctx, stop := context.WithCancel(ctx)
		cd := &cand{m: m, cli: cli, stop: stop, done: make(chan struct{})}
		cands[n] = cd
		go func() {
			defer close(cd.done)
			m.Lead(lctx, func(dctx context.Context) {
				if leading.Add(1) != 1 {
					t.Errorf("two leaders at once (%s)", n)
				}
				mu.Lock()
				leaderName, electedAt = n, time.Now()
				mu.Unlock()
				<-dctx.Done()
				leading.Add(-1)
			})
		}()
	}
	waitLeader := func(not string) (string, time.Time) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n, at := leaderName, electedAt
			mu.Unlock()
			if n != "" && n != not && leading.Load() == 1 {
				return n, at
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no new leader (old %s)", not)
		return "", time.Time{}
	}
	first, _ := waitLeader("")
	mi, ok, err := cands[first].m.Leader(ctx)
	if err != nil || !ok || mi.Name != first {
		t.Fatalf("Leader() = %+v %v %v, want %s", mi, ok, err, first)
	}

	// kill -9: the process's connection is gone, its lease runs out.
	killed := time.Now()
	cands[first].cli.Close()
	second, at := waitLeader(first)
	t.Logf("leader %s killed: %s leads after %v (lease TTL 1 s)", first, second, at.Sub(killed))
	if d := at.Sub(killed); d > 5*time.Second {
		t.Fatalf("failover took %v", d)
	}
	cands[first].stop()

	// Graceful: Close revokes the lease.
	stopped := time.Now()
	cands[second].stop()
	testwait.Recv(t, cands[second].done, "the second leader's Lead to return")
	cands[second].m.Close()
	third, at := waitLeader(second)
	t.Logf("leader %s stopped: %s leads after %v", second, third, at.Sub(stopped))
	if d := at.Sub(stopped); d > 2*time.Second {
		t.Fatalf("graceful handover took %v", d)
	}
	// The killed leader's membership lasts until its lease runs out (TTL 1 s from
	// the kill); the failover itself can be quicker than that (65 ms seen in CI).
	var members []MemberInfo
	for deadline := killed.Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if members, err = cands[third].m.Members(ctx); err != nil {
			t.Fatal(err)
		}
		if len(members) == 1 && members[0].Name == third || time.Now().After(deadline) {
			break
		}
	}
	if len(members) != 1 || members[0].Name != third {
		t.Fatalf("live members %+v, want only %s", members, third)
	}
	cands[third].stop()
	testwait.Recv(t, cands[third].done, "the third leader's Lead to return")
	cands[third].m.Close()
}

type fakeDrainer struct {
	mu      sync.Mutex
	known   map[int]bool
	drained map[int]bool
}

func (f *fakeDrainer) DrainEngine(r int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.known[r] {
		return fmt.Errorf("unknown rank %d", r)
	}
	f.drained[r] = true
	return nil
}

func (f *fakeDrainer) UndrainEngine(r int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drained[r] = false
	return nil
}

func (f *fakeDrainer) is(r int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.drained[r]
}

// TestDrainsAndViews: a drain mark in etcd reaches a frontend (once it knows
// the rank), its removal undrains; each frontend's view is published under
// its lease and gone with it.
func TestDrainsAndViews(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := ownClient(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := Join(ctx, memberConfig(cli, "/dv/", "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	d := &fakeDrainer{known: map[int]bool{0: true}, drained: map[int]bool{}}
	go m.FollowDrains(ctx, 20*time.Millisecond, d)
	go m.PublishView(ctx, 20*time.Millisecond, func() any { return map[string]int{"ranks": 2} })
	if _, err := cli.Put(ctx, "/dv/drain/1", ""); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 5 s: %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if d.is(1) {
		t.Fatal("an unknown rank was drained")
	}
	d.mu.Lock()
	d.known[1] = true // the engine comes up
	d.mu.Unlock()
	waitFor("rank 1 drained once known", func() bool { return d.is(1) })
	if _, err := cli.Delete(ctx, "/dv/drain/1"); err != nil {
		t.Fatal(err)
	}
	waitFor("rank 1 undrained", func() bool { return !d.is(1) })
	waitFor("the view published", func() bool {
		v, err := m.Views(ctx)
		return err == nil && string(v["a"]) == `{"ranks":2}`
	})
}
