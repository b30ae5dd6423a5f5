package e2e

// Attacks on the KV-transfer bootstrap registry (`switchyard registry`, and
// serve's embedded one): huge claimed topologies, floods of engines, racing
// takeovers, snapshot churn and unauthenticated admin calls. Each is bounded
// in count and time, runs on loopback, and checks the registry still serves
// and its footprint comes back.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// registry is a running `switchyard registry`.
type registry struct {
	*proc
	addr string
}

func startRegistry(t *testing.T, args ...string) *registry {
	t.Helper()
	p := start(t, "registry", append([]string{"registry", "--address", "127.0.0.1:0"}, args...)...)
	return &registry{proc: p, addr: p.waitLog("bootstrap registry serving", 10*time.Second)["address"].(string)}
}

func (r *registry) url(path string) string { return "http://" + r.addr + path }

// do sends one request and returns the status and body.
func (r *registry) do(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.url(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func regJSON(id string, dp, tp, pp int, addr string, extra string) string {
	return fmt.Sprintf(`{"engine_id":%q,"dp_rank":%d,"tp_rank":%d,"pp_rank":%d,"addr":%q%s}`, id, dp, tp, pp, addr, extra)
}

// liveAddr is a loopback port that accepts connections (a worker's ZeroMQ
// listener, as the registry's probe sees it) for the test's lifetime.
func liveAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); testwait.Recv(t, done, "the live address's accept loop to end") })
	return ln.Addr().String()
}

// deadAddr is a loopback port nobody listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := ln.Addr().String()
	ln.Close()
	return a
}

// checkServes asserts the registry still answers /query and /register.
func (r *registry) checkServes(t *testing.T, addr string) {
	t.Helper()
	if code, b := r.do(t, "POST", "/register", regJSON("after-attack", 9999, 0, 0, "tcp://"+addr, "")); code != 200 {
		t.Fatalf("/register after the attack: %d %s", code, b)
	}
	if code, b := r.do(t, "GET", "/query", ""); code != 200 || !json.Valid(b) {
		t.Fatalf("/query after the attack: %d %.200s", code, b)
	}
}

// One unauthenticated /register claiming tp_size x pp_size of 1e9 used to
// make /v2/engines build a billion "missing" entries and kill the process.
func TestAttackRegistryHugeTopology(t *testing.T) {
	r := startRegistry(t)
	base := sampleResources(t, r.cmd.Process.Pid, r.url("/metrics"))
	sent, failed := 0, 0
	for i := range 200 {
		size := []int{1_000_000_000, 1 << 20, 5000, 64}[i%4]
		code, _ := r.do(t, "POST", "/register", regJSON(fmt.Sprintf("huge-%d", i), i, 0, 0, "tcp://10.0.0.1:1",
			fmt.Sprintf(`,"tp_size":%d,"pp_size":%d`, size, size)))
		sent++
		if code != 400 {
			failed++
			t.Errorf("tp_size=pp_size=%d: %d, want 400", size, code)
		}
		if i%50 == 0 {
			if code, b := r.do(t, "GET", "/v2/engines", ""); code != 200 || len(b) > 1<<20 {
				t.Fatalf("/v2/engines: %d, %d bytes", code, len(b))
			}
		}
	}
	r.checkServes(t, liveAddr(t))
	after := settle(t, r.cmd.Process.Pid, r.url("/metrics"), base, 10*time.Second, 64<<20, 8, 20)
	attackReport(t, "registry-huge-topology", sent, failed, base, after)
}

