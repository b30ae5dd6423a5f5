package e2e

// The standing attack suite, HTTP side. Each attack runs against its own
// serve process with lowered limits, bounded in count and time, on loopback only;
// a well-behaved client runs beside it and must lose nothing; afterwards the
// process must still serve and its RSS, fds and goroutines come back near the
// baseline (attack_harness_test.go). Run: go test ./e2e -run Attack -v

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// target is a serve process under attack.
type target struct {
	*server
	pid  int
	base resources
	auth []string // header pair for --api-key, if any
}

// startTarget starts serve with args, warms it up (so lazily built state is in the
// baseline) and samples the baseline.
func startTarget(t *testing.T, args ...string) *target {
	t.Helper()
	s := startServe(t, append([]string{"--step-ms", "2"}, args...)...)
	tg := &target{server: s, pid: s.cmd.Process.Pid}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--api-key" {
			tg.auth = []string{"Authorization", "Bearer " + args[i+1]}
		}
	}
	if sent, failed := tg.wellBehaved(t, 8, 4); failed > 0 {
		t.Fatalf("warm-up: %d of %d failed", failed, sent)
	}
	tg.base = sampleResources(t, tg.pid, tg.url("/metrics"))
	return tg
}

// wellBehaved sends n small completions, conc at a time, and counts failures
// (anything but a 200 with every token).
func (tg *target) wellBehaved(t *testing.T, n, conc int) (sent, failed int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var bad atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			body := `{"prompt": [1, 2, 3], "max_tokens": 3}`
			if i%2 == 1 {
				body = `{"prompt": [1, 2, 3], "max_tokens": 3, "stream": true}`
			}
			resp, b, err := tg.post(ctx, body, tg.auth...)
			if err != nil || resp.StatusCode != 200 || strings.Count(string(b), "token_ids") == 0 {
				bad.Add(1)
				t.Logf("well-behaved request failed: %v %v %.200s", err, resp, b)
			}
		}()
	}
	testwait.Wait(t, &wg, "the well-behaved requests")
	return n, int(bad.Load())
}

// rssSlack is how far above the baseline RSS may stay after an attack: mib MiB,
// four times that when the binary is built with -race (its shadow memory grows
// with every allocation and is not given back).
func rssSlack(mib int64) int64 {
	if slices.Contains(buildFlags, "-race") {
		return 4 * mib << 20
	}
	return mib << 20
}

// finish asserts the target still serves and settles, then reports the figures.
func (tg *target) finish(t *testing.T, name string, sent, failed int, rssMiB int64, fdSlack int) {
	t.Helper()
	if code, body := tg.get(t, "/health"); code != 200 {
		t.Errorf("/health after the attack: %d %s", code, body)
	}
	if s, f := tg.wellBehaved(t, 20, 4); f > 0 {
		t.Errorf("after the attack %d of %d well-behaved requests failed", f, s)
	}
	after := settle(t, tg.pid, tg.url("/metrics"), tg.base, 20*time.Second, rssSlack(rssMiB), fdSlack, 25)
	attackReport(t, name, sent, failed, tg.base, after)
}

// during runs the well-behaved client while attack runs, and fails the test if it
// lost anything.
func (tg *target) during(t *testing.T, attack func()) {
	t.Helper()
	done := make(chan [2]int, 1)
	go func() {
		s, f := tg.wellBehaved(t, 40, 4)
		done <- [2]int{s, f}
	}()
	attack()
	if r := testwait.Recv(t, done, "the well-behaved client during the attack"); r[1] > 0 {
		t.Errorf("during the attack %d of %d well-behaved requests failed", r[1], r[0])
	}
}

// raw sends req on a new connection and returns the answer (empty on error).
func raw(addr, req string, d time.Duration) string {
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, req); err != nil {
		return ""
	}
	b, _ := io.ReadAll(bufio.NewReader(c))
	return string(b)
}

