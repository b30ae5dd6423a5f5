package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/etcdtest"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// scaleFrontend is one `switchyard serve` of a scale-out deployment.
type scaleFrontend struct {
	name string
	args []string
	boot string // its registry's HOST:PORT
	s    *server
}

func freeLoopback(t *testing.T) string { return etcdtest.FreeLoopback(t) }

// scaleTally counts one frontend's requests.
type scaleTally struct {
	sent, ok, failed atomic.Int64
	// refused: the frontend was down (connection refused): a balancer
	// would have sent these elsewhere. lost: accepted, then cut.
	refused, lost atomic.Int64
	mu            sync.Mutex
	firstErrs     []string
}

func (c *scaleTally) fail(format string, args ...any) {
	c.failed.Add(1)
	c.mu.Lock()
	if len(c.firstErrs) < 5 {
		c.firstErrs = append(c.firstErrs, fmt.Sprintf(format, args...))
	}
	c.mu.Unlock()
}

// scaleLoad sends completions to fe until ctx ends, checking each one's
// exact tokens. fe.s is read on every request: a restarted frontend is
// used as soon as it is swapped in.
func scaleLoad(ctx context.Context, get func() *server, worker int, tally *scaleTally) {
	for i := 0; ctx.Err() == nil; i++ {
		s := get()
		prompt := []int64{int64(worker + 1), int64(i), 7}
		n := 8 + (worker*7+i)%24
		body := fmt.Sprintf(`{"prompt": %s, "max_tokens": %d}`, jsonInts(prompt), n)
		rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		tally.sent.Add(1)
		resp, b, err := s.post(rctx, body)
		cancel()
		if err != nil || resp.StatusCode != 200 {
			switch {
			case err != nil && strings.Contains(err.Error(), "connection refused"):
				tally.refused.Add(1)
			case err != nil:
				tally.lost.Add(1)
			}
			tally.fail("%v %v %.200s", err, resp, b)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var c completion
		if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 {
			tally.fail("answer %.200s", b)
			continue
		}
		if want := mockengine.TokensFor(prompt, n); !slices.Equal(c.Choices[0].TokenIDs, want) {
			tally.fail("tokens %v, want %v", c.Choices[0].TokenIDs, want)
			continue
		}
		tally.ok.Add(1)
	}
}

func leaderOf(fes []*scaleFrontend) int {
	for i, fe := range fes {
		if fe.s == nil {
			continue
		}
		fe.s.mu.Lock()
		lead := false
		for _, l := range fe.s.lines {
			switch l["msg"] {
			case "cluster: elected leader: owning the engine handshake and the DP coordinator":
				lead = true
			case "cluster: no longer leader":
				lead = false
			}
		}
		fe.s.mu.Unlock()
		if lead {
			return i
		}
	}
	return -1
}

// countLog counts the log lines of p whose msg is msg.
func countLog(p *server, msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.lines {
		if l["msg"] == msg {
			n++
		}
	}
	return n
}

const followingMsg = "following the leader's coordinator"

func registerAt(t *testing.T, boot, engineID string, dp int, addr string) {
	t.Helper()
	body := fmt.Sprintf(`{"engine_id":%q,"dp_rank":%d,"tp_rank":0,"pp_rank":0,"tp_size":1,"pp_size":1,"addr":%q}`, engineID, dp, addr)
	resp, err := httpc.Post("http://"+boot+"/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("register at %s: %v", boot, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("register at %s: %d %s", boot, resp.StatusCode, b)
	}
}

func queryEngineAt(t *testing.T, boot string, dp int) string {
	t.Helper()
	resp, err := httpc.Get("http://" + boot + "/query")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var q map[string]struct {
		EngineID string `json:"engine_id"`
	}
	if json.NewDecoder(resp.Body).Decode(&q) != nil {
		return ""
	}
	return q[strconv.Itoa(dp)].EngineID
}

// TestScaleOut: three frontends over four mock engines, coordinated through
// a real 3-member etcd. Load goes through all three; the leading frontend
// is killed with -9 mid-load (its own requests may fail, every other
// frontend's complete with exact tokens, the coordinator role moves), comes
// back on the same addresses and serves again; the etcd leader is killed
// and service continues; a registration through one frontend is seen
// through the others at once and survives every frontend restarting.
func TestScaleOut(t *testing.T) {
	const nFE, nEng = 3, 4
	etcd := etcdtest.Start(t, 3)
	eps := strings.Join(etcd.Endpoints(), ",")
	hs := "tcp://" + freeLoopback(t)
	coIn, coOut, coPub := "tcp://"+freeLoopback(t), "tcp://"+freeLoopback(t), "tcp://"+freeLoopback(t)
	fes := make([]*scaleFrontend, nFE)
	for i := range fes {
		fe := &scaleFrontend{name: fmt.Sprintf("fe%d", i), boot: freeLoopback(t)}
		fe.args = []string{
			"--etcd-endpoints", eps, "--etcd-prefix", "/scale/", "--frontend-name", fe.name, "--frontends", strconv.Itoa(nFE),
			"--handshake-address", hs, "--data-parallel-size", strconv.Itoa(nEng),
			"--input-address", "tcp://" + freeLoopback(t), "--output-address", "tcp://" + freeLoopback(t),
			"--coordinator-input-address", coIn, "--coordinator-output-address", coOut, "--coordinator-publish-address", coPub,
			"--bootstrap-address", fe.boot, "--shutdown-timeout", "2s",
		}
		fes[i] = fe
	}
	for _, fe := range fes {
		fe.s = startServe(t, fe.args...)
	}
	engines := make([]*proc, nEng)
	for r := range nEng {
		engines[r] = start(t, fmt.Sprintf("mock-engine %d", r), "mock-engine", "--handshake-address", hs,
			"--data-parallel-rank", strconv.Itoa(r), "--data-parallel-size", strconv.Itoa(nEng),
			"--step-ms", "2", "--reconnect")
	}
	allReady := func(s *server) bool {
		n := 0
		for _, e := range s.engines(t) {
			if e.Ready {
				n++
			}
		}
		return n == nEng
	}
	for _, fe := range fes {
		eventually(t, 30*time.Second, fe.name+" sees every engine", func() bool { return allReady(fe.s) })
	}

	// The registry is one, whichever frontend is asked.
	worker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	go func() {
		for {
			c, err := worker.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	registerAt(t, fes[0].boot, "prefill-a", 0, "tcp://"+worker.Addr().String())
	for _, fe := range fes[1:] {
		if got := queryEngineAt(t, fe.boot, 0); got != "prefill-a" {
			t.Fatalf("%s's registry does not show fe0's registration at once: %q", fe.name, got)
		}
	}

	// A deployment-wide drain mark in etcd reaches every frontend; every
	// frontend publishes its view of the engines.
	ecli := etcd.Client(t)
	if _, err := ecli.Put(context.Background(), "/scale/drain/2", ""); err != nil {
		t.Fatal(err)
	}
	draining := func(s *server, rank int) bool {
		code, b := s.get(t, "/v1/engines")
		var v struct {
			Engines []struct {
				Rank     int  `json:"rank"`
				Draining bool `json:"draining"`
			} `json:"engines"`
		}
		if code != 200 || json.Unmarshal(b, &v) != nil {
			return false
		}
		for _, e := range v.Engines {
			if e.Rank == rank {
				return e.Draining
			}
		}
		return false
	}
	for _, fe := range fes {
		eventually(t, 10*time.Second, fe.name+" drains rank 2 from the etcd mark", func() bool { return draining(fe.s, 2) })
	}
	if _, err := ecli.Delete(context.Background(), "/scale/drain/2"); err != nil {
		t.Fatal(err)
	}
	for _, fe := range fes {
		eventually(t, 10*time.Second, fe.name+" undrains rank 2", func() bool { return !draining(fe.s, 2) })
	}
	if views, err := ecli.Get(context.Background(), "/scale/views/", clientv3.WithPrefix()); err != nil || len(views.Kvs) != nFE {
		t.Fatalf("published views: %v %v, want one per frontend", views, err)
	}

	// Load through all three frontends.
	var mu sync.Mutex
	get := func(i int) func() *server {
		return func() *server { mu.Lock(); defer mu.Unlock(); return fes[i].s }
	}
	tallies := make([]*scaleTally, nFE)
	ctx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range fes {
		tallies[i] = &scaleTally{}
		for w := range 3 {
			wg.Go(func() { scaleLoad(ctx, get(i), i*10+w, tallies[i]) })
		}
	}
	lead := leaderOf(fes)
	if lead < 0 {
		t.Fatal("no frontend logged the leadership")
	}
	// Long requests on the frontend about to be killed: the engines keep
	// generating them after the kill, and the restarted frontend, which does
	// not know them, must abort them rather than leave them running.
	longCtx, stopLong := context.WithCancel(context.Background())
	defer stopLong()
	for w := range 2 {
		go func() {
			body := fmt.Sprintf(`{"prompt": [9, %d], "max_tokens": 4000}`, w)
			_, _, _ = fes[lead].s.post(longCtx, body)
		}()
	}
	time.Sleep(time.Second)
	victim := fes[lead]
	following := make([]int, nFE)
	for i, fe := range fes {
		following[i] = countLog(fe.s, followingMsg)
	}
	killedAt := time.Now()
	failedBefore := tallies[lead].failed.Load()
	if failedBefore != 0 {
		t.Errorf("%s failed %d requests before its kill: %v", victim.name, failedBefore, tallies[lead].firstErrs)
	}
	_ = victim.s.cmd.Process.Signal(syscall.SIGKILL)
	testwait.Recv(t, victim.s.done, victim.name+" to exit after SIGKILL")
	var newLead int
	eventually(t, 10*time.Second, "another frontend takes the coordinator role", func() bool {
		mu.Lock()
		defer mu.Unlock()
		saved := victim.s
		victim.s = nil
		newLead = leaderOf(fes)
		victim.s = saved
		return newLead >= 0
	})
	failover := time.Since(killedAt)
	t.Logf("coordinator role moved from %s to %s %v after kill -9 (lease TTL 2 s)", victim.name, fes[newLead].name, failover.Round(time.Millisecond))
	// Every surviving frontend follows the new leader's coordinator.
	for i, fe := range fes {
		if i == lead {
			continue
		}
		eventually(t, 10*time.Second, fe.name+" follows the new coordinator", func() bool { return countLog(fe.s, followingMsg) > following[i] })
	}
	// And every engine's coordinator sockets reach it (their ZeroMQ sockets
	// redial the same addresses, which the new leader bound).
	for r, e := range engines {
		eventually(t, 10*time.Second, fmt.Sprintf("engine %d reconnects to the coordinator", r), func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			for _, l := range e.lines {
				if l["msg"] == "mockengine: peer reconnected" && l["address"] == coIn {
					return true
				}
			}
			return false
		})
	}
	time.Sleep(time.Second)

	// The killed frontend comes back on the same addresses and serves again.
	restarted := startServe(t, victim.args...)
	eventually(t, 30*time.Second, victim.name+" sees every engine again", func() bool { return allReady(restarted) })
	// Real engines register once: the restarted frontend took each engine's
	// registration from etcd when its DEALER reconnected.
	restarted.mu.Lock()
	replayed := 0
	for _, l := range restarted.lines {
		if l["msg"] == "frontend: engine reconnected without registering (it registered with this frontend's previous run); replaying its stored registration" {
			replayed++
		}
	}
	restarted.mu.Unlock()
	if replayed != nEng {
		t.Errorf("the restarted frontend replayed %d registrations, want %d", replayed, nEng)
	}
	restarted.waitLog("dispatcher: aborted at its engine a request this frontend does not know (left running by its previous run)", 10*time.Second)
	mu.Lock()
	victim.s = restarted
	mu.Unlock()
	lostOnKill := tallies[lead].lost.Load()
	refusedOnKill := tallies[lead].refused.Load()
	if other := tallies[lead].failed.Load() - failedBefore - lostOnKill - refusedOnKill; other != 0 {
		t.Errorf("%s: %d requests failed otherwise than by its kill: %v", victim.name, other, tallies[lead].firstErrs)
	}
	restartedAt := time.Now()
	time.Sleep(time.Second)
	okAfterRestart := tallies[lead].ok.Load()

	// The etcd leader dies: service continues.
	etcd.Kill(etcd.Leader(t))
	registerAt(t, fes[(lead+1)%nFE].boot, "prefill-b", 1, "tcp://"+worker.Addr().String())
	for _, fe := range fes {
		if got := queryEngineAt(t, fe.boot, 1); got != "prefill-b" {
			t.Fatalf("%s after the etcd leader kill: %q", fe.name, got)
		}
	}
	time.Sleep(2 * time.Second)
	stopLoad()
	testwait.Wait(t, &wg, "the load to stop")
	for i, tl := range tallies {
		t.Logf("%s: sent %d, ok %d, failed %d %v", fes[i].name, tl.sent.Load(), tl.ok.Load(), tl.failed.Load(), tl.firstErrs)
		if i != lead && tl.failed.Load() != 0 {
			t.Errorf("%s (not killed) lost %d requests: %v", fes[i].name, tl.failed.Load(), tl.firstErrs)
		}
	}
	t.Logf("kill -9 of %s: %d requests in flight lost (3 client workers), %d refused while it was down (%v until it served again; a balancer sends those elsewhere)",
		victim.name, lostOnKill, refusedOnKill, restartedAt.Sub(killedAt).Round(time.Millisecond))
	if after := tallies[lead].ok.Load() - okAfterRestart; after == 0 {
		t.Errorf("the restarted frontend completed nothing after its restart")
	}

	// An engine restarts after the failover: it handshakes with the new
	// leader and rejoins every frontend, the restarted one too.
	_ = engines[3].cmd.Process.Signal(syscall.SIGKILL)
	testwait.Recv(t, engines[3].done, "engine 3 to exit after SIGKILL")
	for _, fe := range fes {
		eventually(t, 10*time.Second, fe.name+" sees engine 3 gone", func() bool { return !allReady(fe.s) })
	}
	start(t, "mock-engine 3 again", "mock-engine", "--handshake-address", hs,
		"--data-parallel-rank", "3", "--data-parallel-size", strconv.Itoa(nEng), "--step-ms", "2", "--reconnect")
	for _, fe := range fes {
		eventually(t, 30*time.Second, fe.name+" sees engine 3 back", func() bool { return allReady(fe.s) })
	}
	for _, fe := range fes {
		resp, b, err := fe.s.post(context.Background(), `{"prompt": [1, 2], "max_tokens": 5}`, "X-data-parallel-rank", "3")
		var c completion
		if err != nil || resp.StatusCode != 200 || json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 ||
			!slices.Equal(c.Choices[0].TokenIDs, mockengine.TokensFor([]int64{1, 2}, 5)) {
			t.Fatalf("%s to the restarted engine: %v %v %s", fe.name, err, resp, b)
		}
	}

	// Every frontend restarts: the registry is still there.
	for _, fe := range fes {
		fe.s.stop(syscall.SIGTERM, 20*time.Second)
	}
	startServe(t, fes[1].args...)
	eventually(t, 10*time.Second, "the registry after every frontend restarted", func() bool {
		return queryEngineAt(t, fes[1].boot, 0) == "prefill-a" && queryEngineAt(t, fes[1].boot, 1) == "prefill-b"
	})
}
