package bootstrap

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/etcdtest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// sharedServer runs a full registry Server (HTTP, TCP prober, store watch)
// over the etcd cluster, as one frontend of several would.
func sharedServer(t *testing.T, cli *clientv3.Client, prefix string) (url string, stop func()) {
	t.Helper()
	cfg := testConfig()
	cfg.ProbeInterval = 200 * time.Millisecond
	cfg.Store = NewEtcdStore(cli, prefix)
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.retryGap = 10 * time.Millisecond
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); testwait.Recv(t, done, "the shared server to stop") }) }
	t.Cleanup(stop)
	return "http://" + addr.String(), stop
}

func queryOf(t *testing.T, url string) map[string]Entry {
	t.Helper()
	code, body := httpDo(t, "GET", url+"/query", "")
	if code != 200 {
		t.Fatalf("query %s: %d %s", url, code, body)
	}
	var q map[string]Entry
	if err := json.Unmarshal([]byte(body), &q); err != nil {
		t.Fatal(err)
	}
	return q
}

func generationsOf(t *testing.T, url string) string {
	t.Helper()
	code, body := httpDo(t, "GET", url+"/v2/generations", "")
	if code != 200 {
		t.Fatalf("generations %s: %d %s", url, code, body)
	}
	return body
}

// TestEtcdStoreSharedRegistry: a registration through one frontend is seen
// through the other at once; a conflict and a takeover are decided on the
// shared state; everything survives every frontend restarting.
func TestEtcdStoreSharedRegistry(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	a, stopA := sharedServer(t, cli, "/t1/")
	b, stopB := sharedServer(t, cli, "/t1/")

	w1, stopW1 := fakeWorker(t)
	if code, body := httpDo(t, "POST", a+"/register", regBody("eng-a", 0, 0, 0, w1)); code != 200 {
		t.Fatalf("register through A: %d %s", code, body)
	}
	if q := queryOf(t, b); q["0"].EngineID != "eng-a" {
		t.Fatalf("B does not see A's registration at once: %+v", q)
	}
	if ga, gb := generationsOf(t, a), generationsOf(t, b); ga != gb {
		t.Fatalf("generations differ: A %s, B %s", ga, gb)
	}

	// A live holder registered through A is defended through B.
	w2, _ := fakeWorker(t)
	code, body := httpDo(t, "POST", b+"/register", regBody("eng-b", 0, 0, 0, w2))
	if code != 400 {
		t.Fatalf("conflicting registration through B: %d %s, want 400", code, body)
	}
	// Its worker dies: B's conflict probe finds it dead and takes over.
	stopW1()
	if code, body := httpDo(t, "POST", b+"/register", regBody("eng-b", 0, 0, 0, w2)); code != 200 {
		t.Fatalf("takeover through B: %d %s", code, body)
	}
	if q := queryOf(t, a); q["0"].EngineID != "eng-b" {
		t.Fatalf("A does not see B's takeover: %+v", q)
	}
	if ga := generationsOf(t, a); ga != `{"0":2}`+"\n" && ga != `{"0":2}` {
		t.Fatalf("A's generations after the takeover: %q", ga)
	}

	// Every frontend restarts: nothing is lost.
	stopA()
	stopB()
	c2, _ := sharedServer(t, cli, "/t1/")
	deadline := time.Now().Add(5 * time.Second)
	for {
		q := queryOf(t, c2)
		if q["0"].EngineID == "eng-b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a restarted frontend lost the registry: %+v", q)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g := generationsOf(t, c2); g != `{"0":2}`+"\n" && g != `{"0":2}` {
		t.Fatalf("generations after restart: %q", g)
	}
}

