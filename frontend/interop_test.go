package frontend

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// pyEngineLayout runs testdata/py_engine.py speaking the built-in layout called
// layout; the returned channel gets its exit error.
func pyEngineLayout(t *testing.T, hs string, rank, dieAfter int, layout string) <-chan error {
	t.Helper()
	return pyEngineFile(t, hs, rank, dieAfter, "../wire/layouts/"+layout+".json")
}

// pyEngineFile is pyEngineLayout with the layout file's path.
func pyEngineFile(t *testing.T, hs string, rank, dieAfter int, path string) <-chan error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, pytest.Find(t, "zmq", "msgpack"), "testdata/py_engine.py", hs, fmt.Sprint(rank), fmt.Sprint(dieAfter), path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cancel()
		testwait.Closed(t, exited, "the python engine to exit")
	})
	return done
}

// libzmq engines (pyzmq, with ZMTP heartbeats on: every 10 ms on the output PUSH,
// whose step messages are multipart with 300 B and 70 KiB aux frames, so PINGs land
// between frames) complete requests through switchyard over tcp and ipc; one dies
// with the sentinel and only it goes down. The engines speak each vLLM release's wire
// layout in turn.
func TestInteropPythonEngines(t *testing.T) {
	for _, name := range wire.LayoutNames() {
		t.Run(name, func(t *testing.T) { interopPythonEngines(t, name) })
	}
}

func interopPythonEngines(t *testing.T, layout string) {
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		aux := &auxChecker{recorder: rec}
		f := startFrontend(t, testConfig(t, tr, 2), aux)
		pyEngineLayout(t, f.HandshakeAddress(), 0, 0, layout)
		dying := pyEngineLayout(t, f.HandshakeAddress(), 1, 40, layout)
		waitReady(t, f, 2)
		info := f.Engines()[0]
		if info.Layout == nil || info.Layout.Name != layout || !info.Ready.Empty && info.Ready.MaxModelLen.Value != 2048 {
			t.Fatalf("placed on %v (%s), registration %+v", info.Layout, info.LayoutHow, info.Ready)
		}
		ids := sendAllLayout(t, f, 0, 3, 60, "py", info.Layout) // 60 steps of 5 ms: longer than the heartbeat timeout
		sendAllLayout(t, f, 1, 1, 1000, "py", info.Layout)
		rec.waitFor(t, "rank 0 finished, rank 1 dead", func() bool {
			return rec.allFinished(ids) && len(rec.downs[1]) == 1
		})
		rec.mu.Lock()
		for _, id := range ids {
			want := make([]int64, 60)
			for i := range want {
				want[i] = 1000 + int64(i)
			}
			if !slices.Equal(rec.tokens[id], want) || rec.finished[id] != wire.FinishLength {
				t.Errorf("%s: %v %v", id, rec.tokens[id], rec.finished[id])
			}
		}
		if err := rec.downs[1][0]; !errors.Is(err, ErrEngineCoreDead) {
			t.Errorf("rank 1 down with %v", err)
		}
		if len(rec.downs[0]) != 0 {
			t.Errorf("rank 0 down: %v", rec.downs[0])
		}
		rec.mu.Unlock()
		aux.mu.Lock()
		if aux.bad != "" || aux.small == 0 || aux.large == 0 {
			t.Errorf("aux tensors: %d of 300 B, %d of 70 KiB, bad: %s", aux.small, aux.large, aux.bad)
		}
		aux.mu.Unlock()
		var exit *exec.ExitError
		if err := testwait.Recv(t, dying, "the dying engine to exit"); !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("dying engine exit: %v", err)
		}

		// Heartbeats were answered: no input or output connection ever dropped.
		got := make(chan *wire.UtilityOutput, 1)
		f.h = utilityCatcher{rec, got}
		body, _ := wire.AppendUtility(wire.GetBuffer(), 0, 42, "disconnects", nil)
		if err := f.Send(0, wire.RequestUtility, body, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case u := <-got:
			if u.CallID != 42 || string(u.Result) != "\x00" {
				t.Fatalf("disconnects reply %+v (result %x)", u, u.Result)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no utility reply")
		}
	})
}

// auxChecker checks the routed_experts tensors py_engine.py attaches to every output
// (aux frames of 300 B or 70 KiB, each filled with one byte value).
type auxChecker struct {
	*recorder
	mu           sync.Mutex
	small, large int
	bad          string
}

