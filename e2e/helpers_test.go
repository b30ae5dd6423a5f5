// Package e2e starts the real switchyard binary (built once in TestMain) and drives it
// the way users and deployments do: curl-style HTTP, a Python pyzmq client, mock
// engines in their own processes, signals. Everything listens on loopback ports the
// processes pick themselves (port 0) and report in their JSON logs.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"go.uber.org/goleak"
)

var binary string // the switchyard binary under test

// buildFlags are extra `go build` flags for the binary (race_test.go adds -race).
var buildFlags []string

// httpc keeps no idle connections, so no client goroutine outlives a test (goleak),
// and gives up on a call after testwait.Deadline, as testwait.HTTPClient does.
var httpc = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testwait.Deadline}

// buildTimeout bounds the build of the binary in TestMain, which runs before go
// test's -timeout starts counting: a -race build on a loaded machine takes minutes.
const buildTimeout = 15 * time.Minute

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "switchyard")
	args := append(append([]string{"build"}, buildFlags...), "-o", binary, "./cmd/switchyard")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir = ".."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	err = build.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("no binary within %v: %w", buildTimeout, err)
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "building switchyard:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// proc is one running switchyard process with its JSON log lines collected.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error

	mu    sync.Mutex
	lines []map[string]any
	raw   bytes.Buffer
	added chan struct{} // poked on every new log line
}

// start runs `switchyard args...` with JSON logs; the process is killed at cleanup
// if it is still running.
func start(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return startEnv(t, name, nil, args...)
}

// startEnv is start with extra environment variables (KEY=VALUE).
func startEnv(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	args = append([]string{"--log-format", "json"}, args...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, name: name, cmd: cmd, done: make(chan struct{}), added: make(chan struct{}, 1)}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var m map[string]any
			_ = json.Unmarshal(sc.Bytes(), &m)
			p.mu.Lock()
			p.raw.Write(sc.Bytes())
			p.raw.WriteByte('\n')
			if m != nil {
				p.lines = append(p.lines, m)
			}
			p.mu.Unlock()
			select {
			case p.added <- struct{}{}:
			default:
			}
		}
	}()
	go func() {
		<-logsDone // Wait closes the pipe; read it all first
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			testwait.Recv(t, p.done, name+" to exit after SIGKILL and close its log")
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.log())
		}
	})
	return p
}

func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// waitLog returns the first log line whose msg is msg, waiting up to d.
func (p *proc) waitLog(msg string, d time.Duration) map[string]any {
	p.t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for seen := 0; ; {
		p.mu.Lock()
		for ; seen < len(p.lines); seen++ {
			if p.lines[seen]["msg"] == msg {
				l := p.lines[seen]
				p.mu.Unlock()
				return l
			}
		}
		p.mu.Unlock()
		select {
		case <-p.added:
		case <-p.done:
			p.t.Fatalf("%s exited (%v) before logging %q", p.name, p.err, msg)
		case <-deadline.C:
			p.t.Fatalf("%s did not log %q within %v", p.name, msg, d)
		}
	}
}

// signal sends sig and waits up to d for the exit; it returns the exit code.
func (p *proc) stop(sig syscall.Signal, d time.Duration) int {
	p.t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %v of %v", p.name, d, sig)
	}
	return p.cmd.ProcessState.ExitCode()
}

// server is a running `switchyard serve` and the addresses it logged.
type server struct {
	*proc
	http, client, handshake string
}

// serveStartWait bounds a serve's start. A text-mode serve loads a real
// model's tokenizer and chat template in a race-instrumented binary, which on
// a 2-core machine busy with other test packages has taken over 30 s.
const serveStartWait = 120 * time.Second

// startServe runs serve on free loopback ports and waits until it serves.
func startServe(t *testing.T, args ...string) *server {
	t.Helper()
	args = append([]string{"serve", "--http-address", "127.0.0.1:0", "--client-address", "tcp://127.0.0.1:0"}, args...)
	p := start(t, "serve", args...)
	s := &server{proc: p}
	line := p.waitLog("serving", serveStartWait)
	s.http = strings.TrimPrefix(line["http"].(string), "http://")
	if l := p.waitLog("client protocol listening", time.Second); l != nil {
		s.client = l["address"].(string)
	}
	p.mu.Lock()
	for _, l := range p.lines {
		if l["msg"] == "frontend: listening" {
			s.handshake, _ = l["handshake"].(string)
		}
	}
	p.mu.Unlock()
	return s
}

func (s *server) url(path string) string { return "http://" + s.http + path }

// get returns the status and body of GET path.
func (s *server) get(t *testing.T, path string) (int, []byte) {
	t.Helper()
	resp, err := httpc.Get(s.url(path))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// post sends a completion; hdr are header name/value pairs.
func (s *server) post(ctx context.Context, body string, hdr ...string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url("/v1/completions"), strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// engine is one rank as /v1/engines reports it.
type engine struct {
	Rank     int    `json:"rank"`
	Identity string `json:"identity"`
	State    string `json:"state"`
	Ready    bool   `json:"ready"`
	InFlight int64  `json:"in_flight"`
}

func (s *server) engines(t *testing.T) []engine {
	t.Helper()
	code, b := s.get(t, "/v1/engines")
	var v struct {
		Engines []engine `json:"engines"`
	}
	if err := json.Unmarshal(b, &v); code != 200 || err != nil {
		t.Fatalf("/v1/engines %d %s (%v)", code, b, err)
	}
	return v.Engines
}

// eventually polls cond every 20 ms for up to d: the processes under test change
// state on their own, so there is no signal to wait on but their answers.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

// sse splits a server-sent event body into its data payloads.
func sse(body []byte) []string {
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// completion is the subset of an answer or chunk the tests read.
type completion struct {
	Choices []struct {
		Index        int     `json:"index"`
		TokenIDs     []int64 `json:"token_ids"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *struct {
		Message        string `json:"message"`
		Type           string `json:"type"`
		ConnectedRanks []int  `json:"connected_ranks"`
	} `json:"error"`
}

// streamResult folds a stream: tokens per choice, finish reasons, errors, [DONE].
type streamResult struct {
	tokens map[int][]int64
	finish map[int]string
	errors []string
	done   bool
}

func foldStream(t *testing.T, body []byte) streamResult {
	t.Helper()
	r := streamResult{tokens: map[int][]int64{}, finish: map[int]string{}}
	for _, d := range sse(body) {
		if d == "[DONE]" {
			r.done = true
			continue
		}
		var c completion
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatalf("chunk %q: %v", d, err)
		}
		if c.Error != nil {
			r.errors = append(r.errors, c.Error.Message)
		}
		for _, ch := range c.Choices {
			r.tokens[ch.Index] = append(r.tokens[ch.Index], ch.TokenIDs...)
			if ch.FinishReason != nil {
				r.finish[ch.Index] = *ch.FinishReason
			}
		}
	}
	return r
}
