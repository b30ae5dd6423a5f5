package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// admin POSTs to an admin endpoint and returns the status and body.
func (s *server) admin(t *testing.T, path string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url(path), nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// drainView is one rank of /v1/engines with the drain fields.
type drainView struct {
	Rank     int    `json:"rank"`
	State    string `json:"state"`
	Draining bool   `json:"draining"`
	InFlight int64  `json:"in_flight"`
}

func (s *server) drainViews(t *testing.T) []drainView {
	t.Helper()
	_, b := s.get(t, "/v1/engines")
	var v struct{ Engines []drainView }
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v.Engines
}

// Drain a loaded rank: its requests finish there with 0 failures, no new one
// lands on it while it drains, /v1/engines counts it down, and undrain brings
// it back.
func TestDrainUnderLoad(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2",
		"--engine-transport", "tcp", "--admin-token", "adm")
	startEngine(t, s.handshake, 0, 2)
	startEngine(t, s.handshake, 1, 2)
	eventually(t, 20*time.Second, "both engines ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) })
	auth := []string{"Authorization", "Bearer adm"}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var drainedAt atomic.Int64 // unix ns when the drain had answered; 0 = not yet
	var undrained atomic.Bool
	var ok, failed, landedWhileDrained atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 { // steady load: 6 clients, each one request after another
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				sent := time.Now().UnixNano()
				body := fmt.Sprintf(`{"prompt": [%d, %d], "max_tokens": 100, "stream": %v}`, w+1, i+1, i%2 == 0)
				resp, b, err := s.post(ctx, body)
				if err != nil || resp.StatusCode != 200 || (i%2 == 0 && len(foldStream(t, b).errors) > 0) {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, fmt.Sprintf("%v %v %s", err, resp, b))
					mu.Unlock()
					continue
				}
				ok.Add(1)
				if d := drainedAt.Load(); d != 0 && sent > d && !undrained.Load() && resp.Header.Get("X-data-parallel-rank") == "1" {
					landedWhileDrained.Add(1)
				}
			}
		}()
	}
	eventually(t, 10*time.Second, "rank 1 loaded", func() bool {
		e := s.rankView(t, 1)
		return e.InFlight >= 2
	})
	if code, body := s.admin(t, "/v1/engines/1/drain"); code != 401 {
		t.Errorf("drain without the token: %d %s", code, body)
	}
	code, body := s.admin(t, "/v1/engines/1/drain", auth...)
	if code != 200 || !strings.Contains(body, `"state":"draining"`) {
		t.Fatalf("drain: %d %s", code, body)
	}
	// Only requests sent after the drain answered count: one sent while the
	// POST was on its way may rightly land on rank 1.
	drainedAt.Store(time.Now().UnixNano())
	var left int64
	if err := json.Unmarshal([]byte(body), &struct {
		InFlight *int64 `json:"in_flight"`
	}{&left}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "rank 1 drained", func() bool {
		e := s.rankView(t, 1)
		return e.State == "draining" && e.Draining && e.InFlight == 0
	})
	okAtDrained := ok.Load()
	eventually(t, 10*time.Second, "load goes on on rank 0", func() bool { return ok.Load() >= okAtDrained+20 })

	undrained.Store(true)
	if code, body := s.admin(t, "/v1/engines/1/undrain", auth...); code != 200 || !strings.Contains(body, `"state":"ready"`) {
		t.Errorf("undrain: %d %s", code, body)
	}
	eventually(t, 10*time.Second, "rank 1 takes requests again", func() bool {
		e := s.rankView(t, 1)
		return e.InFlight > 0
	})
	close(stop)
	testwait.Wait(t, &wg, "the load to stop")
	t.Logf("drain under load: %d requests ok, %d failed, %d in flight on rank 1 when drained, %d landed on it while draining",
		ok.Load(), failed.Load(), left, landedWhileDrained.Load())
	if failed.Load() != 0 {
		t.Errorf("%d failed requests: %q", failed.Load(), failures)
	}
	if landedWhileDrained.Load() != 0 {
		t.Errorf("%d requests sent after the drain landed on the draining rank", landedWhileDrained.Load())
	}
	if _, b := s.get(t, "/metrics"); !strings.Contains(string(b), `switchyard_engine_drains_total{action="drain"} 1`) {
		t.Error("drain not counted in /metrics")
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("serve exit code %d after SIGTERM", code)
	}
}