func (a *auxChecker) HandleOutputs(rank int, outs *wire.EngineCoreOutputs) {
	a.mu.Lock()
	for _, o := range outs.Outputs {
		x := o.RoutedExperts
		if x == nil { // releases without routed_experts carry it as pooling_output
			x = o.PoolingOutput
		}
		switch {
		case x == nil || x.DType != "<i4" || len(x.Shape) != 1 || int64(len(x.Data)) != 4*x.Shape[0] || len(x.Data) == 0:
			a.bad = fmt.Sprintf("%s: routed_experts %+v", o.RequestID, x)
		case bytes.Count(x.Data, x.Data[:1]) != len(x.Data):
			a.bad = fmt.Sprintf("%s: routed_experts data corrupted", o.RequestID)
		case len(x.Data) == 300:
			a.small++
		case len(x.Data) == 4*17920:
			a.large++
		default:
			a.bad = fmt.Sprintf("%s: routed_experts of %d bytes", o.RequestID, len(x.Data))
		}
	}
	a.mu.Unlock()
	a.recorder.HandleOutputs(rank, outs)
}

// Every built-in vLLM layout, spoken by a libzmq engine built from the layout's field
// names alone, all in one fleet (ranks 0-5, one release each, as in a rolling
// upgrade): each engine is placed on its own layout (v0.11 to v0.18 through UTILITY
// probes), its requests complete with exact tokens, and its aux tensors arrive intact.
func TestInteropEveryLayoutMixedFleet(t *testing.T) {
	names := wire.LayoutNames()
	forEachTransport(t, func(t *testing.T, tr string) {
		rec := newRecorder()
		aux := &auxChecker{recorder: rec}
		f := startFrontend(t, testConfig(t, tr, len(names)), aux)
		for rank, name := range names {
			pyEngineLayout(t, f.HandshakeAddress(), rank, 0, name)
		}
		waitReady(t, f, len(names))
		var ids []string
		for rank, name := range names {
			if got := f.Engines()[rank].Layout; got == nil || got.Name != name {
				t.Fatalf("rank %d placed on %v, want %s (%s)", rank, got, name, f.Engines()[rank].LayoutHow)
			}
			ids = append(ids, sendAllLayout(t, f, rank, 2, 8, "mix", f.Engines()[rank].Layout)...)
		}
		rec.waitFor(t, "every request finished", func() bool { return rec.allFinished(ids) })
		rec.mu.Lock()
		for _, id := range ids {
			want := make([]int64, 8)
			for i := range want {
				want[i] = 1000 + int64(i)
			}
			if !slices.Equal(rec.tokens[id], want) || rec.finished[id] != wire.FinishLength {
				t.Errorf("%s: %v %v", id, rec.tokens[id], rec.finished[id])
			}
		}
		for rank := range names {
			if len(rec.downs[rank]) != 0 {
				t.Errorf("rank %d down: %v", rank, rec.downs[rank])
			}
		}
		rec.mu.Unlock()
		aux.mu.Lock()
		if aux.bad != "" {
			t.Errorf("aux tensors: %s", aux.bad)
		}
		aux.mu.Unlock()
	})
}

type utilityCatcher struct {
	*recorder
	got chan *wire.UtilityOutput
}

func (u utilityCatcher) HandleOutputs(rank int, outs *wire.EngineCoreOutputs) {
	if outs.UtilityOutput != nil {
		c := *outs.UtilityOutput
		c.Result = append(wire.Raw(nil), c.Result...)
		select {
		case u.got <- &c:
		default:
		}
	}
	u.recorder.HandleOutputs(rank, outs)
}

// The other way round: switchyard's mock engine joins a libzmq frontend (pyzmq), is
// sent msgspec-shaped 17-element ADDs and a utility call, and answers them.
func TestInteropMockEngineWithPythonFrontend(t *testing.T) {
	forEachTransport(t, func(t *testing.T, tr string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, pytest.Find(t, "zmq", "msgpack"), "testdata/py_frontend.py", tr, t.TempDir())
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait() // ctx kills it within 30 s
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() {
			t.Fatal("no handshake address from the python frontend")
		}
		mctx, mcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- mockengine.Run(mctx, mockConfig(lines.Text(), 0, 1)) }()
		defer func() {
			mcancel()
			if err := testwait.Recv(t, done, "the mock engine to stop"); err != nil {
				t.Errorf("mock engine: %v", err)
			}
		}()
		if !lines.Scan() {
			t.Fatal("no result from the python frontend")
		}
		var res struct {
			Tokens      map[string][]int64
			Finish      map[string]int
			Utility     []any
			Stats       bool
			Rank        int
			MaxModelLen int `json:"max_model_len"`
		}
		if err := json.Unmarshal(lines.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"py-a", "py-b"} {
			want := expectedTokens(id, 6)
			if i := slices.Index(want, 2); i >= 0 { // EOS 2 cannot occur: tokens are >= 100
				t.Fatalf("unexpected EOS in %v", want)
			}
			if !slices.Equal(res.Tokens[id], want) || res.Finish[id] != int(wire.FinishLength) {
				t.Errorf("%s: tokens %v finish %d, want %v", id, res.Tokens[id], res.Finish[id], want)
			}
		}
		if fmt.Sprint(res.Utility) != "[7 <nil> [<nil> false]]" || !res.Stats || res.Rank != 0 || res.MaxModelLen != 8192 {
			t.Errorf("result %+v", res)
		}
	})
}