// Malformed and mistyped JSON (the attacks that held, kept holding), deep nesting,
// case-variant field names and Go-type probes: every one is a 4xx in the JSON error
// shape that names no Go type, and nothing reaches an engine.
func TestAttackBadJSON(t *testing.T) {
	tg := startTarget(t)
	bodies := []string{
		`{"prompt": [1, 2`, `{"prompt": [1], "max_tokens": "4"}`, `[]`, `"x"`, `null`, `{"prompt": {"text": 1}}`, `{"prompt": ["text", [1]]}`,
		`{"prompt": [1.5]}`, `{"prompt": [-1]}`, `{"prompt": [[1], []]}`, `{"prompt": [1]} trailing`,
		`{"prompt": [1], "n": 100000}`, `{"prompt": [1], "stream_options": 7, "stream": true}`,
		`{"prompt": [1], "x": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`,
		`{"prompt": [1], "MAX_TOKENS": 0, "max_tokens": 0}`, `{"prompt": [99999999999999999999]}`,
		`{"prompt": [1], "cache_salt": ""}`, `{"prompt": [1], "temperature": 1e999}`, "\x00\x01\x02",
	}
	var sent, failed atomic.Int64
	tg.during(t, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 40 {
					body := bodies[(w*40+i)%len(bodies)]
					resp, b, err := tg.post(ctx, body)
					sent.Add(1)
					var e completion
					if err != nil || resp.StatusCode < 400 || resp.StatusCode >= 500 || json.Unmarshal(b, &e) != nil || e.Error == nil ||
						strings.Contains(e.Error.Message, "Go value") || strings.Contains(e.Error.Message, "server.") {
						failed.Add(1)
						t.Errorf("%.60q: %v %v %.200s", body, err, resp, b)
					}
				}
			}()
		}
		testwait.Wait(t, &wg, "the bad-JSON senders")
	})
	// Refusals are the expected answer; "failed" counts answers of the wrong shape.
	tg.finish(t, "bad-json", int(sent.Load()), int(failed.Load()), 64, 8)
}

// endless is a chunked body of token ids that goes on for limit bytes.
type endless struct{ left int }

func (e *endless) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	n := 0
	if e.left == 32<<20 {
		n = copy(p, `{"prompt": [`)
	}
	for n < len(p)-1 && n < e.left {
		p[n], p[n+1] = '7', ','
		n += 2
	}
	e.left -= n
	return n, nil
}

// Oversized bodies: six 32 MiB chunked prompts at once (16.7 M ids each; they cost
// ~380 MB and 30 s of CPU each before, and RSS went to 2.3 GB; now the read stops
// at the largest context an engine registered, 8,192 ids here), six absurd
// Content-Lengths with Expect: 100-continue (answered 100 Continue before), and
// oversized headers. Each is refused early; memory comes back.
func TestAttackOversizedBodies(t *testing.T) {
	tg := startTarget(t)
	var sent, failed atomic.Int64
	tg.during(t, func() {
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(3)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest(http.MethodPost, tg.url("/v1/completions"), io.NopCloser(&endless{left: 32 << 20}))
				req.ContentLength = -1 // chunked
				resp, err := httpc.Do(req)
				sent.Add(1)
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 400 && strings.Contains(string(b), "more than") {
						return
					}
					t.Errorf("32 MiB chunked prompt: %d %.200s", resp.StatusCode, b)
				} else {
					t.Logf("32 MiB chunked prompt: %v (the server closed after refusing)", err)
					return
				}
				failed.Add(1)
			}()
			go func() {
				defer wg.Done()
				ans := raw(tg.http, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
					"Content-Length: 1000000000000\r\nExpect: 100-continue\r\n\r\n", 10*time.Second)
				sent.Add(1)
				if strings.Contains(ans, "100 Continue") || !strings.HasPrefix(ans, "HTTP/1.1 413") {
					failed.Add(1)
					t.Errorf("absurd Content-Length: %.200q", ans)
				}
			}()
			go func() {
				defer wg.Done()
				ans := raw(tg.http, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("h", 256<<10)+"\r\n\r\n", 10*time.Second)
				sent.Add(1)
				if !strings.HasPrefix(ans, "HTTP/1.1 431") || !strings.Contains(ans, `"code":431`) {
					failed.Add(1)
					t.Errorf("256 KiB header: %.200q", ans)
				}
			}()
		}
		testwait.Wait(t, &wg, "the oversized requests")
	})
	tg.finish(t, "oversized-bodies", int(sent.Load()), int(failed.Load()), 64, 8)
}

