package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// startLockstepEngine runs one rank of a mock MoE group: it steps only while
// every rank sharing dir is alive.
func startLockstepEngine(t *testing.T, handshake, dir string, rank, size int) *proc {
	t.Helper()
	return start(t, "mock-engine "+strconv.Itoa(rank), "mock-engine",
		"--handshake-address", handshake,
		"--data-parallel-rank", strconv.Itoa(rank),
		"--data-parallel-size", strconv.Itoa(size),
		"--lockstep-dir", dir,
		"--step-ms", "2")
}

// A kill -9 of one rank of a 3-rank wave group under load: every in-flight
// request fails fast naming the broken group, new requests and /health are 503,
// /v1/engines says group_broken; the restarted rank makes the group whole and
// it serves again. Without the group handling the survivors' requests hang
// (the mock blocks them as a real collective does).
func TestLockstepGroupRankKilled(t *testing.T) {
	dir, err := os.MkdirTemp("", "ls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "3",
		"--engine-transport", "tcp", "--enable-wave-coordination")
	for r := range 3 {
		if r == 1 {
			continue
		}
		startLockstepEngine(t, s.handshake, dir, r, 3)
	}
	victim := startLockstepEngine(t, s.handshake, dir, 1, 3)
	eventually(t, 20*time.Second, "three ranks ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) && ready(t, s, 2) })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for r := range 3 {
		resp, body, err := s.post(ctx, `{"prompt": [1, 2], "max_tokens": 4}`, "X-data-parallel-rank", strconv.Itoa(r))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("rank %d before the kill: %v %s", r, err, body)
		}
	}

	// Load: long requests (8000 tokens at 2 ms a step) on every rank, streaming
	// and not.
	type result struct {
		rank   int
		stream bool
		code   int
		body   []byte
		err    error
		at     time.Time
	}
	const perRank = 4
	results := make(chan result, 3*perRank)
	var wg sync.WaitGroup
	for r := range 3 {
		for i := range perRank {
			stream := i%2 == 0
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"prompt": [%d, %d], "max_tokens": 8000, "stream": %v}`, r+1, i+1, stream)
				resp, b, err := s.post(ctx, body, "X-data-parallel-rank", strconv.Itoa(r))
				res := result{rank: r, stream: stream, body: b, err: err, at: time.Now()}
				if resp != nil {
					res.code = resp.StatusCode
				}
				results <- res
			}()
		}
	}
	eventually(t, 10*time.Second, "every request in flight", func() bool {
		n := int64(0)
		for _, e := range s.engines(t) {
			n += e.InFlight
		}
		return n == 3*perRank
	})
	killed := time.Now()
	if code := victim.stop(syscall.SIGKILL, 10*time.Second); code == 0 {
		t.Errorf("killed engine exited 0")
	}
	var slowest time.Duration
	for range 3 * perRank {
		var r result
		select {
		case r = <-results:
		case <-time.After(10 * time.Second):
			t.Fatalf("requests still hanging 10 s after the kill")
		}
		if d := r.at.Sub(killed); d > slowest {
			slowest = d
		}
		want := "lockstep group of 3 ranks is broken: rank 1 died"
		if r.rank == 1 {
			want = "rank 1" // its own requests name their dead engine
		}
		var msg string
		switch {
		case r.err != nil:
			t.Errorf("rank %d: %v", r.rank, r.err)
			continue
		case r.stream:
			f := foldStream(t, r.body)
			// The survivors' failure is retryable (a 503: finish "abort"); the
			// dead rank's own is an engine error.
			wantFinish := map[bool]string{true: "error", false: "abort"}[r.rank == 1]
			if r.code != 200 || f.finish[0] != wantFinish || len(f.errors) == 0 || !f.done {
				t.Errorf("rank %d stream: %d finish %q errors %q done %v", r.rank, r.code, f.finish[0], f.errors, f.done)
				continue
			}
			msg = f.errors[0]
		default:
			if r.code < 500 {
				t.Errorf("rank %d non-streaming: %d %s", r.rank, r.code, r.body)
			}
			msg = string(r.body)
		}
		if !strings.Contains(msg, want) {
			t.Errorf("rank %d: error %q does not name %q", r.rank, msg, want)
		}
	}
	testwait.Wait(t, &wg, "the request goroutines")
	t.Logf("every in-flight request of the group failed within %v of the kill", slowest.Round(time.Millisecond))
	if slowest > 5*time.Second {
		t.Errorf("slowest failure %v after the kill, want well under 5 s", slowest)
	}

	resp, body, err := s.post(ctx, `{"prompt": [9], "max_tokens": 2}`)
	if err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "lockstep group") {
		t.Errorf("new request while broken: %v %v %s", err, resp, body)
	}
	if code, body := s.get(t, "/health"); code != 503 || !strings.Contains(string(body), "rank 1 died") {
		t.Errorf("/health while broken: %d %s", code, body)
	}
	for _, e := range s.engines(t) {
		if (e.Rank != 1 && e.State != "group_broken") || e.Ready {
			t.Errorf("/v1/engines while broken: %+v", e)
		}
	}
	if !strings.Contains(s.log(), "lockstep group broken") {
		t.Error("the break was not logged")
	}

	// The rank restarts: the group is whole and the wave emulation steps again.
	startLockstepEngine(t, s.handshake, dir, 1, 3)
	eventually(t, 20*time.Second, "rank 1 rejoined", func() bool { return ready(t, s, 0) && ready(t, s, 1) && ready(t, s, 2) })
	for r := range 3 {
		resp, body, err := s.post(ctx, `{"prompt": [5, 6], "max_tokens": 20}`, "X-data-parallel-rank", strconv.Itoa(r))
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("rank %d after the group healed: %v %s", r, err, body)
		}
	}
	if code, body := s.get(t, "/health"); code != 200 {
		t.Errorf("/health after healing: %d %s", code, body)
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("serve exit code %d after SIGTERM", code)
	}
}
