package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// startEngineLayout runs `switchyard mock-engine --vllm-layout layout` for rank.
func startEngineLayout(t *testing.T, handshake string, rank, size int, layout string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"mock-engine",
		"--handshake-address", handshake,
		"--data-parallel-rank", strconv.Itoa(rank),
		"--data-parallel-size", strconv.Itoa(size),
		"--step-ms", "2", "--vllm-layout", layout}, extra...)
	return start(t, "mock-engine "+strconv.Itoa(rank)+" "+filepath.Base(layout), args...)
}

// engineLayout is one rank's layout fields in /v1/engines.
type engineLayout struct {
	Rank        int    `json:"rank"`
	Ready       bool   `json:"ready"`
	State       string `json:"state"`
	Cause       string `json:"cause"`
	VLLMVersion string `json:"vllm_version"`
	Layout      string `json:"vllm_layout"`
	LayoutHow   string `json:"vllm_layout_how"`
	InFlight    int64  `json:"in_flight"`
}

func engineLayouts(t *testing.T, s *server) []engineLayout {
	t.Helper()
	code, body := s.get(t, "/v1/engines")
	if code != 200 {
		t.Fatalf("/v1/engines: %d %s", code, body)
	}
	var v struct {
		Engines []engineLayout `json:"engines"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("/v1/engines: %v: %s", err, body)
	}
	return v.Engines
}

// A rolling upgrade's worst case: six engines, one of every vLLM wire layout, in
// their own processes behind one serve. Each is placed on its own layout (v0.11 to
// v0.18 by UTILITY probes), and completions, streams, aborts and utility calls work
// on every rank through HTTP and the msgpack client protocol, with exact tokens.
func TestMixedFleetEveryLayout(t *testing.T) {
	names := wire.LayoutNames()
	n := len(names)
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", strconv.Itoa(n), "--eos-token-id", "2")
	for rank, name := range names {
		startEngineLayout(t, s.handshake, rank, n, name)
	}
	eventually(t, 30*time.Second, "every engine ready", func() bool {
		for _, e := range engineLayouts(t, s) {
			if !e.Ready {
				return false
			}
		}
		return len(engineLayouts(t, s)) == n
	})
	for _, e := range engineLayouts(t, s) {
		if e.Layout != names[e.Rank] {
			t.Fatalf("rank %d placed on %q (%s), want %s", e.Rank, e.Layout, e.LayoutHow, names[e.Rank])
		}
		t.Logf("rank %d: %s, %s", e.Rank, e.Layout, e.LayoutHow)
	}
	if !strings.Contains(s.log(), `"msg":"frontend: engine wire layout"`) {
		t.Error("the placement was not logged")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for rank := range n {
		r := strconv.Itoa(rank)
		// A completion pinned to the rank: exact tokens (the mock's tokens follow the
		// prompt, see tokensFor).
		resp, body, err := s.post(ctx, `{"prompt": [1, 2, 3], "max_tokens": 5}`, "X-data-parallel-rank", r)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("rank %d completion: %v %s", rank, err, body)
		}
		var c struct {
			ID string `json:"id"`
			completion
		}
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		if got, want := c.Choices[0].TokenIDs, tokensFor(c.ID+"-0", 5); !slices.Equal(got, want) || *c.Choices[0].FinishReason != "length" {
			t.Errorf("rank %d (%s): tokens %v finish %v, want %v", rank, names[rank], got, *c.Choices[0].FinishReason, want)
		}
		// A stream pinned to the rank.
		resp, body, err = s.post(ctx, `{"prompt": [4, 5], "max_tokens": 4, "stream": true}`, "X-data-parallel-rank", r)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("rank %d stream: %v %s", rank, err, body)
		}
		if st := foldStream(t, body); len(st.tokens[0]) != 4 || st.finish[0] != "length" || !st.done || len(st.errors) != 0 {
			t.Errorf("rank %d (%s) stream: %+v", rank, names[rank], st)
		}
		// A stream abandoned by its client: the request is aborted at the engine.
		sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, _, _ = s.post(sctx, `{"prompt": [6], "max_tokens": 100000, "stream": true}`, "X-data-parallel-rank", r)
		scancel()
	}
	eventually(t, 20*time.Second, "abandoned streams aborted on every rank", func() bool {
		for _, e := range engineLayouts(t, s) {
			if e.InFlight != 0 {
				return false
			}
		}
		return true
	})

	// The msgpack client protocol: an ADD pinned to each rank, an ABORT, and a
	// UTILITY call.
	c := dialMPClient(t, s.client)
	for rank := range n {
		c.add(t, fmt.Sprintf("mp-%d", rank), 3, rank)
	}
	got := c.collect(t, n)
	for rank := range n {
		id := fmt.Sprintf("mp-%d", rank)
		if r := got[id]; r.tokens != 3 || r.finish != wire.FinishLength || r.rank != int64(rank) {
			t.Errorf("%s: %+v", id, r)
		}
	}
	c.add(t, "mp-long", 100000, 0)
	c.abort(t, "mp-long")
	if r := c.collect(t, 1)["mp-long"]; r.finish != wire.FinishAbort {
		t.Errorf("aborted request finished with %v", r.finish)
	}
	if u := c.utility(t, 91, "is_sleeping"); u.CallID != 91 || u.Failure.Valid {
		t.Errorf("utility reply %+v", u)
	}
	for _, e := range engineLayouts(t, s) {
		if !e.Ready {
			t.Errorf("rank %d not ready after the scenario: %s", e.Rank, e.Cause)
		}
	}
}

// tokensFor is the mock engine's uninterrupted stream for the prompt [1, 2, 3] every
// request here carries (the mock's tokens follow the sequence, not the id).
func tokensFor(_ string, n int) []int64 { return mockengine.TokensFor([]int64{1, 2, 3}, n) }

// An engine that reports a vLLM version no layout covers is refused at the handshake
// with one log line and a /v1/engines entry naming its version, the known layouts
// and the two ways forward, and is sent no ADD; the other engine keeps serving. The
// same engine is placed once a layout file for its release is loaded.
func TestUnknownVersionRefusedThenPlacedByFile(t *testing.T) {
	file := writeLayoutFile(t, "v0.21", "0.33.0", true)
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "2", "--eos-token-id", "2")
	startEngineLayout(t, s.handshake, 0, 2, "newest")
	refused := startEngineLayout(t, s.handshake, 1, 2, file, "--log-level", "debug")
	eventually(t, 30*time.Second, "rank 0 ready, rank 1 refused", func() bool {
		es := engineLayouts(t, s)
		return len(es) == 2 && es[0].Ready && es[1].State == "dead"
	})
	e := engineLayouts(t, s)[1]
	for _, want := range []string{"0.33.0", "known layouts: v0.11", "newest (>=0.22.0,<0.27.0)", "vllm-layout-script", "--vllm-layout NAME"} {
		if !strings.Contains(e.Cause, want) {
			t.Errorf("/v1/engines cause %q does not say %q", e.Cause, want)
		}
	}
	if e.VLLMVersion != "0.33.0" {
		t.Errorf("/v1/engines vllm_version %q", e.VLLMVersion)
	}
	if n := strings.Count(s.log(), "its vLLM wire layout cannot be placed"); n != 1 {
		t.Errorf("%d refusal log lines, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 4 {
		if resp, body, err := s.post(ctx, `{"prompt": [1], "max_tokens": 2}`); err != nil || resp.StatusCode != 200 {
			t.Fatalf("completion while rank 1 is refused: %v %s", err, body)
		}
	}
	if resp, _, err := s.post(ctx, `{"prompt": [1], "max_tokens": 2}`, "X-data-parallel-rank", "1"); err != nil || resp.StatusCode == 200 {
		t.Errorf("a request pinned to the refused rank was served")
	}
	if strings.Contains(refused.log(), `"type":0`) {
		t.Errorf("the refused engine received an ADD:\n%s", refused.log())
	}

	// With the layout file for its release, the same engine is placed and serves.
	s2 := startServe(t, "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "1", "--eos-token-id", "2", "--vllm-layout", file)
	startEngineLayout(t, s2.handshake, 0, 1, file)
	eventually(t, 30*time.Second, "the file's engine ready", func() bool {
		es := engineLayouts(t, s2)
		return len(es) == 1 && es[0].Ready
	})
	if e := engineLayouts(t, s2)[0]; !strings.Contains(e.Layout, filepath.Base(file)) || e.VLLMVersion != "0.33.0" {
		t.Errorf("placed on %q (%s)", e.Layout, e.LayoutHow)
	}
	if resp, body, err := s2.post(ctx, `{"prompt": [1, 2], "max_tokens": 3}`); err != nil || resp.StatusCode != 200 {
		t.Fatalf("completion on the file's layout: %v %s", err, body)
	}
}

// writeLayoutFile writes a layout file as vllm-layout-script would for the release
// of a fixture (testdata of the wire package: its struct fields, in order), reporting
// version. withVersion false writes a file for engines that report none.
func writeLayoutFile(t *testing.T, fixture, version string, withVersion bool) string {
	t.Helper()
	base := wire.BuiltinLayout(fixture)
	f := map[string]any{
		"format": 1, "name": "vllm-" + version, "vllm_version": version,
		"ready":           map[string]any{"required": []string{}, "absent": []string{}},
		"probe":           map[string]any{"has": base.ProbeHas, "lacks": base.ProbeLacks},
		"finish_reasons":  []string{"STOP", "LENGTH", "ABORT", "ERROR", "REPETITION"}[:base.FinishReasons],
		"sampling_params": base.SamplingKeys,
	}
	reg := append([]string(nil), base.Registration...)
	if withVersion {
		reg = append(reg, "vllm_version")
	}
	if base.RegistrationEmpty {
		f["registration"] = nil
	} else {
		f["registration"] = reg
	}
	fields := func(fs []wire.Field, required int) []any {
		var out []any
		for i, fl := range fs {
			if i < required {
				out = append(out, map[string]any{"name": fl.Name})
			} else {
				out = append(out, map[string]any{"name": fl.Name, "default": "c0"})
			}
		}
		return out
	}
	f["structs"] = map[string]any{
		"EngineCoreRequest": map[string]any{"fields": fields(base.Request, base.RequestRequired)},
		"EngineCoreOutput":  map[string]any{"fields": fields(base.Output, len(base.Output))},
	}
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "vllm-"+version+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mpClient speaks the msgpack client protocol over a Go DEALER.
type mpClient struct {
	sock transport.Socket
}

type mpResult struct {
	tokens int
	finish wire.FinishReason
	rank   int64
}

func dialMPClient(t *testing.T, addr string) *mpClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sock, err := transport.ZMQ.Dial(ctx, transport.Dealer, addr, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	return &mpClient{sock: sock}
}

func (c *mpClient) add(t *testing.T, id string, maxTokens int64, rank int) {
	t.Helper()
	p := wire.DefaultSamplingParams()
	p.MaxTokens = wire.SomeInt(maxTokens)
	p.IgnoreEOS = true
	req := wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1, 2}, Sampling: &p, DataParallelRank: wire.SomeInt(int64(rank))}
	body, _, err := wire.AppendAdd(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.sock.Send([]byte{wire.RequestAdd}, body); err != nil {
		t.Fatal(err)
	}
}

func (c *mpClient) abort(t *testing.T, id string) {
	t.Helper()
	if err := c.sock.Send([]byte{wire.RequestAbort}, wire.AppendAbort(nil, []string{id})); err != nil {
		t.Fatal(err)
	}
}

// recv reads one EngineCoreOutputs (an error map fails the test).
func (c *mpClient) recv(t *testing.T) *wire.EngineCoreOutputs {
	t.Helper()
	type res struct {
		f   [][]byte
		err error
	}
	ch := make(chan res, 1)
	go func() { f, err := c.sock.Recv(); ch <- res{f, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatal(r.err)
		}
		var o wire.EngineCoreOutputs
		if err := wire.DecodeOutputs(r.f, &o); err != nil {
			t.Fatalf("client protocol message %x: %v", r.f[0], err)
		}
		return &o
	case <-time.After(20 * time.Second):
		t.Fatal("no message from the client protocol")
		return nil
	}
}

// collect reads until n requests finished.
func (c *mpClient) collect(t *testing.T, n int) map[string]mpResult {
	t.Helper()
	got := map[string]mpResult{}
	done := 0
	for done < n {
		o := c.recv(t)
		for _, e := range o.Outputs {
			r := got[e.RequestID]
			r.tokens += len(e.NewTokenIDs)
			r.rank = o.EngineIndex
			if e.Finished() {
				r.finish = e.FinishReason
				done++
			}
			got[e.RequestID] = r
		}
	}
	return got
}

func (c *mpClient) utility(t *testing.T, callID uint64, method string) *wire.UtilityOutput {
	t.Helper()
	body, err := wire.AppendUtility(nil, 0, callID, method, wire.Raw{0x90})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.sock.Send([]byte{wire.RequestUtility}, body); err != nil {
		t.Fatal(err)
	}
	for {
		if o := c.recv(t); o.UtilityOutput != nil {
			return o.UtilityOutput
		}
	}
}
