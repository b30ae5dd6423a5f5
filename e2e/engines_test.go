package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// startEngine runs `switchyard mock-engine` as its own process, as a deployment runs
// `vllm serve MODEL --headless ...` per rank.
func startEngine(t *testing.T, handshake string, rank, size int) *proc {
	t.Helper()
	p := start(t, "mock-engine "+strconv.Itoa(rank), "mock-engine",
		"--handshake-address", handshake,
		"--data-parallel-rank", strconv.Itoa(rank),
		"--data-parallel-size", strconv.Itoa(size),
		"--step-ms", "2")
	return p
}

func ready(t *testing.T, s *server, rank int) bool {
	for _, e := range s.engines(t) {
		if e.Rank == rank {
			return e.Ready
		}
	}
	return false
}

// Engines in their own processes join over tcp; killing one fails only its
// requests, /v1/engines shows it dead, /health stays 200, and a restarted engine
// rejoins and takes requests again.
func TestEngineKilledAndRestarted(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2", "--engine-transport", "tcp")
	if s.handshake == "" {
		t.Fatal("serve did not log its handshake address")
	}
	startEngine(t, s.handshake, 0, 2)
	victim := startEngine(t, s.handshake, 1, 2)
	eventually(t, 20*time.Second, "both engines ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// /health is watched for the whole scenario.
	healthStop := make(chan struct{})
	healthErr := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-healthStop:
				return
			case <-tick.C:
			}
			resp, err := httpc.Get(s.url("/health"))
			if err != nil || resp.StatusCode != 200 {
				code := 0
				if resp != nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				select {
				case healthErr <- "health " + strconv.Itoa(code):
				default:
				}
				continue
			}
			resp.Body.Close()
		}
	}()

	// A long stream on rank 1 that the kill interrupts, and work on rank 0 meanwhile.
	type result struct {
		rank string
		code int
		body []byte
		err  error
	}
	results := make(chan result, 8)
	send := func(rank, body string) {
		resp, b, err := s.post(ctx, body, "X-data-parallel-rank", rank)
		r := result{rank: rank, body: b, err: err}
		if resp != nil {
			r.code = resp.StatusCode
		}
		results <- r
	}
	go send("1", `{"prompt": [1], "max_tokens": 8000, "stream": true}`)
	eventually(t, 10*time.Second, "the rank-1 stream in flight", func() bool {
		for _, e := range s.engines(t) {
			if e.Rank == 1 && e.InFlight > 0 {
				return true
			}
		}
		return false
	})
	if code := victim.stop(syscall.SIGKILL, 10*time.Second); code == 0 {
		t.Errorf("killed engine exited 0")
	}
	r := testwait.Recv(t, results, "the rank-1 stream to end after its engine was killed")
	if r.err != nil || r.code != 200 {
		t.Fatalf("rank-1 stream: %v %d %s", r.err, r.code, r.body)
	}
	folded := foldStream(t, r.body)
	if folded.finish[0] != "error" || len(folded.errors) == 0 || !folded.done {
		t.Errorf("rank-1 stream after the kill: finish %q errors %q done %v", folded.finish[0], folded.errors, folded.done)
	}
	eventually(t, 10*time.Second, "rank 1 shown dead", func() bool {
		for _, e := range s.engines(t) {
			if e.Rank == 1 {
				return !e.Ready && (e.State == "dead" || e.State == "stuck")
			}
		}
		return false
	})
	// Rank 0 is untouched; unpinned requests go there; rank 1 is refused by name.
	for range 3 {
		go send("0", `{"prompt": [2], "max_tokens": 5}`)
	}
	for range 3 {
		if r := testwait.Recv(t, results, "an answer from rank 0"); r.err != nil || r.code != 200 {
			t.Errorf("rank 0 while rank 1 is dead: %v %d %s", r.err, r.code, r.body)
		}
	}
	resp, body, err := s.post(ctx, `{"prompt": [3], "max_tokens": 2}`)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-data-parallel-rank") != "0" {
		t.Errorf("unpinned while rank 1 is dead: %v %s", err, body)
	}
	resp, body, err = s.post(ctx, `{"prompt": [3]}`, "X-data-parallel-rank", "1")
	var c completion
	if err != nil || resp.StatusCode != 400 || json.Unmarshal(body, &c) != nil || c.Error.Type != "InvalidDataParallelRank" {
		t.Errorf("pinned to dead rank 1: %v %s", err, body)
	}

	// The engine restarts and rejoins.
	startEngine(t, s.handshake, 1, 2)
	eventually(t, 20*time.Second, "rank 1 rejoined", func() bool { return ready(t, s, 1) })
	resp, body, err = s.post(ctx, `{"prompt": [4], "max_tokens": 3}`, "X-data-parallel-rank", "1")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("rank 1 after rejoining: %v %s", err, body)
	}

	close(healthStop)
	testwait.Wait(t, &wg, "the /health watcher to stop")
	select {
	case e := <-healthErr:
		t.Errorf("/health was not 200 throughout: %s", e)
	default:
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("serve exit code %d after SIGTERM", code)
	}
}

// Bootstrapped: a launcher did the handshake and handed the engines one input and one
// output address; serve binds them and serves the ranks that register there.
func TestBootstrappedEngines(t *testing.T) {
	dir := t.TempDir()
	in, out := "ipc://"+dir+"/in", "ipc://"+dir+"/out"
	s := startServe(t, "--input-address", in, "--output-address", out, "--data-parallel-size", "2", "--eos-token-id", "2")
	for rank := range 2 {
		start(t, "mock-engine "+strconv.Itoa(rank), "mock-engine", "--input-address", in, "--output-address", out,
			"--data-parallel-rank", strconv.Itoa(rank), "--data-parallel-size", "2", "--step-ms", "2")
	}
	eventually(t, 20*time.Second, "both engines ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, rank := range []string{"0", "1"} {
		resp, body, err := s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 3}`, "X-data-parallel-rank", rank)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("rank %s: %v %v %s", rank, err, resp, body)
		}
		var c completion
		if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 || len(c.Choices[0].TokenIDs) != 3 {
			t.Errorf("rank %s: %s", rank, body)
		}
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM", code)
	}
}