// Slowloris on headers and drip-fed bodies (chunked, never finished): with the
// header and body timeouts lowered to 1 s, every such connection is answered or
// closed within them, /health answers throughout, and fds come back.
func TestAttackSlowClients(t *testing.T) {
	tg := startTarget(t, "--http-header-timeout", "1s", "--http-body-timeout", "1s")
	const n = 300
	var sent, failed atomic.Int64
	tg.during(t, func() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.DialTimeout("tcp", tg.http, testwait.Deadline)
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				defer c.Close()
				sent.Add(1)
				start := time.Now()
				_ = c.SetDeadline(start.Add(15 * time.Second))
				head := "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
				if i%2 == 0 {
					head += "Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n"
				}
				if _, err := io.WriteString(c, head); err != nil {
					return
				}
				// Drip a byte of header or a chunk of whitespace until the server gives up.
				go func() {
					for range 100 {
						drip := "X"
						if i%2 == 0 {
							drip = "1\r\n \r\n"
						}
						if _, err := io.WriteString(c, drip); err != nil {
							return
						}
						time.Sleep(100 * time.Millisecond)
					}
				}()
				b, _ := io.ReadAll(c)
				if time.Since(start) > 10*time.Second {
					failed.Add(1)
					t.Errorf("slow client %d held for %v (answer %.100q)", i, time.Since(start), b)
				} else if i%2 == 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408") {
					failed.Add(1)
					t.Errorf("drip-fed body: %.200q", b)
				}
			}()
		}
		if code, _ := tg.get(t, "/health"); code != 200 {
			t.Errorf("/health during the attack: %d", code)
		}
		testwait.Wait(t, &wg, "the slow clients")
	})
	tg.finish(t, "slow-clients", int(sent.Load()), int(failed.Load()), 64, 8)
}

// Idle connections far past --max-connections (lowered to 400): the oldest idle
// ones make room, so /health and completions are served throughout and the fds
// stay near the cap (20,200 idle connections used to exhaust the fd limit).
func TestAttackIdleConnections(t *testing.T) {
	const capConns, n = 400, 2000
	tg := startTarget(t, "--max-connections", fmt.Sprint(capConns))
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	peak := 0
	tg.during(t, func() {
		for i := range n {
			c, err := net.DialTimeout("tcp", tg.http, testwait.Deadline)
			if err != nil {
				t.Fatalf("dial %d: %v", i, err)
			}
			conns = append(conns, c)
			if i%100 == 99 {
				// Paced (2,000 a second): a flood far faster than requests are read
				// would evict a real client's connection before its request arrives.
				time.Sleep(50 * time.Millisecond)
			}
			if i%500 == 499 {
				if code, _ := tg.get(t, "/health"); code != 200 {
					t.Errorf("/health with %d idle connections: %d", i+1, code)
				}
				peak = max(peak, sampleResources(t, tg.pid, "").FDs)
			}
		}
	})
	if limit := tg.base.FDs + capConns + 16; peak > limit {
		t.Errorf("fds peaked at %d with %d idle connections; want at most %d (the cap)", peak, n, limit)
	}
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	if _, m := tg.get(t, "/metrics"); !strings.Contains(string(m), "switchyard_http_connections_evicted_total") ||
		strings.Contains(string(m), "switchyard_http_connections_evicted_total 0\n") {
		t.Errorf("no eviction counted at the cap")
	}
	tg.finish(t, "idle-connections", n, 0, 64, 8)
}

// More concurrent requests than --max-concurrent-requests (lowered to 8): the
// extras get 503 with Retry-After at once; a client that honours it loses nothing.
func TestAttackConcurrencyLimit(t *testing.T) {
	tg := startTarget(t, "--max-concurrent-requests", "8")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 60
	var refused, failed atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; ; attempt++ {
				resp, b, err := tg.post(ctx, `{"prompt": [1], "max_tokens": 50, "stream": true}`)
				switch {
				case err == nil && resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
					refused.Add(1)
					time.Sleep(50 * time.Millisecond) // a client honouring Retry-After (shortened)
					continue
				case err != nil || resp.StatusCode != 200 || len(foldStream(t, b).tokens[0]) != 50:
					failed.Add(1)
					t.Errorf("request: %v %v %.200s", err, resp, b)
				}
				return
			}
		}()
	}
	testwait.Wait(t, &wg, "the requests over the concurrency limit")
	if refused.Load() == 0 {
		t.Error("no request was refused over --max-concurrent-requests 8")
	}
	t.Logf("refused with 503 and retried: %d", refused.Load())
	tg.finish(t, "concurrency-limit", n+int(refused.Load()), int(failed.Load()), 64, 8)
}

