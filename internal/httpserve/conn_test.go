package httpserve

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/servertest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// net/http's own error answers (malformed request, headers too large) are JSON in
// the API's error shape; they were text/plain.
func TestStdlibErrorsAreJSON(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := newConnLimiter(ln, 100)
	srv := &http.Server{Handler: http.NotFoundHandler(), ConnState: lim.ConnState, MaxHeaderBytes: 4 << 10}
	go srv.Serve(lim)
	t.Cleanup(func() { srv.Close() })
	for _, tt := range []struct {
		req  string
		code int
	}{
		{"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 64<<10) + "\r\n\r\n", 431},
		{"GET / HTTP/1.1\r\nHost: x\r\nbad header\r\n\r\n", 400},
		{"NONSENSE\r\n\r\n", 400},
	} {
		ans := servertest.RawRequest(t, ln.Addr().String(), tt.req, false)
		head, body, _ := strings.Cut(ans, "\r\n\r\n")
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if !strings.HasPrefix(head, fmt.Sprintf("HTTP/1.1 %d", tt.code)) || !strings.Contains(head, "application/json") ||
			json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != tt.code || e.Error.Message == "" {
			t.Errorf("%.40q: %q", tt.req, ans)
		}
	}
}

// At the connection cap, idle connections make room for a new one (so /health
// answers while thousands of idle connections are open); with every connection in
// a request, a new one gets a 503 JSON answer and is closed.
func TestConnectionCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := newConnLimiter(ln, 3)
	release := make(chan struct{})
	srv := &http.Server{ConnState: lim.ConnState, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			select {
			case <-release:
			case <-r.Context().Done(): // the server closed at the end of the test
			}
		}
		io.WriteString(w, "ok")
	})}
	go srv.Serve(lim)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	var idle []net.Conn
	for range 10 { // idle connections, never sending a request
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	if ans := servertest.RawRequest(t, addr, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false); !strings.HasPrefix(ans, "HTTP/1.1 200") {
		t.Fatalf("with 10 idle connections over a cap of 3: %q", ans)
	}
	// Three requests in progress fill the cap; a fourth connection is refused.
	// They start one after another: a new connection that has not sent its
	// request yet is idle, and the next one's arrival may rightly close it.
	held := make(chan string, 3)
	for k := 1; k <= 3; k++ {
		go func() {
			held <- servertest.RawRequest(t, addr, "GET /hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false)
		}()
		deadline := time.Now().Add(5 * time.Second)
		for {
			lim.mu.Lock()
			busy := lim.open - lim.idle.Len()
			lim.mu.Unlock()
			if busy == k {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d connections in a request, want %d", busy, k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	ans := servertest.RawRequest(t, addr, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n", false)
	if !strings.HasPrefix(ans, "HTTP/1.1 503") || !strings.Contains(ans, "Retry-After: 1") || !strings.Contains(ans, `"code":503`) {
		t.Errorf("over the cap with every connection busy: %q", ans)
	}
	close(release)
	for range 3 {
		if ans := testwait.Recv(t, held, "a held request's answer"); !strings.HasPrefix(ans, "HTTP/1.1 200") {
			t.Errorf("held request: %q", ans)
		}
	}
	if lim.refused.Load() != 1 || lim.evicted.Load() == 0 {
		t.Errorf("refused %d evicted %d", lim.refused.Load(), lim.evicted.Load())
	}
}

// --max-connections is lowered to what the open-file limit leaves after the
// reserve and the client protocol's cap.
func TestFitConnections(t *testing.T) {
	if got := fitConnections(1<<30, 1024, slog.New(slog.DiscardHandler)); got >= 1<<30 {
		t.Errorf("fitConnections(2^30) = %d: not lowered to the file limit", got)
	}
	if got := fitConnections(10, 0, slog.New(slog.DiscardHandler)); got != 10 {
		t.Errorf("fitConnections(10) = %d", got)
	}
}
