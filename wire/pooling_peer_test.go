package wire_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// poolingCases are pooling ADDs a frontend sends: every task with vLLM's frontend
// defaults, matryoshka dimensions, truncation and the token tasks' prefix-cache
// skip. Each release gets those its PoolingTask has.
var poolingCases = []struct {
	name string
	p    wire.PoolingParams
	want map[string]any // fields the engine must read, by vLLM's names (activation: resolved per release)
}{
	{"embed", wire.PoolingParams{Task: "embed", Activation: wire.OptBool{Value: true, Valid: true}}, map[string]any{"task": "embed"}},
	{"embed dims", wire.PoolingParams{Task: "embed", Dimensions: wire.SomeInt(64), Activation: wire.OptBool{Valid: true},
		TruncatePromptTokens: wire.SomeInt(-1)}, map[string]any{"task": "embed", "dimensions": float64(64)}},
	{"classify", wire.PoolingParams{Task: "classify", Activation: wire.OptBool{Value: true, Valid: true}}, map[string]any{"task": "classify"}},
	{"score", wire.PoolingParams{Task: "score", Activation: wire.OptBool{Value: true, Valid: true}}, map[string]any{"task": "score"}},
	{"classify pair type ids", wire.PoolingParams{Task: "classify", Activation: wire.OptBool{Value: true, Valid: true},
		CompressedTokenTypeIDs: wire.SomeInt(7)}, map[string]any{"task": "classify", "extra_kwargs": map[string]any{"compressed_token_type_ids": float64(7)}}},
	{"token_embed", wire.PoolingParams{Task: "token_embed", Activation: wire.OptBool{Value: true, Valid: true},
		SkipReadingPrefixCache: wire.OptBool{Value: true, Valid: true}}, map[string]any{"task": "token_embed", "skip_reading_prefix_cache": true}},
	{"encode", wire.PoolingParams{Task: "encode", Activation: wire.OptBool{Value: true, Valid: true}}, map[string]any{"task": "encode"}},
}

// releaseTasks are the tasks each release's PoolingTask Literal has.
var releaseTasks = map[string][]string{
	"v0.11":  {"encode", "embed", "classify", "score"},
	"v0.12":  {"embed", "classify", "score", "token_embed", "token_classify"},
	"v0.15":  {"embed", "classify", "score", "token_embed", "token_classify"},
	"v0.18":  {"embed", "classify", "score", "token_embed", "token_classify"},
	"v0.21":  {"embed", "classify", "token_embed", "token_classify"},
	"newest": {"embed", "classify", "token_embed", "token_classify"},
}

// activationKnob is the PoolingParams field that carries Activation for a task in
// each release, as vLLM's own frontend sets it (PoolingParams.verify).
func activationKnob(release, task string) string {
	switch {
	case release == "v0.11" && task == "embed":
		return "normalize"
	case release == "v0.11" && task == "encode":
		return "softmax"
	case release == "v0.11":
		return "activation"
	case (release == "v0.12" || release == "v0.15") && (task == "embed" || task == "token_embed"):
		return "normalize"
	}
	return "use_activation"
}

// A libzmq engine of each release (pyzmq, python3-msgpack, the release's
// PoolingParams annotations and PoolingTask Literal) decodes every pooling ADD
// switchyard writes for it as msgspec would, and reads the task, dimensions,
// activation knob and prefix-cache skip at the release's own positions.
func TestPoolingAddsAcceptedByEachRelease(t *testing.T) {
	py := pytest.Find(t, "zmq", "msgpack")
	for _, l := range wire.BuiltinLayouts() {
		t.Run(l.Name, func(t *testing.T) { poolingPeer(t, py, l) })
	}
}

func poolingPeer(t *testing.T, py string, l *wire.Layout) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/pooling_engine.py", "layouts/"+l.Name+".json", l.Name)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testStderr
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	next := func() map[string]any {
		if !sc.Scan() {
			t.Fatalf("python peer ended: %s", stderr.String())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("peer line %q: %v", sc.Text(), err)
		}
		return m
	}
	ep := next()["endpoint"].(string)
	push, err := transport.Dial(ctx, transport.Push, ep, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer push.Close()
	sent := 0
	for i, c := range poolingCases {
		if !contains(releaseTasks[l.Name], c.p.Task) {
			continue
		}
		p := c.p
		q := &wire.EngineCoreRequest{RequestID: fmt.Sprintf("pool-%d", i), PromptTokenIDs: []int64{1, 2, 3}, Pooling: &p, ArrivalTime: 1.5,
			ExternalReqID: wire.SomeString("pool")}
		if err := q.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		body, aux, err := l.AppendAdd(nil, q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tf, _ := wire.TypeFrame(wire.RequestAdd)
		if err := push.Send(append([][]byte{tf, body}, aux...)...); err != nil {
			t.Fatal(err)
		}
		got := next()
		if got["ok"] != true {
			t.Fatalf("%s: the %s engine refuses the ADD: %v", c.name, l.Name, got["error"])
		}
		params := got["params"].(map[string]any)
		for k, v := range c.want {
			if fmt.Sprint(params[k]) != fmt.Sprint(v) { // maps (extra_kwargs) compare by their printing
				t.Errorf("%s: %s = %v, want %v (params %v)", c.name, k, params[k], v, params)
			}
		}
		if knob := activationKnob(l.Name, c.p.Task); params[knob] != c.p.Activation.Value {
			t.Errorf("%s: %s = %v, want %v (params %v)", c.name, knob, params[knob], c.p.Activation.Value, params)
		}
		if _, both := params["use_activation"]; both && (c.p.Task == "embed" || c.p.Task == "token_embed") && params["use_activation"] != c.p.Activation.Value {
			t.Errorf("%s: use_activation = %v beside normalize, want %v", c.name, params["use_activation"], c.p.Activation.Value)
		}
		sent++
	}
	if err := push.Send([]byte("END")); err != nil {
		t.Fatal(err)
	}
	testwait.RecvWithin(t, done, 30*time.Second, "the python peer to exit")
	if sent < 4 {
		t.Fatalf("only %d cases for %s", sent, l.Name)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// testStderr collects the peer's stderr; exec's copier writes while a failing
// test may read.
type testStderr struct {
	mu sync.Mutex
	b  []byte
}

func (w *testStderr) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *testStderr) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}
