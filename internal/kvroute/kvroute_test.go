package kvroute

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmihailenco/msgpack/v5"
	"go.uber.org/goleak"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/kvsub"
	"github.com/switchyard-llm/switchyard/kvindex"
	"github.com/switchyard-llm/switchyard/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newRouter(t *testing.T, mode Mode) (*Router, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := New(Config{Mode: mode, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return r, reg
}

func seq(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// stored is a BlockStored of the tokens in blocks of 16, hashes from h.
func stored(h uint64, parent *uint64, toks []int64) wire.KVEvent {
	e := wire.KVEvent{Kind: wire.KVBlockStored, TokenIDs: toks, BlockSize: 16}
	for i := 0; i < len(toks)/16; i++ {
		e.BlockHashes = append(e.BlockHashes, wire.KVBlockHash(h+uint64(i)))
	}
	if parent != nil {
		e.Parent, e.HasParent = wire.KVBlockHash(*parent), true
	}
	return e
}

func loads(n int) []dispatcher.Load {
	l := make([]dispatcher.Load, n)
	for i := range l {
		l[i] = dispatcher.Load{Rank: i, Ready: true}
	}
	return l
}

func req(toks []int64) *wire.EngineCoreRequest {
	return &wire.EngineCoreRequest{RequestID: "r", PromptTokenIDs: toks}
}

// Events of the GPU tier and the first group are indexed; others are counted and
// left out, and the request goes where its prefix is.
func TestSinkFiltersAndRoutes(t *testing.T) {
	r, reg := newRouter(t, Events)
	cpu := stored(100, nil, seq(0, 64))
	cpu.Medium = wire.SomeString("CPU")
	grp := stored(200, nil, seq(0, 64))
	grp.GroupIdx = wire.SomeInt(1)
	gpu := stored(300, nil, seq(0, 64))
	gpu.Medium = wire.SomeString("GPU")
	r.KVBatch(1, &wire.KVEventBatch{Events: []wire.KVEvent{cpu, grp}})
	r.KVBatch(2, &wire.KVEventBatch{Events: []wire.KVEvent{gpu, {Kind: wire.KVEventKind(99)}}})
	if r.Blocks(1) != 0 || r.Blocks(2) != 4 {
		t.Fatalf("blocks %d %d, want 0 and 4", r.Blocks(1), r.Blocks(2))
	}
	if got := r.Route(req(seq(0, 80)), loads(3), 0); got != 2 {
		t.Fatalf("routed to %d, want 2 (its cache)", got)
	}
	for ev, want := range map[string]float64{evMedium: 1, evGroup: 1, evStored: 1, evSkipped: 1} {
		rank := "1"
		if ev == evStored || ev == evSkipped {
			rank = "2"
		}
		if got := testutil.ToFloat64(r.m.events.WithLabelValues(rank, ev)); got != want {
			t.Errorf("events{rank=%s,event=%s} = %v, want %v", rank, ev, got, want)
		}
	}
	if got := testutil.ToFloat64(r.m.cachedTokens); got != 64 {
		t.Errorf("predicted cached tokens %v, want 64", got)
	}
	if n, _ := testutil.GatherAndCount(reg, "switchyard_kv_index_blocks"); n != 2 {
		t.Errorf("%d index_blocks series, want 2", n)
	}
	// A removal by vLLM's hash and a clear.
	r.KVBatch(2, &wire.KVEventBatch{Events: []wire.KVEvent{{Kind: wire.KVBlockRemoved, BlockHashes: []wire.KVBlockHash{303}}}})
	if r.Blocks(2) != 3 {
		t.Fatalf("after removal %d blocks", r.Blocks(2))
	}
	r.KVBatch(2, &wire.KVEventBatch{Events: []wire.KVEvent{{Kind: wire.KVAllBlocksCleared}}})
	if r.Blocks(2) != 0 {
		t.Fatalf("after AllBlocksCleared %d blocks", r.Blocks(2))
	}
}

// Loads whose ranks are not their indexes (a rank that never came up) still line up.
func TestRouteMapsRanks(t *testing.T) {
	r, _ := newRouter(t, Events)
	r.KVBatch(5, &wire.KVEventBatch{Events: []wire.KVEvent{stored(1, nil, seq(0, 32))}})
	l := []dispatcher.Load{{Rank: 2, Ready: true}, {Rank: 5, Ready: true}}
	if got := r.Route(req(seq(0, 40)), l, 0); got != 1 {
		t.Fatalf("index %d, want 1 (rank 5)", got)
	}
	l[1].Ready = false
	if got := r.Route(req(seq(0, 40)), l, 0); got != 0 {
		t.Fatalf("index %d, want 0: rank 5 is not ready", got)
	}
	if got := r.Route(req(nil), l, 0); got != -1 {
		t.Fatalf("an empty prompt routed to %d", got)
	}
	mm := req(seq(0, 40))
	mm.MMFeatures = wire.Raw{0x91, 0xc0}
	l[1].Ready = true
	before := testutil.ToFloat64(r.m.decisions[kvindex.ReasonNoHit])
	r.Route(mm, l, 1)
	if testutil.ToFloat64(r.m.decisions[kvindex.ReasonNoHit]) != before+1 {
		t.Fatalf("a multimodal prompt was keyed: its extra keys cannot be reproduced")
	}
}

// Prefix mode indexes what it routed.
func TestRoutedModeRemembers(t *testing.T) {
	r, _ := newRouter(t, Routed)
	r.EngineCache(0, 1000, 16)
	r.EngineCache(1, 1000, 16)
	first := r.Route(req(seq(0, 128)), loads(2), 0)
	for i := range 5 {
		if got := r.Route(req(seq(0, 128+16*i)), loads(2), uint64(i+1)); got != first {
			t.Fatalf("turn %d went to %d, not %d", i, got, first)
		}
	}
	if r.Blocks(first) == 0 {
		t.Fatal("nothing indexed in prefix mode")
	}
}

func mp(t *testing.T, v map[string]any) wire.Raw {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Where a rank's events are: flags first, else the registration, resolved with
// vLLM's offset and the handshake host for a wildcard.
func TestTargets(t *testing.T) {
	reg := map[string]any{"enable_kv_cache_events": true, "publisher": "zmq",
		"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5560", "topic": "kv"}
	info := func(raw wire.Raw) frontend.EngineInfo {
		i := frontend.EngineInfo{RemoteHost: "10.1.2.3"}
		i.Ready.KVEventsConfig = raw
		return i
	}
	for _, tt := range []struct {
		name string
		src  Sources
		rank int
		raw  map[string]any
		want kvsub.Target
		err  string
	}{
		{"registration", Sources{}, 2, reg, kvsub.Target{Endpoint: kvsub.Resolved{Addr: "tcp://10.1.2.3:5559"},
			Replay: "tcp://10.1.2.3:5562", Given: "tcp://*:5557"}, ""},
		{"flag wins", Sources{Endpoint: "tcp://*:6000"}, 1, reg, kvsub.Target{Endpoint: kvsub.Resolved{Addr: "tcp://10.1.2.3:6001"},
			Given: "tcp://*:6000"}, ""},
		{"rank exactly", Sources{Endpoint: "tcp://*:6000", ByRank: map[int]string{1: "tcp://h:7000"}, Topic: "t"}, 1, nil,
			kvsub.Target{Endpoint: kvsub.Resolved{Addr: "tcp://h:7000", Bind: true}, Topic: "t", Given: "tcp://h:7000"}, ""},
		{"older release", Sources{}, 0, nil, kvsub.Target{}, "no kv_events_config"},
		{"disabled", Sources{}, 0, map[string]any{"enable_kv_cache_events": false, "endpoint": "tcp://*:1"}, kvsub.Target{}, "false"},
		{"other publisher", Sources{}, 0, map[string]any{"enable_kv_cache_events": true, "publisher": "null", "endpoint": "tcp://*:1"}, kvsub.Target{}, "publisher"},
	} {
		e := &Edge{src: tt.src}
		var raw wire.Raw
		if tt.raw != nil {
			raw = mp(t, tt.raw)
		}
		got, err := e.target(tt.rank, info(raw))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v %v, want %+v", tt.name, got, err, tt.want)
		}
	}
}

// EngineUp clears what a rank held; EngineDown too; Close joins the subscriber.
func TestEdgeClearsOnEngineChanges(t *testing.T) {
	e, err := NewEdge(Config{}, Sources{}, kvsub.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.KVBatch(0, &wire.KVEventBatch{Events: []wire.KVEvent{stored(1, nil, seq(0, 32))}})
	e.EngineUp(0, frontend.EngineInfo{}) // no event source: routed by load, said once
	if e.Blocks(0) != 0 {
		t.Fatal("a rank that came up kept its old index")
	}
	if _, ok := e.Status(0); ok {
		t.Fatal("a rank with no source shows a status")
	}
	e.KVBatch(0, &wire.KVEventBatch{Events: []wire.KVEvent{stored(1, nil, seq(0, 32))}})
	e.EngineDown(0)
	if e.Blocks(0) != 0 {
		t.Fatal("a rank that went down kept its index")
	}
}
