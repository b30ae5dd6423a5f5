package frontend

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a Handler that keeps everything it is told and wakes waiters.
type recorder struct {
	mu       sync.Mutex
	tokens   map[string][]int64
	finished map[string]wire.FinishReason
	byRank   map[string]int
	ups      map[int]int
	downs    map[int][]error
	stats    map[int]int64 // last step_counter per rank
	changed  chan struct{}
}

func newRecorder() *recorder {
	return &recorder{
		tokens: map[string][]int64{}, finished: map[string]wire.FinishReason{}, byRank: map[string]int{},
		ups: map[int]int{}, downs: map[int][]error{}, stats: map[int]int64{}, changed: make(chan struct{}),
	}
}

func (r *recorder) wake() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) HandleOutputs(rank int, outs *wire.EngineCoreOutputs) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if int(outs.EngineIndex) != rank {
		panic(fmt.Sprintf("output of engine_index %d delivered as rank %d", outs.EngineIndex, rank))
	}
	for _, o := range outs.Outputs {
		r.tokens[o.RequestID] = append(r.tokens[o.RequestID], o.NewTokenIDs...)
		r.byRank[o.RequestID] = rank
		if o.Finished() {
			r.finished[o.RequestID] = o.FinishReason
		}
	}
	if outs.SchedulerStats != nil {
		r.stats[rank] = outs.SchedulerStats.StepCounter
	}
	r.wake()
}

func (r *recorder) EngineUp(rank int, info EngineInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ups[rank]++
	r.wake()
}

func (r *recorder) EngineDown(rank int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.downs[rank] = append(r.downs[rank], err)
	r.wake()
}

// waitFor blocks until cond (evaluated under the recorder's lock) holds.
func (r *recorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ok := cond()
		ch := r.changed
		r.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// forEachTransport runs body with the per-engine sockets over ipc and over tcp.
func forEachTransport(t *testing.T, body func(t *testing.T, engineTransport string)) {
	for _, tr := range []string{"ipc", "tcp"} {
		t.Run(tr, func(t *testing.T) { body(t, tr) })
	}
}

func testConfig(t *testing.T, engineTransport string, dp int) Config {
	cfg := DefaultConfig()
	cfg.EngineTransport = engineTransport
	cfg.IPCDir = t.TempDir()
	cfg.DataParallelSize = dp
	cfg.StuckAfter = 2 * time.Second
	cfg.PhaseTimeout = 10 * time.Second
	return cfg
}

// startFrontend starts a frontend closed at cleanup.
func startFrontend(t *testing.T, cfg Config, h Handler) *Frontend {
	t.Helper()
	f, err := New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// mock runs one mock engine until the test ends or it exits; the returned channel
// gets its result.
type mockRun struct {
	cancel context.CancelFunc
	done   chan error
}

func startMock(t *testing.T, cfg mockengine.Config) *mockRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &mockRun{cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mockengine.Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		testwait.Recv(t, m.done, "the mock engine to stop")
	})
	return m
}

func mockConfig(hs string, rank, dp int) mockengine.Config {
	c := mockengine.DefaultConfig()
	c.HandshakeAddress = hs
	c.Rank = rank
	c.DataParallelSize = dp
	c.StepInterval = 2 * time.Millisecond
	return c
}

func waitReady(t *testing.T, f *Frontend, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.WaitReady(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// addBody encodes an ADD into a pool buffer, as the dispatcher does.
func addBody(t testing.TB, id string, maxTokens int64, mut func(*wire.SamplingParams)) []byte {
	return addBodyLayout(t, wire.Native(), id, maxTokens, mut)
}

// addBodyLayout is addBody encoded in layout l, with an EOS id (which older layouts
// carry at EngineCoreRequest.eos_token_id).
func addBodyLayout(t testing.TB, l *wire.Layout, id string, maxTokens int64, mut func(*wire.SamplingParams)) []byte {
	sp := wire.DefaultSamplingParams()
	sp.SetEOS(wire.SomeInt(2))
	sp.MaxTokens = wire.SomeInt(maxTokens)
	if mut != nil {
		mut(&sp)
	}
	req := wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp, ArrivalTime: 1767225600.25}
	body, aux, err := l.AppendAdd(wire.GetBuffer(), &req)
	if err != nil || aux != nil {
		t.Fatalf("encoding ADD: %v", err)
	}
	return body
}

// expectedTokens is the mock engine's uninterrupted stream for the prompt [1, 2, 3] every
// request here carries (the mock's tokens follow the sequence, not the id).
func expectedTokens(_ string, n int) []int64 { return mockengine.TokensFor([]int64{1, 2, 3}, n) }

func errIs[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

var _ = filepath.Join
var _ transport.Network = transport.ZMQ

// waitFor polls Engines until cond holds (20 s at most).
func waitFor(t *testing.T, f *Frontend, what string, cond func([]EngineInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond(f.Engines()) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %+v", what, f.Engines())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
