package bootstrap

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// fakeWorker is a real TCP listener standing in for a vLLM worker's ZeroMQ
// ROUTER; the TCP prober connects to it.
func fakeWorker(t *testing.T) (addr string, stop func()) {
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
	var once sync.Once
	stop = func() { once.Do(func() { ln.Close(); testwait.Recv(t, done, "the fake worker's accept loop") }) }
	t.Cleanup(stop)
	return "tcp://" + ln.Addr().String(), stop
}

func httpDo(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := testwait.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeLifecycle runs the real listener on port 0, the real TCP prober
// and graceful shutdown.
func TestServeLifecycle(t *testing.T) {
	logs := &safeWriter{w: &bytes.Buffer{}}
	cfg := testConfig()
	cfg.Address = "0.0.0.0:0"
	cfg.ProbeInterval = time.Hour // the first sweep runs at start; others are called by hand
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.retryGap = 0
	if s.Addr() != nil {
		t.Fatal("Addr before Listen")
	}
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	if a2, _ := s.Listen(); a2.String() != addr.String() {
		t.Fatal("second Listen rebound")
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	base := "http://127.0.0.1:" + portOf(addr)

	w0, stop0 := fakeWorker(t)
	if code, body := httpDo(t, "POST", base+"/register", regBody("A", 0, 0, 0, w0)); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	if _, body := httpDo(t, "GET", base+"/query", ""); !strings.Contains(body, w0) {
		t.Fatalf("query %s", body)
	}
	// Kill the worker: FailureThreshold sweeps later the engine is hidden.
	stop0()
	for range cfg.FailureThreshold {
		s.sweep(ctx)
	}
	if _, body := httpDo(t, "GET", base+"/query", ""); body != `{}` {
		t.Fatalf("dead engine still published: %s", body)
	}
	// A live conflicting holder is probed over real TCP and kept.
	w1, _ := fakeWorker(t)
	httpDo(t, "POST", base+"/register", regBody("B", 1, 0, 0, w1))
	w2, _ := fakeWorker(t)
	code, body := httpDo(t, "POST", base+"/register", regBody("C", 1, 0, 0, w2))
	if code != 400 || !strings.Contains(body, "Engine ID mismatch for dp_rank=1: expected B, got C") {
		t.Fatalf("live conflict: %d %s", code, body)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if !strings.Contains(logs.String(), "non-loopback") {
		t.Errorf("no warning for 0.0.0.0: %s", logs.String())
	}
}

func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := testConfig()
	cfg.Address = ln.Addr().String()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "bootstrap: listen") {
		t.Fatalf("Serve on a busy port: %v", err)
	}
}

// TestSnapshotAcrossRestart: vLLM never re-registers, so a registry restart
// must bring back its engines, but only once a probe shows them alive.
func TestSnapshotAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "registry.json")
	cfg := testConfig()
	cfg.SnapshotPath = path
	p := newFakeProber("10.0.0.1:5000", "10.0.0.1:5001")
	s1, _ := newTestServer(t, cfg, p)
	do(t, s1.Handler(), "POST", "/register", regBody("A", 0, 0, 0, "tcp://10.0.0.1:5000"))
	do(t, s1.Handler(), "POST", "/register", regBody("A", 0, 1, 0, "tcp://10.0.0.1:5001"))
	do(t, s1.Handler(), "POST", "/register", regBody("B", 1, 0, 0, "tcp://10.0.0.2:5000"))
	_, want := do(t, s1.Handler(), "GET", "/e/A/query", "")
	if _, err := os.Stat(path + ".log"); err != nil {
		t.Fatalf("no snapshot log written: %v", err)
	}
	if m, _ := filepath.Glob(path + ".tmp-*"); len(m) != 0 {
		t.Fatalf("temp files left: %v", m)
	}

	s2, _ := newTestServer(t, cfg, p)
	if _, body := do(t, s2.Handler(), "GET", "/query", ""); body != `{}` {
		t.Fatalf("unverified engines published: %s", body)
	}
	s2.sweep(context.Background())
	if _, body := do(t, s2.Handler(), "GET", "/query", ""); body != want || !strings.Contains(body, `"0":{"engine_id":"A"`) {
		t.Fatalf("after probe: %s, want %s", body, want)
	}
	// B (10.0.0.2 is down) is not published, and its replacement is
	// accepted right away.
	if code, body := do(t, s2.Handler(), "POST", "/register", regBody("B2", 1, 0, 0, "tcp://10.0.0.3:5000")); code != 200 {
		t.Fatalf("replacement: %d %s", code, body)
	}

	if err := os.WriteFile(path, []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newServer(cfg, NewRegistry(cfg.Policy()), p, time.Now); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}

func TestNewHandlerStandalone(t *testing.T) {
	h := NewHandler(NewRegistry(Policy{Settle: 0}), newFakeProber(), nil)
	if code, body := do(t, h, "POST", "/register", regBody("E", 0, 0, 0, "tcp://10.0.0.1:1")); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if _, body := do(t, h, "GET", "/query", ""); !strings.Contains(body, `"E"`) {
		t.Fatalf("query %s", body)
	}
}

func portOf(a net.Addr) string {
	_, p, _ := net.SplitHostPort(a.String())
	return p
}

// safeWriter lets the server's goroutines and the test share a buffer.
type safeWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *safeWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *safeWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(*bytes.Buffer).String()
}
