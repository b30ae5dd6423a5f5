package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// startServer runs a whole server in-process on free ports with built-in engines.
func startServer(t *testing.T, mutate func(*Config)) *Server {
	t.Helper()
	cfg := DefaultConfig()
	cfg.HTTPAddress = "127.0.0.1:0"
	cfg.ClientAddress = "tcp://127.0.0.1:0"
	cfg.MockStep = time.Millisecond
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func TestServeEmbeddedDefault(t *testing.T) {
	s := startServer(t, nil)
	base := "http://" + s.HTTPAddr()
	resp, err := testwait.HTTPClient.Get(base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/health %d right after Start", resp.StatusCode)
	}
	// Pin each rank once: every built-in engine answers.
	for _, rank := range []string{"0", "1"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(`{"prompt": [1, 2, 3], "max_tokens": 4}`))
		req.Header.Set(httpapi.RankHeader, rank)
		resp, err := testwait.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got httpapi.CompletionResponse
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(got.Choices) != 1 || len(got.Choices[0].TokenIDs) != 4 {
			t.Fatalf("rank %s: %d %+v (%v)", rank, resp.StatusCode, got, err)
		}
		if resp.Header.Get(httpapi.RankHeader) != rank {
			t.Errorf("answered by rank %q, want %s", resp.Header.Get(httpapi.RankHeader), rank)
		}
	}
	resp, err = testwait.HTTPClient.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{
		"switchyard_requests_total", "switchyard_dispatch_latency_seconds",
		"switchyard_http_requests_total",
	} {
		if !strings.Contains(string(b), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// In-flight requests that outlive --shutdown-timeout are aborted with a reason, and
// Shutdown still returns cleanly.
func TestServeShutdownAbortsStragglers(t *testing.T) {
	cfg := DefaultConfig()
	cfg.HTTPAddress = "127.0.0.1:0"
	cfg.ClientAddress = ""
	cfg.MockEngines = 1
	cfg.MockStep = 20 * time.Millisecond
	cfg.ShutdownTimeout = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		code int
		body string
	}
	res := make(chan result, 1)
	go func() {
		resp, err := testwait.HTTPClient.Post("http://"+s.HTTPAddr()+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt": [1], "max_tokens": 8000}`))
		if err != nil {
			res <- result{0, err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, string(b)}
	}()
	for s.Dispatcher().InFlight() == 0 {
		select {
		case r := <-res:
			t.Fatalf("request ended before shutdown: %+v", r)
		case <-time.After(time.Millisecond):
		case <-ctx.Done():
			t.Fatal("request never became in flight")
		}
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	r := testwait.Recv(t, res, "the straggler's answer")
	if r.code != http.StatusServiceUnavailable || !strings.Contains(r.body, "shutting down") {
		t.Errorf("straggler got %d %s; want 503 naming the shutdown", r.code, r.body)
	}
}

// MoE-style lockstep: with waves on, requests to either rank complete and the
// coordinator's wave advances.
func TestServeWaves(t *testing.T) {
	s := startServer(t, func(c *Config) { c.EnableWaves = true })
	for _, rank := range []string{"0", "1", "0"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/v1/completions", strings.NewReader(`{"prompt": [1], "max_tokens": 3}`))
		req.Header.Set(httpapi.RankHeader, rank)
		resp, err := testwait.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"finish_reason":"length"`) {
			t.Fatalf("rank %s: %d %s", rank, resp.StatusCode, b)
		}
	}
}

// lockedBuffer collects a logger's output across goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Real engines without an EOS run every request to max_tokens: serve says so at
// start, loudly, and not when an EOS is configured.
func TestServeWarnsWithoutEOS(t *testing.T) {
	for _, eos := range [][]int64{nil, {2, 3}} {
		var logs lockedBuffer
		startServer(t, func(c *Config) {
			c.HandshakeAddress = "tcp://127.0.0.1:0"
			c.EOSTokenIDs = eos
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		warned := strings.Contains(logs.String(), "level=WARN msg=\"no --eos-token-id")
		if warned != (eos == nil) {
			t.Errorf("eos %v: warned %v; log:\n%s", eos, warned, logs.String())
		}
	}
}
