package bootstrap

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeProber answers probes from a set of live addresses, without sockets.
type fakeProber struct {
	mu    sync.Mutex
	live  map[string]bool
	calls int
}

func newFakeProber(live ...string) *fakeProber {
	p := &fakeProber{live: make(map[string]bool)}
	for _, a := range live {
		p.live[a] = true
	}
	return p
}

func (p *fakeProber) Probe(ctx context.Context, addr string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if !p.live[addr] {
		return errors.New("connection refused")
	}
	return ctx.Err()
}

func (p *fakeProber) set(addr string, live bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[addr] = live
}

// fakeClock is the server's clock in tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.Address = "127.0.0.1:0"
	cfg.Settle = 0
	return cfg
}

func newTestServer(t *testing.T, cfg Config, p Prober) (*Server, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: t0}
	s, err := newServer(cfg, NewRegistry(cfg.Policy()), p, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	s.retryGap = 0
	t.Cleanup(s.closeJournal)
	return s, clk
}

// do runs one request through h and returns the status and body.
func do(t testing.TB, h http.Handler, method, path, body string, hdr ...string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	// An operator on the registry's host: /v2 answers loopback only by default.
	req.RemoteAddr = "127.0.0.1:40000"
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

func regBody(id string, dp, tp, pp int, addr string) string {
	return `{"engine_id":"` + id + `","dp_rank":` + strconv.Itoa(dp) + `,"tp_rank":` + strconv.Itoa(tp) + `,"pp_rank":` + strconv.Itoa(pp) + `,"addr":"` + addr + `"}`
}

func newRecorder(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}