// Clients that disconnect mid-stream have their requests aborted: nothing stays in
// flight and the goroutines come back.
func TestAttackDisconnectMidStream(t *testing.T) {
	tg := startTarget(t)
	const n = 200
	var sent atomic.Int64
	tg.during(t, func() {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tg.url("/v1/completions"),
					strings.NewReader(`{"prompt": [1], "max_tokens": 5000, "stream": true}`))
				resp, err := httpc.Do(req)
				sent.Add(1)
				if err != nil {
					t.Errorf("stream: %v", err)
					return
				}
				_, _ = bufio.NewReader(resp.Body).ReadString('\n') // the first chunk, then hang up
				cancel()
				resp.Body.Close()
			}()
		}
		testwait.Wait(t, &wg, "the clients that hang up mid-stream")
	})
	eventually(t, 15*time.Second, "every cut stream aborted", func() bool {
		for _, e := range tg.engines(t) {
			if e.InFlight != 0 {
				return false
			}
		}
		return true
	})
	tg.finish(t, "disconnect-mid-stream", int(sent.Load()), 0, 64, 8)
}

// Guessing the API key: every wrong key is a 401 and costs nothing.
func TestAttackAPIKeyGuessing(t *testing.T) {
	tg := startTarget(t, "--api-key", "right", "--admin-token", "admin-right")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 300
	failed := 0
	for i := range n {
		resp, _, err := tg.post(ctx, `{"prompt": [1]}`, "Authorization", fmt.Sprintf("Bearer guess-%d", i))
		if err != nil || resp.StatusCode != 401 {
			failed++
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d wrong keys not answered 401", failed, n)
	}
	resp, b, err := tg.post(ctx, `{"prompt": [1], "max_tokens": 2}`, "Authorization", "bearer right")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("the right key: %v %v %s", err, resp, b)
	}
	after := settle(t, tg.pid, tg.url("/metrics"), tg.base, 20*time.Second, rssSlack(64), 8, 25)
	attackReport(t, "api-key-guessing", n, failed, tg.base, after)
}

// SIGTERM under load (it held; it must keep holding): 64 requests in flight, short
// ones finish, long ones are cut with a reason; new requests during the drain get
// a 503 JSON answer (the listener used to close at once: connection refused or a
// broken pipe); the process exits 0.
func TestAttackSIGTERMUnderLoad(t *testing.T) {
	tg := startTarget(t, "--shutdown-timeout", "2s")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 64
	type result struct {
		long bool
		code int
		err  error
	}
	results := make(chan result, n)
	for i := range n {
		long := i%2 == 0
		body := `{"prompt": [1], "max_tokens": 100, "stream": true}` // 0.2 s
		if long {
			body = `{"prompt": [1], "max_tokens": 8000}` // 16 s: cut by the 2 s drain
		}
		go func() {
			resp, _, err := tg.post(ctx, body)
			r := result{long: long, err: err}
			if resp != nil {
				r.code = resp.StatusCode
			}
			results <- r
		}()
	}
	eventually(t, 10*time.Second, "every request in flight", func() bool {
		var inflight int64
		for _, e := range tg.engines(t) {
			inflight += e.InFlight
		}
		return inflight >= n/2 // the short ones may have finished already
	})
	before := sampleResources(t, tg.pid, tg.url("/metrics"))
	_ = tg.cmd.Process.Signal(syscall.SIGTERM)
	tg.waitLog("draining", 5*time.Second)

	// New requests while the long ones drain: a 503, not a refused connection.
	late, lateBad := 0, 0
	for range 20 {
		resp, b, err := tg.post(ctx, `{"prompt": [1], "max_tokens": 1}`)
		late++
		if err != nil || resp.StatusCode != 503 || !strings.Contains(string(b), "shutting down") {
			lateBad++
			t.Errorf("request during the drain: %v %v %.200s", err, resp, b)
		}
	}
	failed := 0
	for range n {
		r := testwait.Recv(t, results, "an answer to a request in flight at SIGTERM")
		switch {
		case r.err != nil:
			failed++
			t.Errorf("in-flight request (long=%v) got no answer: %v", r.long, r.err)
		case !r.long && r.code != 200, r.long && r.code != 503:
			failed++
			t.Errorf("in-flight request (long=%v): %d", r.long, r.code)
		}
	}
	select {
	case <-tg.done:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	if code := tg.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d", code)
	}
	attackReport(t, "sigterm-under-load", n+late, failed+lateBad, tg.base, before)
}
