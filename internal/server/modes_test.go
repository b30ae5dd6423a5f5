package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/pypeer"
	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// startBootstrappedEngines runs mock engines for ranks that connect straight to the
// launcher-given addresses (no handshake), as vLLM engines started by a launcher do.
func startBootstrappedEngines(t *testing.T, in, out string, size int, ranks ...int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, rank := range ranks {
		cfg := mockengine.DefaultConfig()
		cfg.HandshakeAddress = ""
		cfg.Inputs, cfg.Outputs = []string{in}, []string{out}
		cfg.Rank, cfg.DataParallelSize = rank, size
		cfg.StepInterval = time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := mockengine.Run(ctx, cfg); err != nil && ctx.Err() == nil {
				t.Errorf("mock engine %d: %v", rank, err)
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		testwait.Wait(t, &wg, "the mock engines to stop")
	})
}

// postPinned posts a completion pinned to rank and returns the status and body.
func postPinned(t *testing.T, s *Server, rank int, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+s.HTTPAddr()+"/v1/completions", strings.NewReader(body))
	req.Header.Set(httpapi.RankHeader, fmt.Sprint(rank))
	resp, err := testwait.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func waitReady(t *testing.T, s *Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.fe.WaitReady(ctx, n); err != nil {
		t.Fatalf("engines not ready: %v", err)
	}
}

// Bootstrapped: a launcher did the handshake; serve binds the given input and
// output addresses and serves ranks start..start+count-1 once they register.
func TestServeBootstrapped(t *testing.T) {
	dir := t.TempDir()
	in, out := "ipc://"+filepath.Join(dir, "in"), "ipc://"+filepath.Join(dir, "out")
	s := startServer(t, func(c *Config) {
		c.InputAddress, c.OutputAddress = in, out
		c.DataParallelSize, c.StartRank, c.LocalRanks = 3, 1, 2
		c.EOSTokenIDs = []int64{2}
	})
	startBootstrappedEngines(t, in, out, 3, 1, 2)
	waitReady(t, s, 2)
	for _, rank := range []int{1, 2} {
		if code, body := postPinned(t, s, rank, `{"prompt": [1, 2], "max_tokens": 3}`); code != 200 {
			t.Errorf("rank %d: %d %s", rank, code, body)
		}
	}
	// Rank 0 belongs to another frontend of the deployment.
	if code, body := postPinned(t, s, 0, `{"prompt": [1]}`); code != 400 || !strings.Contains(body, "InvalidDataParallelRank") {
		t.Errorf("rank 0: %d %s", code, body)
	}
}

// External coordinator: serve runs no coordinator of its own, follows the Python
// coordinator's publishes (load reaches the dispatcher, the wave is stamped) and
// sends FIRST_REQ when a request goes to engines it believes paused.
func TestServeExternalCoordinator(t *testing.T) {
	dir := t.TempDir()
	// coordinator.py is vLLM's DP coordinator's front publisher in pyzmq.
	python := pytest.Find(t, "zmq", "msgpack")
	py := pypeer.Start(t, 20*time.Second, python, "../coordinator/testdata/coordinator.py", "ipc://"+filepath.Join(dir, "coord"))
	addr := py.Await(t, "bound")["address"].(string)
	in, out := "ipc://"+filepath.Join(dir, "in"), "ipc://"+filepath.Join(dir, "out")
	s := startServer(t, func(c *Config) {
		c.InputAddress, c.OutputAddress, c.DataParallelSize = in, out, 2
		c.ExternalCoordinatorAddress = addr
		c.EnableWaves = true
	})
	if s.node != nil || s.ext == nil {
		t.Fatal("external mode runs the in-process coordinator, or no external one")
	}
	py.Await(t, "subscribed")
	startBootstrappedEngines(t, in, out, 2, 0, 1)
	waitReady(t, s, 2)

	// Load from the publishes reaches the rank policy.
	py.Send(t, map[string]any{"cmd": "publish", "counts": [][]float64{{7, 1, 0.25}, {0, 0, 0}}, "wave": 4, "running": false})
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for s.d.Engines()[0].Waiting != 7 {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the coordinator's counts never reached the dispatcher: %+v", s.d.Engines())
		}
	}
	// Engines paused at wave 4: a request for rank 1 wakes the others with FIRST_REQ.
	if code, body := postPinned(t, s, 1, `{"prompt": [1, 2], "max_tokens": 2}`); code != 200 {
		t.Fatalf("request: %d %s", code, body)
	}
	fr := py.Await(t, "first_req")
	if fr["engine"] != "0100" || fr["wave"] != float64(4) {
		t.Errorf("FIRST_REQ %v, want engine 0100 (rank 1) and wave 4", fr)
	}
}

// The engines' registered max_model_len (8192 for the built-in ones) reaches the
// dispatcher: a prompt that does not fit is a 400 naming prompt, on the HTTP API,
// and InvalidRequest on the client protocol; nothing is sent.
func TestServePromptLongerThanContext(t *testing.T) {
	s := startServer(t, nil)
	long := make([]int64, 8192)
	b, _ := json.Marshal(map[string]any{"prompt": long})
	code, body := postPinned(t, s, 0, string(b))
	var e httpapi.ErrorBody
	_ = json.Unmarshal([]byte(body), &e)
	if code != 400 || e.Error.Param == nil || *e.Error.Param != "prompt" || !strings.Contains(e.Error.Message, "8192") {
		t.Errorf("prompt of 8192 tokens: %d %s", code, body)
	}
	// Longer than every engine's context: the body is read no further than that.
	b, _ = json.Marshal(map[string]any{"prompt": make([]int64, 9000)})
	e = httpapi.ErrorBody{}
	code, body = postPinned(t, s, 0, string(b))
	_ = json.Unmarshal([]byte(body), &e)
	if code != 400 || e.Error.Param == nil || *e.Error.Param != "prompt" || !strings.Contains(e.Error.Message, "more than 8192 tokens") {
		t.Errorf("prompt of 9000 tokens: %d %s", code, body)
	}
	// A max_tokens the client set that does not fit after the prompt is a 400 in
	// vLLM's words; one it left out is capped to the room left.
	b, _ = json.Marshal(map[string]any{"prompt": long[:8190], "max_tokens": 50})
	want := "'max_tokens' or 'max_completion_tokens' is too large: 50. This model's maximum context length is 8192 tokens and your request has 8190 input tokens (50 > 8192 - 8190)."
	if code, body := postPinned(t, s, 1, string(b)); code != 400 || !strings.Contains(body, want) || !strings.Contains(body, `"param":"max_tokens"`) {
		t.Errorf("prompt of 8190 tokens, max_tokens 50: %d %s; want 400 %s", code, body, want)
	}
	b, _ = json.Marshal(map[string]any{"prompt": long[:8190]})
	if code, body := postPinned(t, s, 1, string(b)); code != 200 || !strings.Contains(body, `"completion_tokens":2`) {
		t.Errorf("prompt of 8190 tokens, no max_tokens: %d %s; want 2 tokens (the default 16 capped to the context)", code, body)
	}
}
