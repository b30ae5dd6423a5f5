package e2e

// Readers that never read: a streaming client with a tiny receive window that
// sends a long completion and reads nothing. Before every write had a deadline,
// each one held its handler blocked in Write, its --max-concurrent-requests slot
// and its buffers for ever, long after the dispatcher had aborted its requests
// as a slow consumer. With --http-write-timeout the stalled write fails, the
// connection is reset and everything it held is released.

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func TestAttackSlowSSEReaders(t *testing.T) {
	// 16 clients: each connection must take in ~8 MB (n=8 streams of 8000
	// tokens) to fill its socket buffers, which is heavy under the race detector.
	const clients, n = 16, 8
	// Room for the attack within one client's fair share of fan-outs (half).
	// One token a step, one SSE event each: a stream of 8 choices x 8000 tokens is
	// about 10 MB, more than the socket buffers hold (fewer, larger events would fit).
	tg := startTarget(t, "--http-write-timeout", "1s", "--max-concurrent-requests", strconv.Itoa(2*clients*n+64))
	dialer := net.Dialer{Timeout: testwait.Deadline, Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	body := fmt.Sprintf(`{"prompt": [1, 2, 3], "max_tokens": 8000, "n": %d, "stream": true}`, n)
	req := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var attackStart time.Time
	tg.during(t, func() {
		attackStart = time.Now()
		for range clients {
			c, err := dialer.Dial("tcp", tg.http)
			if err != nil {
				t.Fatalf("dial: %v", err)
			}
			conns = append(conns, c)
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
		// Each stream is about 10 MB (8 choices of 8000 tokens), more than the
		// kernel buffers (4 MB), so every one blocks.
		eventually(t, 90*time.Second, "every never-read stream cut off and its slots free", func() bool {
			return metricValue(t, tg.url("/metrics"), "switchyard_http_write_timeouts_total") >= clients &&
				metricValue(t, tg.url("/metrics"), "switchyard_http_request_slots_in_use") <= 4
		})
	})
	freed := time.Since(attackStart)
	// Every attacker's connection was closed by the server: reading it now ends
	// (what the kernel buffered, then a reset or EOF) instead of streaming on.
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := 0
	for _, c := range conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			var buf bytes.Buffer
			_, err := io.Copy(&buf, c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				mu.Lock()
				open++
				mu.Unlock()
			}
		})
	}
	testwait.Wait(t, &wg, "reading the attackers' connections to their end")
	if open > 0 {
		t.Errorf("%d of %d never-read connections still open after the write timeout", open, clients)
	}
	if got := metricValue(t, tg.url("/metrics"), "switchyard_http_request_slots_in_use"); got != 0 {
		t.Errorf("slots in use after the attack: %v", got)
	}
	t.Logf("slow SSE readers: %d clients (n=%d each) cut off and their slots free %v after they connected", clients, n, freed.Round(time.Millisecond))
	// RSS: 64 streams of n=8 fill their socket buffers and the heap before the
	// cut; the runtime hands that memory back late. Slots, goroutines and fds are
	// the proof that nothing is held.
	tg.finish(t, "slow-sse-readers", clients, open, 128, 8)
}