// A flood of distinct engines and workers stops at the limits; /v2/engines
// answers in bounded pages; the registry stays small.
func TestAttackRegistryFlood(t *testing.T) {
	r := startRegistry(t, "--max-engines", "64", "--max-workers", "512", "--max-workers-per-engine", "16", "--max-response-bytes", "65536")
	base := sampleResources(t, r.cmd.Process.Pid, r.url("/metrics"))
	long := strings.Repeat("x", 40<<10)
	var (
		mu           sync.Mutex
		sent, ok, no int
		wg           sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := range 250 {
				n := w*250 + i
				body := regJSON(fmt.Sprintf("flood-%d", n), n%100, n%20, 0, fmt.Sprintf("tcp://10.1.%d.%d:1", n/256, n%256), "")
				if n%25 == 0 {
					body = regJSON("long-"+long, n, 0, 0, "tcp://10.0.0.1:1", "")
				}
				code, _ := r.do(t, "POST", "/register", body)
				mu.Lock()
				sent++
				if code == 200 {
					ok++
				} else {
					no++
				}
				mu.Unlock()
			}
		})
	}
	testwait.Wait(t, &wg, "the flood of registrations")
	pages, seen, first := 0, 0, ""
	for offset := 0; ; pages++ {
		code, b := r.do(t, "GET", fmt.Sprintf("/v2/engines?offset=%d", offset), "")
		var v struct {
			Engines []struct {
				ID string `json:"engine_id"`
			} `json:"engines"`
			Next *int `json:"next_offset"`
		}
		if err := json.Unmarshal(b, &v); code != 200 || err != nil || len(b) > 65536 {
			t.Fatalf("/v2/engines page %d: %d %v, %d bytes", pages, code, err, len(b))
		}
		seen += len(v.Engines)
		if first == "" && len(v.Engines) > 0 {
			first = v.Engines[0].ID
		}
		if v.Next == nil {
			break
		}
		offset = *v.Next
	}
	if seen > 64 || no == 0 {
		t.Errorf("%d engines held after %d registrations (%d refused); limit 64", seen, sent, no)
	}
	// Make room for the check below.
	if code, b := r.do(t, "DELETE", "/v2/engines/"+first, ""); code != 200 {
		t.Fatalf("DELETE %s: %d %s", first, code, b)
	}
	r.checkServes(t, liveAddr(t))
	after := settle(t, r.cmd.Process.Pid, r.url("/metrics"), base, 10*time.Second, 64<<20, 8, 20)
	t.Logf("flood: %d accepted, %d refused, %d engines over %d pages", ok, no, seen, pages+1)
	attackReport(t, "registry-flood", sent, no, base, after)
}

// 50 registrations for one dp rank race against a dead holder, all at
// addresses nobody listens on. A 400 used to claim that a dead engine "still
// answers"; each registrant now probes whoever holds the rank when it
// retries, so no refusal says so.
func TestAttackRegistryRacingTakeover(t *testing.T) {
	r := startRegistry(t)
	base := sampleResources(t, r.cmd.Process.Pid, r.url("/metrics"))
	if code, b := r.do(t, "POST", "/register", regJSON("holder", 0, 0, 0, "tcp://"+deadAddr(t), "")); code != 200 {
		t.Fatalf("holder: %d %s", code, b)
	}
	const n = 50
	var (
		mu                sync.Mutex
		ok, refused, lies int
		wg                sync.WaitGroup
	)
	for i := range n {
		addr := deadAddr(t)
		wg.Go(func() {
			code, b := r.do(t, "POST", "/register", regJSON(fmt.Sprintf("racer-%d", i), 0, 0, 0, "tcp://"+addr, ""))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case code == 200:
				ok++
			case code == 400:
				refused++
				if strings.Contains(string(b), "still answers") {
					lies++
				}
			default:
				t.Errorf("racer %d: %d %s", i, code, b)
			}
		})
	}
	testwait.Wait(t, &wg, "the racing registrants")
	if lies != 0 {
		t.Errorf("%d of %d refusals claim a dead engine still answers (%d accepted)", lies, refused, ok)
	}
	r.checkServes(t, liveAddr(t))
	after := settle(t, r.cmd.Process.Pid, r.url("/metrics"), base, 10*time.Second, 64<<20, 8, 20)
	t.Logf("racing takeover: %d accepted, %d refused honestly", ok, refused)
	attackReport(t, "registry-racing-takeover", n, lies, base, after)
}