// The operator's upgrade of one engine with zero failed requests: under load, drain
// rank 1 with migrate=true (its in-flight requests move to rank 0 at once and go on
// streaming there), stop and restart it, undrain it. Every request finishes once with
// exactly its uninterrupted tokens.
func TestDrainMigrateAndRestartUnderLoad(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2",
		"--engine-transport", "tcp", "--admin-token", "adm")
	startEngine(t, s.handshake, 0, 2)
	victim := startEngine(t, s.handshake, 1, 2)
	eventually(t, 20*time.Second, "both engines ready", func() bool { return ready(t, s, 0) && ready(t, s, 1) })
	auth := []string{"Authorization", "Bearer adm"}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var ok, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	fail := func(msg string) {
		failed.Add(1)
		mu.Lock()
		failures = append(failures, msg)
		mu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				prompt := []int64{int64(w + 1), int64(i + 1)}
				stream := i%2 == 0
				body := fmt.Sprintf(`{"prompt": [%d, %d], "max_tokens": 60, "stream": %v}`, prompt[0], prompt[1], stream)
				resp, b, err := s.post(ctx, body)
				if err != nil || resp.StatusCode != 200 {
					fail(fmt.Sprintf("%v %v %s", err, resp, b))
					continue
				}
				var toks []int64
				if stream {
					st := foldStream(t, b)
					if len(st.errors) > 0 || !st.done {
						fail(fmt.Sprintf("stream errors %v", st.errors))
						continue
					}
					toks = st.tokens[0]
				} else {
					var c completion
					if json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 {
						fail(string(b))
						continue
					}
					toks = c.Choices[0].TokenIDs
				}
				if want := mockengine.TokensFor(prompt, 60); !slices.Equal(toks, want) {
					fail(fmt.Sprintf("prompt %v: %d tokens, not the uninterrupted sequence", prompt, len(toks)))
					continue
				}
				ok.Add(1)
			}
		}()
	}
	eventually(t, 10*time.Second, "rank 1 loaded", func() bool {
		e := s.rankView(t, 1)
		return e.InFlight >= 2
	})
	code, body := s.admin(t, "/v1/engines/1/drain?migrate=true", auth...)
	var res struct {
		Moved    int    `json:"moved"`
		Stayed   int    `json:"stayed"`
		State    string `json:"state"`
		InFlight int64  `json:"in_flight"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Moved < 1 || res.State != "draining" {
		t.Fatalf("drain?migrate=true: %d %s", code, body)
	}
	eventually(t, 5*time.Second, "rank 1 empty", func() bool {
		e := s.rankView(t, 1)
		return e.InFlight == 0
	})
	// The upgrade: stop the engine, start it again, undrain.
	if code := victim.stop(syscall.SIGTERM, 20*time.Second); code != 0 {
		t.Errorf("engine exit code %d", code)
	}
	startEngine(t, s.handshake, 1, 2)
	eventually(t, 20*time.Second, "rank 1 back", func() bool { return ready(t, s, 1) || s.rankView(t, 1).State == "draining" })
	if code, body := s.admin(t, "/v1/engines/1/undrain", auth...); code != 200 {
		t.Fatalf("undrain: %d %s", code, body)
	}
	eventually(t, 10*time.Second, "rank 1 takes requests again", func() bool {
		e := s.rankView(t, 1)
		return e.InFlight > 0
	})
	close(stop)
	testwait.Wait(t, &wg, "the load to stop")
	t.Logf("drain with migrate and restart under load: %d requests ok, %d failed, %d moved off rank 1, %d stayed",
		ok.Load(), failed.Load(), res.Moved, res.Stayed)
	if failed.Load() != 0 {
		t.Errorf("%d failed requests: %q", failed.Load(), failures)
	}
}

// rankView is rank's entry in /v1/engines (the zero view, state "", when absent).
func (s *server) rankView(t *testing.T, rank int) drainView {
	t.Helper()
	for _, e := range s.drainViews(t) {
		if e.Rank == rank {
			return e
		}
	}
	return drainView{}
}
