package bootstrap

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func regSizes(id string, dp, tp, pp int, addr string, tpSize, ppSize int) string {
	return fmt.Sprintf(`{"engine_id":%q,"dp_rank":%d,"tp_rank":%d,"pp_rank":%d,"addr":%q,"tp_size":%d,"pp_size":%d}`,
		id, dp, tp, pp, addr, tpSize, ppSize)
}

// TestHugeTopologyRefused: one unauthenticated /register claiming a huge
// topology used to make /v2/engines build one "missing" entry per slot (the
// 1e9 x 1e9 case killed the process); now it is refused, and what is held
// stays small.
func TestHugeTopologyRefused(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	h := s.Handler()
	for _, tt := range []struct {
		name string
		body string
	}{
		{"tp_size 1e9 x pp_size 1e9", `{"engine_id":"X","dp_rank":0,"tp_rank":0,"pp_rank":0,"addr":"tcp://10.0.0.1:1","tp_size":1000000000,"pp_size":1000000000}`},
		{"tp_size over the limit", regSizes("X", 0, 0, 0, "tcp://10.0.0.1:1", 1<<20, 1)},
		{"product over the limit", regSizes("X", 0, 0, 0, "tcp://10.0.0.1:1", 64, 64)},
		{"tp_rank over the limit", regBody("X", 0, 5000, 0, "tcp://10.0.0.1:1")},
		{"pp_rank over the limit", regBody("X", 0, 0, 5000, "tcp://10.0.0.1:1")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(t, h, "POST", "/register", tt.body)
			if code != 400 || !strings.Contains(body, "--max-workers-per-engine") {
				t.Fatalf("%d %s, want 400 naming the limit", code, body)
			}
		})
	}
	// Within the limit, an incomplete engine lists a bounded "missing".
	if code, body := do(t, h, "POST", "/register", regSizes("Y", 0, 0, 0, "tcp://10.0.0.1:1", 32, 32)); code != 200 {
		t.Fatalf("32 x 32: %d %s", code, body)
	}
	code, body := do(t, h, "GET", "/v2/engines", "")
	var v struct {
		Engines []EngineInfo `json:"engines"`
	}
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil || len(v.Engines) != 1 {
		t.Fatalf("/v2/engines %d %v %.200s", code, err, body)
	}
	if e := v.Engines[0]; len(e.Missing) != maxMissingListed || e.MissingCount != 32*32-1 || len(body) > 16<<10 {
		t.Fatalf("missing %d listed, count %d, body %d bytes", len(e.Missing), e.MissingCount, len(body))
	}
}

func TestLongStringsRefused(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	long := strings.Repeat("x", 100<<10/2)
	for _, body := range []string{
		regBody(long, 0, 0, 0, "tcp://10.0.0.1:1"),
		regBody("E", 0, 0, 0, "tcp://"+long[:1000]+":1"),
	} {
		if code, got := do(t, s.Handler(), "POST", "/register", body); code != 422 && code != 413 {
			t.Fatalf("%d %.200s", code, got)
		}
	}
}

// TestEngineAndWorkerLimits: MaxEngines bounds current engines, MaxWorkers
// the workers held in all; retired history is forgotten first to make room.
func TestEngineAndWorkerLimits(t *testing.T) {
	cfg := testConfig()
	cfg.MaxEngines = 3
	cfg.MaxWorkersPerEngine = 2
	cfg.MaxWorkers = 4
	s, _ := newTestServer(t, cfg, newFakeProber())
	h := s.Handler()
	mustCode := func(want int, body string) {
		t.Helper()
		if code, got := do(t, h, "POST", "/register", body); code != want {
			t.Fatalf("%s: %d %s, want %d", body, code, got, want)
		}
	}
	mustCode(200, regBody("A", 0, 0, 0, "tcp://10.0.0.1:1"))
	mustCode(200, regBody("A", 0, 1, 0, "tcp://10.0.0.1:2"))
	mustCode(400, regBody("A", 0, 1, 1, "tcp://10.0.0.1:3")) // 3rd worker of A
	mustCode(200, regBody("B", 1, 0, 0, "tcp://10.0.0.2:1"))
	mustCode(200, regBody("C", 2, 0, 0, "tcp://10.0.0.3:1"))
	mustCode(400, regBody("D", 3, 0, 0, "tcp://10.0.0.4:1")) // 4th engine
	mustCode(400, regBody("B", 1, 1, 0, "tcp://10.0.0.2:2")) // 5th worker
	if code, body := do(t, h, "DELETE", "/v2/engines/A", ""); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	// A's two workers are history now, forgotten to make room.
	mustCode(200, regBody("D", 3, 0, 0, "tcp://10.0.0.4:1"))
	mustCode(200, regBody("B", 1, 1, 0, "tcp://10.0.0.2:2"))
	s.mu.Lock()
	n := s.reg.totalWorkers()
	s.mu.Unlock()
	if n != 4 {
		t.Fatalf("%d workers held, want 4", n)
	}
}