// TestEtcdStoreConcurrentRegistrations: registrations racing through two
// frontends for one dp rank, every holder alive: exactly one wins. Racing
// for distinct dp ranks: all win, and both frontends agree on the result.
func TestEtcdStoreConcurrentRegistrations(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	urls := make([]string, 2)
	urls[0], _ = sharedServer(t, cli, "/t2/")
	urls[1], _ = sharedServer(t, cli, "/t2/")
	const n = 12
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i], _ = fakeWorker(t)
	}
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, body := httpDo(t, "POST", urls[i%2]+"/register", regBody(fmt.Sprintf("race-%d", i), 7, 0, 0, addrs[i]))
			switch code {
			case 200:
				ok.Add(1)
			case 400:
				refused.Add(1)
			default:
				t.Errorf("register %d: %d %s", i, code, body)
			}
		})
	}
	testwait.Wait(t, &wg, "the racing registrations")
	if ok.Load() != 1 || refused.Load() != n-1 {
		t.Fatalf("one dp rank raced through two frontends: %d accepted, %d refused; want 1 and %d", ok.Load(), refused.Load(), n-1)
	}
	for i := range n {
		wg.Go(func() {
			if code, body := httpDo(t, "POST", urls[i%2]+"/register", regBody(fmt.Sprintf("spread-%d", i), 100+i, 0, 0, addrs[i])); code != 200 {
				t.Errorf("register dp %d: %d %s", 100+i, code, body)
			}
		})
	}
	testwait.Wait(t, &wg, "the registrations on distinct dp ranks")
	qa, qb := queryOf(t, urls[0]), queryOf(t, urls[1])
	if len(qa) != n+1 || len(qb) != n+1 {
		t.Fatalf("engines: A %d, B %d, want %d", len(qa), len(qb), n+1)
	}
	for dp, e := range qa {
		if qb[dp].EngineID != e.EngineID {
			t.Fatalf("dp %s: A says %s, B says %s", dp, e.EngineID, qb[dp].EngineID)
		}
	}
}

// TestEtcdStoreSurvivesLeaderKill: registrations keep being accepted, and
// seen by the other frontend, after the etcd leader is killed.
func TestEtcdStoreSurvivesLeaderKill(t *testing.T) {
	c := etcdtest.Start(t, 3)
	cli := c.Client(t)
	a, _ := sharedServer(t, cli, "/t3/")
	b, _ := sharedServer(t, cli, "/t3/")
	w1, _ := fakeWorker(t)
	if code, body := httpDo(t, "POST", a+"/register", regBody("before", 0, 0, 0, w1)); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	c.Kill(c.Leader(t))
	w2, _ := fakeWorker(t)
	start := time.Now()
	if code, body := httpDo(t, "POST", a+"/register", regBody("after", 1, 0, 0, w2)); code != 200 {
		t.Fatalf("register after the etcd leader died: %d %s", code, body)
	}
	t.Logf("first registration after the leader kill took %v", time.Since(start))
	q := queryOf(t, b)
	if q["0"].EngineID != "before" || q["1"].EngineID != "after" {
		t.Fatalf("B after the leader kill: %+v", q)
	}
}

// benchRegister registers b.N workers, each a new engine on its own dp rank,
// through s.register: the decision plus, with a store, the etcd commit.
func benchRegister(b *testing.B, store Store) {
	cfg := testConfig()
	cfg.MaxEngines = 1 << 20
	cfg.MaxWorkers = 1 << 20
	cfg.Store = store
	s, err := newServer(cfg, NewRegistry(cfg.Policy()), newFakeProber(), time.Now)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		reg := Registration{EngineID: fmt.Sprintf("e%d", i), DP: i, Addr: "tcp://127.0.0.1:9"}
		if _, err := s.register(ctx, reg); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "registrations/s")
}

func BenchmarkRegisterEmbedded(b *testing.B) { benchRegister(b, nil) }

func BenchmarkRegisterEtcd(b *testing.B) {
	c := etcdtest.Start(b, 3)
	benchRegister(b, NewEtcdStore(c.Client(b), fmt.Sprintf("/bench-%d/", time.Now().UnixNano())))
}

// benchQuery answers /query from a registry of 64 engines; with a store,
// each answer first checks the store's head revision (freshen).
func benchQuery(b *testing.B, store Store) {
	cfg := testConfig()
	cfg.Store = store
	p := newFakeProber()
	s, err := newServer(cfg, NewRegistry(cfg.Policy()), p, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 64 {
		addr := fmt.Sprintf("tcp://127.0.0.1:%d", 10000+i)
		p.set(addr, true)
		if _, err := s.register(context.Background(), Registration{EngineID: fmt.Sprintf("q%d", i), DP: i, Addr: addr, TPSize: 1, PPSize: 1}); err != nil {
			b.Fatal(err)
		}
	}
	h := s.Handler()
	b.ResetTimer()
	for range b.N {
		if code, _ := do(b, h, "GET", "/query", ""); code != 200 {
			b.Fatal(code)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}

func BenchmarkQueryEmbedded(b *testing.B) { benchQuery(b, nil) }

func BenchmarkQueryEtcd(b *testing.B) {
	c := etcdtest.Start(b, 3)
	benchQuery(b, NewEtcdStore(c.Client(b), fmt.Sprintf("/benchq-%d/", time.Now().UnixNano())))
}