// Thousands of registrations with --snapshot: each appends a small record
// instead of rewriting the file, and a restart brings every engine back.
func TestAttackRegistrySnapshotChurn(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "registry.json")
	r := startRegistry(t, "--snapshot", snap)
	base := sampleResources(t, r.cmd.Process.Pid, r.url("/metrics"))
	live := liveAddr(t)
	const n = 2000
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				if code, _ := r.do(t, "POST", "/register", regJSON(fmt.Sprintf("churn-%d", i), i%1000, 0, 0, "tcp://"+live, "")); code != 200 {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		})
	}
	testwait.Wait(t, &wg, "the churn of registrations")
	// An engine is published once a liveness probe saw its worker answer; under
	// load the probes of 2,000 registrations take a while, so wait for every dp
	// rank (1,000) before taking the state the restart must bring back.
	var want []byte
	eventually(t, 30*time.Second, "every dp rank published before the restart", func() bool {
		_, want = r.do(t, "GET", "/query", "")
		var q map[string]any
		return json.Unmarshal(want, &q) == nil && len(q) == n/2
	})
	written := metricValue(t, r.url("/metrics"), "switchyard_registry_snapshot_bytes_total")
	after := settle(t, r.cmd.Process.Pid, r.url("/metrics"), base, 10*time.Second, 64<<20, 8, 20)
	t.Logf("snapshot churn: %d registrations wrote %.0f bytes", n, written)
	attackReport(t, "registry-snapshot-churn", n, failed, base, after)
	r.stop(syscall.SIGTERM, 10*time.Second)

	r2 := startRegistry(t, "--snapshot", snap)
	var got []byte
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, got = r2.do(t, "GET", "/query", "")
		if string(got) == string(want) {
			break
		}
		if time.Now().After(deadline) {
			i := firstDiff(want, got)
			t.Fatalf("not every engine back after the restart: want %d bytes, got %d; first difference at %d: want %q got %q",
				len(want), len(got), i, want[max(0, i-200):min(len(want), i+200)], got[max(0, i-200):min(len(got), i+200)])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// serve's embedded registry takes a token for its mutations: DELETE and
// drain used to be open to anyone who could reach it.
func TestAttackRegistryEmbeddedAdmin(t *testing.T) {
	s := startServe(t, "--bootstrap-address", "127.0.0.1:0", "--bootstrap-token", "s3cret")
	addr := s.waitLog("bootstrap registry serving", 5*time.Second)["address"].(string)
	r := &registry{proc: s.proc, addr: addr}
	base := sampleResources(t, s.cmd.Process.Pid, s.url("/metrics"))
	if code, b := r.do(t, "POST", "/register", regJSON("E", 0, 0, 0, "tcp://"+liveAddr(t), "")); code != 200 {
		t.Fatalf("register: %d %s", code, b)
	}
	refused := 0
	const n = 300
	for i := range n {
		method, path := "DELETE", "/v2/engines/E"
		if i%2 == 1 {
			method, path = "POST", "/v2/engines/E/drain"
		}
		hdr := []string{}
		if i%3 == 2 {
			hdr = []string{"Authorization", "Bearer wrong"}
		}
		if code, _ := r.do(t, method, path, "", hdr...); code == 401 {
			refused++
		}
	}
	if refused != n {
		t.Errorf("%d of %d unauthenticated admin calls refused", refused, n)
	}
	if code, b := r.do(t, "GET", "/v2/engines/E", ""); code != 200 || !strings.Contains(string(b), `"current":true`) {
		t.Fatalf("engine after the attack: %d %s", code, b)
	}
	if code, _ := r.do(t, "DELETE", "/v2/engines/E", "", "Authorization", "Bearer s3cret"); code != 200 {
		t.Errorf("DELETE with the token: %d", code)
	}
	if code, _ := s.get(t, "/health"); code != 200 {
		t.Errorf("/health %d", code)
	}
	after := settle(t, s.cmd.Process.Pid, s.url("/metrics"), base, 10*time.Second, 64<<20, 8, 20)
	attackReport(t, "registry-embedded-admin", n, n-refused, base, after)
}

// metricValue reads one unlabelled sample from a /metrics page.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := httpc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	t.Fatalf("%s not in %s", name, url)
	return 0
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
