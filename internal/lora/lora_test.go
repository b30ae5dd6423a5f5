package lora

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/internal/wiretest"
	"github.com/switchyard-llm/switchyard/wire"
)

func TestParseModule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Module
		err  string
	}{
		{"sql=/loras/sql", Module{Name: "sql", Path: "/loras/sql"}, ""},
		{`{"name": "sql", "path": "/loras/a,b", "base_model_name": "m"}`, Module{"sql", "/loras/a,b", "m"}, ""},
		{`{"name": "sql"}`, Module{}, "name and path are required"},
		{`{"name": "sql", "path": "/p", "rank": 8}`, Module{}, "invalid JSON or fields"},
		{"=/p", Module{}, "want name=path"},
		{"a=b=c", Module{}, "want name=path"},
		{"nothing", Module{}, "invalid JSON"},
	} {
		got, err := ParseModule(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
}

// fakeCaller answers utility calls as engines of the given ranks would, and
// records what each was sent (decoded in the newest layout).
type fakeCaller struct {
	mu     sync.Mutex
	ranks  []int
	fail   map[int]string // rank -> failure message
	calls  []string       // "method rank arg"
	value  any            // remove_lora's result (default true)
	noLoRA *wire.Layout   // the layout of the old ranks
	old    map[int]bool   // ranks whose layout has no LoRARequest fields
}

func (f *fakeCaller) CallUtilityEach(_ context.Context, method string, ranks []int, args dispatcher.UtilityArgs) (dispatcher.UtilityResults, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := dispatcher.UtilityResults{Method: method}
	var errs []error
	for _, r := range f.ranks {
		if ranks != nil && !contains(ranks, r) {
			continue
		}
		lay := wire.Native()
		if f.old[r] {
			lay = f.noLoRA
		}
		raw, err := args(r, lay)
		if err != nil {
			x := dispatcher.UtilityResult{Rank: r, Err: &dispatcher.UtilityCallError{Method: method, Rank: r, Cause: err}}
			res.Results = append(res.Results, x)
			errs = append(errs, x.Err)
			continue
		}
		arg := ""
		if method == "add_lora" {
			lr, err := wire.Native().DecodeLoRAArgs(raw)
			if err != nil {
				return res, err
			}
			arg = lr.Name + "#" + itoa(lr.IntID) + "@" + lr.Path
		} else {
			var v []int64
			_ = msgpack.Unmarshal(raw, &v)
			arg = itoa(v[0])
		}
		f.calls = append(f.calls, method+" "+itoa(int64(r))+" "+arg)
		x := dispatcher.UtilityResult{Rank: r, Value: true}
		if method == "remove_lora" && f.value != nil {
			x.Value = f.value
		}
		if m, ok := f.fail[r]; ok {
			x = dispatcher.UtilityResult{Rank: r, Err: &dispatcher.UtilityCallError{Method: method, Rank: r, Msg: m}}
			errs = append(errs, x.Err)
		}
		res.Results = append(res.Results, x)
	}
	if len(res.Results) == 0 {
		return res, dispatcher.ErrNoEngines
	}
	return res, errors.Join(errs...)
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func (f *fakeCaller) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func TestRegistryLoadUnload(t *testing.T) {
	f := &fakeCaller{ranks: []int{0, 1}}
	r, err := New(Config{Caller: f, BaseModel: "base", Static: []Module{{Name: "a", Path: "/la", BaseModelName: "base"}, {Name: "b", Path: "/lb", BaseModelName: "other"}}})
	if err != nil {
		t.Fatal(err)
	}
	if lr, ok := r.Lookup("a"); !ok || lr.IntID != 1 || lr.BaseModelName.Value != "base" {
		t.Fatalf("static a: %+v %v", lr, ok)
	}
	if lr, ok := r.Lookup("b"); !ok || lr.IntID != 2 || lr.BaseModelName.Valid {
		t.Fatalf("static b (base_model_name not a served model: dropped, as vLLM): %+v %v", lr, ok)
	}
	msg, e := r.Load(context.Background(), LoadRequest{Name: "c", Path: "/lc"})
	if e != nil || msg != "Success: LoRA adapter 'c' added successfully." {
		t.Fatalf("load: %q %v", msg, e)
	}
	if got := f.take(); strings.Join(got, "|") != "add_lora 0 c#3@/lc|add_lora 1 c#3@/lc" {
		t.Errorf("calls %q", got)
	}
	if _, e := r.Load(context.Background(), LoadRequest{Name: "c", Path: "/lc"}); e == nil || e.Status != 400 || !strings.Contains(e.Message, "has already been loaded") {
		t.Errorf("reload: %+v", e)
	}
	if _, e := r.Load(context.Background(), LoadRequest{Name: "c", Path: "/lc2", LoadInplace: true}); e != nil {
		t.Errorf("in place: %+v", e)
	}
	if lr, _ := r.Lookup("c"); lr.IntID != 3 || lr.Path != "/lc2" {
		t.Errorf("in place keeps the id: %+v", lr)
	}
	f.take()
	if _, e := r.Load(context.Background(), LoadRequest{Name: "", Path: "/x"}); e == nil || e.Message != "Both 'lora_name' and 'lora_path' must be provided." {
		t.Errorf("empty name: %+v", e)
	}
	names := []string{}
	for _, a := range r.List() {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "a,b,c" {
		t.Errorf("list %v", names)
	}
	msg, e = r.Unload(context.Background(), UnloadRequest{Name: "c"})
	if e != nil || msg != "Success: LoRA adapter 'c' removed successfully." {
		t.Fatalf("unload: %q %v", msg, e)
	}
	if got := f.take(); strings.Join(got, "|") != "remove_lora 0 3|remove_lora 1 3" {
		t.Errorf("calls %q", got)
	}
	if _, e := r.Unload(context.Background(), UnloadRequest{Name: "c"}); e == nil || e.Status != 404 || e.Message != "The lora adapter 'c' cannot be found." {
		t.Errorf("unload again: %+v", e)
	}
}

func TestRegistryFailures(t *testing.T) {
	f := &fakeCaller{ranks: []int{0, 1}, fail: map[int]string{1: "Call to add_lora method failed: Loading lora x failed: No adapter found for /nope"}}
	r, _ := New(Config{Caller: f, BaseModel: "base"})
	_, e := r.Load(context.Background(), LoadRequest{Name: "x", Path: "/nope"})
	if e == nil || e.Status != 404 || e.Message != "Loading lora x failed: No adapter found for /nope" {
		t.Fatalf("not found: %+v", e)
	}
	// Rank 0 took it: undone there.
	if got := f.take(); strings.Join(got, "|") != "add_lora 0 x#1@/nope|add_lora 1 x#1@/nope|remove_lora 0 1" {
		t.Errorf("calls %q", got)
	}
	if _, ok := r.Lookup("x"); ok {
		t.Error("a failed load is served")
	}
	f.fail = map[int]string{1: "Call to add_lora method failed: CUDA out of memory"}
	_, e = r.Load(context.Background(), LoadRequest{Name: "y", Path: "/y"})
	if e == nil || e.Status != 500 || !strings.Contains(e.Message, "rank 1") || !strings.Contains(e.Message, "out of memory") {
		t.Fatalf("engine failure names the rank: %+v", e)
	}
	f.fail = nil
	f.take()
	if _, e := r.Load(context.Background(), LoadRequest{Name: "z", Path: "/z"}); e != nil {
		t.Fatal(e)
	}
	f.value = false // remove_lora of an id the engine does not hold
	_, e = r.Unload(context.Background(), UnloadRequest{Name: "z"})
	if e == nil || e.Status != 500 || !strings.HasPrefix(e.Message, "Failed to remove lora adapter 'z' from the engine.") {
		t.Fatalf("remove false: %+v", e)
	}
	if _, ok := r.Lookup("z"); !ok {
		t.Error("no engine removed it: still served")
	}
	f.ranks = nil
	if _, e := r.Load(context.Background(), LoadRequest{Name: "w", Path: "/w"}); e == nil || e.Status != 503 {
		t.Errorf("no engines: %+v", e)
	}
}

func TestRegistryEngineUpGetsEveryAdapter(t *testing.T) {
	f := &fakeCaller{ranks: []int{0}}
	r, _ := New(Config{Caller: f, BaseModel: "base", Static: []Module{{Name: "s", Path: "/s"}}})
	if _, e := r.Load(context.Background(), LoadRequest{Name: "d", Path: "/d"}); e != nil {
		t.Fatal(e)
	}
	f.take()
	f.mu.Lock()
	f.ranks = []int{0, 3}
	f.mu.Unlock()
	r.EngineUp(3)
	deadline := time.Now().Add(10 * time.Second)
	var got []string
	for time.Now().Before(deadline) && len(got) < 2 {
		got = append(got, f.take()...)
		time.Sleep(5 * time.Millisecond)
	}
	if strings.Join(got, "|") != "add_lora 3 s#1@/s|add_lora 3 d#2@/d" {
		t.Errorf("joining engine got %q", got)
	}
}

// blockingCaller holds every call until its context ends.
type blockingCaller struct{ started chan struct{} }

func (b *blockingCaller) CallUtilityEach(ctx context.Context, _ string, _ []int, _ dispatcher.UtilityArgs) (dispatcher.UtilityResults, error) {
	b.started <- struct{}{}
	<-ctx.Done()
	return dispatcher.UtilityResults{}, ctx.Err()
}

// Close ends a push to a joining engine that is still waiting for it and joins
// its goroutine; an engine coming up after Close is sent nothing.
func TestRegistryCloseJoinsPushes(t *testing.T) {
	b := &blockingCaller{started: make(chan struct{}, 4)}
	r, _ := New(Config{Caller: b, BaseModel: "base", Static: []Module{{Name: "s", Path: "/s"}, {Name: "t", Path: "/t"}}})
	r.EngineUp(0)
	testwait.Recv(t, b.started, "the push's first add_lora")
	testwait.Func(t, "Close", r.Close)
	r.EngineUp(1)
	r.Close()
	if len(b.started) != 0 {
		t.Fatalf("%d add_lora calls after Close", len(b.started))
	}
	var nilReg *Registry
	nilReg.Close()
}

func TestNewRefusesDuplicates(t *testing.T) {
	if _, err := New(Config{BaseModel: "m", Static: []Module{{Name: "a", Path: "/a"}, {Name: "a", Path: "/b"}}}); err == nil {
		t.Error("duplicate name accepted")
	}
	if _, err := New(Config{BaseModel: "m", Static: []Module{{Name: "m", Path: "/a"}}}); err == nil {
		t.Error("the served model's name accepted")
	}
}

func statsRaw(t *testing.T, m map[string]any) *wire.SchedulerStats {
	t.Helper()
	b, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return &wire.SchedulerStats{Raw: b}
}

func TestActivityAndGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	now := time.Unix(1000, 0)
	a, err := NewActivity(ActivityConfig{Registerer: reg, MaxLoRAs: 4, Now: func() time.Time { return now }, Recent: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	a.Observe(0, statsRaw(t, map[string]any{"num_running_reqs": 2, "running_lora_adapters": map[string]int{"b": 1, "a": 2},
		"waiting_lora_adapters": map[string]int{}}))
	a.Observe(1, statsRaw(t, map[string]any{"running_lora_adapters": map[string]int{"c": 1}, "waiting_lora_adapters": map[string]int{"a": 1}}))
	want := `
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b,c",waiting_lora_adapters="a"} 1000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm:lora_requests_info"); err != nil {
		t.Error(err)
	}
	if !a.Holds(0, "a") || !a.Holds(1, "a") || a.Holds(0, "c") || !a.Holds(1, "c") {
		t.Error("holds from stats")
	}
	// Stats without the fields (an older engine) leave what is known.
	a.Observe(1, statsRaw(t, map[string]any{"num_running_reqs": 0}))
	// A value of another shape is no error.
	a.Observe(1, statsRaw(t, map[string]any{"running_lora_adapters": []int{1}}))
	if !a.Holds(1, "c") {
		t.Error("lenient decode forgot rank 1")
	}
	a.EngineDown(1)
	now = now.Add(time.Second)
	want = `
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="4",running_lora_adapters="a,b",waiting_lora_adapters=""} 1000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm:lora_requests_info"); err != nil {
		t.Error("one series, the stale one removed:", err)
	}
	a.Sent(2, "x")
	if !a.Holds(2, "x") {
		t.Error("sent recently")
	}
	now = now.Add(2 * time.Minute)
	if a.Holds(2, "x") {
		t.Error("sent long ago")
	}
}

func TestPrefer(t *testing.T) {
	l := func(rank int, inflight int64, ready bool) dispatcher.Load {
		return dispatcher.Load{Rank: rank, Ready: ready, InFlight: inflight, Stale: true}
	}
	holds := func(ranks ...int) func(int) bool { return func(r int) bool { return contains(ranks, r) } }
	loads := []dispatcher.Load{l(0, 0, true), l(1, 3, true), l(2, 1, true), l(3, 0, false)}
	for _, c := range []struct {
		name  string
		holds func(int) bool
		slack float64
		want  int
	}{
		{"none holds it", holds(), 4, -1},
		{"the one holding it, within slack", holds(1), 4, 1},
		{"holding but too loaded", holds(1), 2, -1},
		{"least loaded of the holders", holds(1, 2), 4, 2},
		{"a holder that is not ready is never chosen", holds(3), 4, -1},
	} {
		for seq := range uint64(4) {
			if got := Prefer(loads, seq, c.slack, c.holds); got != c.want {
				t.Errorf("%s (seq %d): %d, want %d", c.name, seq, got, c.want)
			}
		}
	}
	// Ties rotate with seq.
	tie := []dispatcher.Load{l(0, 1, true), l(1, 1, true)}
	seen := map[int]bool{}
	for seq := range uint64(4) {
		seen[Prefer(tie, seq, 0, holds(0, 1))] = true
	}
	if !seen[0] || !seen[1] {
		t.Errorf("ties do not spread: %v", seen)
	}
	r := &Router{Activity: nil}
	if r.Route(&wire.EngineCoreRequest{LoRA: &wire.LoRARequest{Name: "a"}}, loads, 0) != -1 {
		t.Error("no activity: no preference")
	}
}

func TestRegistrySkipsLayoutsWithoutLoRA(t *testing.T) {
	f := &fakeCaller{ranks: []int{0, 1}, old: map[int]bool{1: true}, noLoRA: wiretest.NoLoRALayout(t)}
	r, _ := New(Config{Caller: f, BaseModel: "base"})
	if _, e := r.Load(context.Background(), LoadRequest{Name: "a", Path: "/a"}); e != nil {
		t.Fatalf("an engine without LoRA fields beside a newest one: %+v", e)
	}
	if got := f.take(); strings.Join(got, "|") != "add_lora 0 a#1@/a" {
		t.Errorf("calls %q", got)
	}
	if _, e := r.Unload(context.Background(), UnloadRequest{Name: "a"}); e != nil {
		t.Fatalf("unload: %+v", e)
	}
	if got := f.take(); strings.Join(got, "|") != "remove_lora 0 1" {
		t.Errorf("calls %q", got)
	}
	f.old[0] = true
	if _, e := r.Load(context.Background(), LoadRequest{Name: "b", Path: "/b"}); e == nil || e.Status != 500 || !strings.Contains(e.Message, "vllm-layout-script") {
		t.Errorf("only engines without LoRA fields: %+v", e)
	}
}