// TestEnginesPaged: /v2/engines answers in pages of at most
// MaxResponseBytes, and following next_offset lists every engine once.
func TestEnginesPaged(t *testing.T) {
	cfg := testConfig()
	cfg.MaxResponseBytes = 64 << 10
	s, _ := newTestServer(t, cfg, newFakeProber())
	h := s.Handler()
	const n = 400
	for dp := range n {
		if code, body := do(t, h, "POST", "/register", regBody(fmt.Sprintf("E%03d", dp), dp, 0, 0, fmt.Sprintf("tcp://10.0.%d.%d:1", dp/256, dp%256))); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	seen := map[string]bool{}
	pages := 0
	for offset := 0; ; pages++ {
		code, body := do(t, h, "GET", fmt.Sprintf("/v2/engines?offset=%d", offset), "")
		var v struct {
			Engines []EngineInfo `json:"engines"`
			Total   int          `json:"total"`
			Next    *int         `json:"next_offset"`
		}
		if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil || len(body) > cfg.MaxResponseBytes {
			t.Fatalf("page at %d: %d %v, %d bytes", offset, code, err, len(body))
		}
		for _, e := range v.Engines {
			if seen[e.EngineID] {
				t.Fatalf("%s listed twice", e.EngineID)
			}
			seen[e.EngineID] = true
		}
		if v.Next == nil {
			break
		}
		offset = *v.Next
	}
	if len(seen) != n || pages < 1 {
		t.Fatalf("%d engines over %d pages, want %d over several", len(seen), pages+1, n)
	}
	if code, body := do(t, h, "GET", "/v2/engines?limit=7", ""); code != 200 || strings.Count(body, `"engine_id"`) != 7 || !strings.Contains(body, `"next_offset":7`) {
		t.Fatalf("limit=7: %d %.300s", code, body)
	}
}

// TestAdminNetworks: /v2 answers loopback only by default, and a
// non-loopback admin network needs a token.
func TestAdminNetworks(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	do(t, s.Handler(), "POST", "/register", regBody("A", 0, 0, 0, "tcp://10.0.0.1:1"))
	for _, m := range [][2]string{{"GET", "/v2/engines"}, {"GET", "/v2/engines/A"}, {"GET", "/v2/generations"}, {"DELETE", "/v2/engines/A"}, {"POST", "/v2/engines/A/drain"}} {
		if code := doFrom(t, s.Handler(), "10.9.9.9:5555", m[0], m[1], ""); code != 403 {
			t.Errorf("%s %s from 10.9.9.9: %d, want 403", m[0], m[1], code)
		}
	}
	if code := doFrom(t, s.Handler(), "10.9.9.9:5555", "GET", "/query", ""); code != 200 {
		t.Errorf("/query from 10.9.9.9: %d", code)
	}

	cfg := testConfig()
	cfg.AdminNetworks = []string{"10.0.0.0/8"}
	if _, err := newServer(cfg, NewRegistry(cfg.Policy()), newFakeProber(), nil); err == nil || !strings.Contains(err.Error(), "Token") {
		t.Fatalf("non-loopback admin network without a token: %v", err)
	}
	cfg.Token = "tok"
	s2, _ := newTestServer(t, cfg, newFakeProber())
	do(t, s2.Handler(), "POST", "/register", regBody("A", 0, 0, 0, "tcp://10.0.0.1:1"))
	if code := doFrom(t, s2.Handler(), "10.9.9.9:5555", "DELETE", "/v2/engines/A", ""); code != 401 {
		t.Errorf("DELETE without token: %d, want 401", code)
	}
	if code := doFrom(t, s2.Handler(), "10.9.9.9:5555", "DELETE", "/v2/engines/A", "", "Authorization", "Bearer tok"); code != 200 {
		t.Errorf("DELETE with token: %d, want 200", code)
	}
	if code := doFrom(t, s2.Handler(), "127.0.0.1:5555", "GET", "/v2/engines", ""); code != 403 {
		t.Errorf("loopback outside the configured networks: %d, want 403", code)
	}
}

// TestConcurrentTakeoverHints: 50 registrations for one dp rank race
// against a dead holder. Each registrant that finds a new holder probes it
// too, so no refusal claims that an engine "still answers" unless a probe
// for that registration saw it answer.
func TestConcurrentTakeoverHints(t *testing.T) {
	for _, live := range []bool{false, true} {
		t.Run(fmt.Sprintf("registrants live=%v", live), func(t *testing.T) {
			p := newFakeProber()
			s, _ := newTestServer(t, testConfig(), p)
			h := s.Handler()
			if code, _ := do(t, h, "POST", "/register", regBody("OLD", 0, 0, 0, "tcp://10.0.0.1:1")); code != 200 {
				t.Fatal("holder")
			}
			// The holder is dead (the prober does not know its address) but
			// not yet known to be.
			const n = 50
			addr := func(i int) string { return fmt.Sprintf("10.1.0.%d:7000", i) }
			for i := range n {
				p.set(addr(i), live)
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok, refused, claims := 0, 0, 0
			for i := range n {
				wg.Go(func() {
					code, body := do(t, h, "POST", "/register", regBody(fmt.Sprintf("N%02d", i), 0, 0, 0, "tcp://"+addr(i)))
					mu.Lock()
					defer mu.Unlock()
					switch code {
					case 200:
						ok++
					case 400:
						refused++
						if strings.Contains(body, "still answers") {
							claims++
						}
					default:
						t.Errorf("%d %s", code, body)
					}
				})
			}
			testwait.Wait(t, &wg, "the registrants")
			if live {
				// One wins; the others are refused, truthfully: the winner
				// answered their probes.
				if ok != 1 || refused != n-1 || claims != n-1 {
					t.Fatalf("ok %d refused %d (claiming alive %d)", ok, refused, claims)
				}
				return
			}
			if claims != 0 {
				t.Fatalf("%d refusals claim a dead engine still answers (ok %d refused %d)", claims, ok, refused)
			}
		})
	}
}

// doFrom is do from a given remote address; it returns the status.
func doFrom(t *testing.T, h http.Handler, remote, method, path, body string, hdr ...string) int {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return newRecorder(h, req).Code
}

// TestConcurrentWorkersTakeOver: the workers of one restarted engine race
// to replace its dead predecessor on their dp rank: all of them are stored
// under the new engine, whichever took the rank first.
func TestConcurrentWorkersTakeOver(t *testing.T) {
	p := newFakeProber()
	s, _ := newTestServer(t, testConfig(), p)
	h := s.Handler()
	for tp := range 8 {
		if code, _ := do(t, h, "POST", "/register", regSizes("OLD", 0, tp, 0, fmt.Sprintf("tcp://10.0.0.1:%d", 5000+tp), 8, 1)); code != 200 {
			t.Fatal("old engine")
		}
	}
	var wg sync.WaitGroup
	for tp := range 8 {
		a := fmt.Sprintf("10.0.0.2:%d", 5000+tp)
		p.set(a, true)
		wg.Go(func() {
			if code, body := do(t, h, "POST", "/register", regSizes("NEW", 0, tp, 0, "tcp://"+a, 8, 1)); code != 200 {
				t.Errorf("tp %d: %d %s", tp, code, body)
			}
		})
	}
	testwait.Wait(t, &wg, "the workers taking over")
	if _, body := do(t, h, "GET", "/query", ""); !strings.Contains(body, `"engine_id":"NEW"`) || strings.Count(body, "tcp://10.0.0.2:") != 8 {
		t.Fatalf("/query %s", body)
	}
}
