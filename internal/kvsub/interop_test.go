package kvsub

// Real-peer tests: testdata/publisher.py is a pyzmq (libzmq) publisher that behaves
// as vLLM's ZmqEventPublisher (PUB, seq, replay ROUTER, ring buffer, rank offsets),
// encoding batches in the layout of one release's golden fixture, and can drop
// messages from the PUB, forget its buffer, go silent on replays and restart.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/switchyard-llm/switchyard/internal/pypeer"
	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// fixtureDir holds one golden file per vLLM release, with the shared specs outside
// the repository.
var fixtureDir = filepath.Join("..", "..", "wire", "testdata", "kv-events")

// release is one fixture file: how that release lays a batch out.
type release struct {
	Label     string   `json:"label"`
	ArrayLike bool     `json:"array_like"`
	Stored    []string `json:"block_stored_fields"`
	Removed   []string `json:"block_removed_fields"`
	Cases     []struct {
		Name       string `json:"name"`
		PayloadHex string `json:"payload_hex"`
	} `json:"cases"`
	path string
}

// loadReleases reads every release's fixture. Missing fixtures fail under CI and
// skip otherwise, as the wire package's fixture tests do.
func loadReleases(t *testing.T) []release {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if len(paths) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no KV-event fixtures in %s", fixtureDir)
		}
		t.Skipf("no KV-event fixtures in %s", fixtureDir)
	}
	var rels []release
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var r release
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		r.path = p
		rels = append(rels, r)
	}
	return rels
}

// newestRelease is the map-encoded release, the one the scenario tests use: seq
// handling does not depend on the payload's layout (TestInteropReleases covers
// every layout, replayed payloads included).
func newestRelease(t *testing.T) release {
	t.Helper()
	for _, r := range loadReleases(t) {
		if !r.ArrayLike {
			return r
		}
	}
	t.Fatal("no map-encoded (newest) release among the fixtures")
	return release{}
}

// batchSpec is one batch as a test publishes it; the publisher lays it out as its
// release does, dropping fields the release does not have. Hashes are uint64, or hex
// strings for bytes hashes.
type batchSpec struct {
	TS     float64
	Events []map[string]any
	// DP is data_parallel_rank; nil writes None. DefaultDP leaves it to the
	// publisher, which fills in its own rank as vLLM's publish() does.
	DP        *int64
	DefaultDP bool
}

func (s batchSpec) cmd(name string) map[string]any {
	evs := s.Events
	if evs == nil {
		evs = []map[string]any{}
	}
	c := map[string]any{"cmd": name, "ts": s.TS, "events": evs}
	if !s.DefaultDP {
		if s.DP == nil {
			c["dp_rank"] = nil
		} else {
			c["dp_rank"] = *s.DP
		}
	}
	return c
}

func i64(v int64) *int64 { return &v }

const h1 = uint64(0x123456789abcdef0)

var (
	bytesHash0 = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	bytesHash1 = "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
)

func tokens(from, to int64) []int64 {
	var t []int64
	for v := from; v <= to; v++ {
		t = append(t, v)
	}
	return t
}

// stored is a BlockStored of block size 4 on the GPU; set overrides fields.
func stored(hashes []any, parent any, toks []int64, set ...any) map[string]any {
	e := map[string]any{"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent,
		"token_ids": toks, "block_size": int64(4), "lora_id": nil, "medium": "GPU", "lora_name": nil}
	for i := 0; i+1 < len(set); i += 2 {
		e[set[i].(string)] = set[i+1]
	}
	return e
}

func removed(hashes []any, set ...any) map[string]any {
	e := map[string]any{"type": "BlockRemoved", "block_hashes": hashes, "medium": "GPU"}
	for i := 0; i+1 < len(set); i += 2 {
		e[set[i].(string)] = set[i+1]
	}
	return e
}

func cleared() map[string]any { return map[string]any{"type": "AllBlocksCleared"} }

// fixtureSpecs are the batches the golden fixtures encode, written out in full (a
// fixture's "what" abbreviates the later cases). Each release's publisher must
// encode them to its fixture's payload_hex byte for byte.
var fixtureSpecs = map[string]batchSpec{
	"stored_root_two_blocks": {TS: 1764000000.25, Events: []map[string]any{stored([]any{h1, uint64(42)}, nil, tokens(1, 8))}},
	"stored_child_with_rank": {TS: 1764000001.5, DP: i64(3), Events: []map[string]any{stored([]any{uint64(4611686018427387911)}, uint64(42), tokens(9, 12))}},
	"removed":                {TS: 1764000002.0, Events: []map[string]any{removed([]any{uint64(42), uint64(4611686018427387911)})}},
	"cleared":                {TS: 1764000003.0, Events: []map[string]any{cleared()}},
	"mixed_batch": {TS: 1764000004.0, DP: i64(0), Events: []map[string]any{
		stored([]any{h1}, nil, tokens(1, 4)), removed([]any{h1}), cleared(), stored([]any{uint64(42)}, nil, tokens(5, 8))}},
	"bytes_hashes": {TS: 1764000005.0, Events: []map[string]any{
		stored([]any{bytesHash0, bytesHash1}, nil, tokens(1, 8)), removed([]any{bytesHash0})}},
	"cpu_medium": {TS: 1764000006.0, Events: []map[string]any{stored([]any{h1}, nil, tokens(1, 4), "medium", "CPU")}},
	"lora": {TS: 1764000007.0, Events: []map[string]any{
		stored([]any{h1}, nil, tokens(1, 4), "lora_id", int64(7), "lora_name", "sql-adapter")}},
	"extra_keys": {TS: 1764000008.0, Events: []map[string]any{
		stored([]any{h1, uint64(42)}, nil, tokens(1, 8), "extra_keys", []any{[]string{"salt-abc"}, nil})}},
	"hybrid_group": {TS: 1764000009.0, Events: []map[string]any{
		stored([]any{h1}, nil, tokens(1, 4), "group_idx", int64(1), "kv_cache_spec_kind", "sliding_window", "kv_cache_spec_sliding_window", int64(4096)),
		removed([]any{h1}, "group_idx", int64(1))}},
}

// contentSpecs are what TestInteropReleases publishes: every fixture batch, in a
// fixed order, plus one whose rank the publisher fills in.
func contentSpecs() []batchSpec {
	names := make([]string, 0, len(fixtureSpecs))
	for n := range fixtureSpecs {
		names = append(names, n)
	}
	slices.Sort(names)
	var specs []batchSpec
	for i, n := range names {
		s := fixtureSpecs[n]
		s.TS = 1000 + float64(i)
		specs = append(specs, s)
	}
	return append(specs, batchSpec{TS: 2000, DefaultDP: true,
		Events: []map[string]any{stored([]any{uint64(7)}, h1, tokens(21, 24))}})
}

// wantBatch is what the subscriber should decode from spec published by rel's
// publisher of rank.
func wantBatch(t *testing.T, rel release, s batchSpec, rank int) wire.KVEventBatch {
	t.Helper()
	b := wire.KVEventBatch{TS: s.TS}
	switch {
	case s.DefaultDP:
		b.DataParallelRank = wire.SomeInt(int64(rank))
	case s.DP != nil:
		b.DataParallelRank = wire.SomeInt(*s.DP)
	}
	for _, ev := range s.Events {
		b.Events = append(b.Events, wantEvent(t, rel, ev))
	}
	return b
}

// wantEvent keeps the fields rel has, as its decoder would see them.
func wantEvent(t *testing.T, rel release, ev map[string]any) wire.KVEvent {
	t.Helper()
	var (
		e      wire.KVEvent
		fields []string
	)
	switch ev["type"] {
	case "BlockStored":
		e.Kind, fields = wire.KVBlockStored, rel.Stored
	case "BlockRemoved":
		e.Kind, fields = wire.KVBlockRemoved, rel.Removed
	case "AllBlocksCleared":
		e.Kind = wire.KVAllBlocksCleared
	}
	optInt := func(v any) wire.OptInt {
		if v == nil {
			return wire.OptInt{}
		}
		return wire.SomeInt(v.(int64))
	}
	optString := func(v any) wire.OptString {
		if v == nil {
			return wire.OptString{}
		}
		return wire.SomeString(v.(string))
	}
	for _, f := range fields {
		v := ev[f]
		switch f {
		case "block_hashes":
			for _, h := range v.([]any) {
				e.BlockHashes = append(e.BlockHashes, wantHash(t, h))
			}
		case "parent_block_hash":
			if v != nil {
				e.Parent, e.HasParent = wantHash(t, v), true
			}
		case "token_ids":
			e.TokenIDs = v.([]int64)
		case "block_size":
			e.BlockSize = v.(int64)
		case "lora_id":
			e.LoRAID = optInt(v)
		case "medium":
			e.Medium = optString(v)
		case "lora_name":
			e.LoRAName = optString(v)
		case "extra_keys":
			if v != nil {
				for _, k := range v.([]any) {
					e.ExtraKeys = append(e.ExtraKeys, msgpackStrings(k))
				}
			}
		case "group_idx":
			e.GroupIdx = optInt(v)
		case "kv_cache_spec_kind":
			e.SpecKind = optString(v)
		case "kv_cache_spec_sliding_window":
			e.SlidingWindow = optInt(v)
		default:
			t.Fatalf("%s: field %q is new to this test: teach wantEvent what it decodes to", rel.Label, f)
		}
	}
	return e
}

func wantHash(t *testing.T, h any) wire.KVBlockHash {
	switch h := h.(type) {
	case uint64:
		return wire.KVBlockHash(h)
	case string:
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		return wire.KVHashBytes(b)
	}
	t.Fatalf("hash %v (%T)", h, h)
	return 0
}

// msgpackStrings encodes an extra_keys entry (a tuple of short strings, or nil) as
// msgpack, which the decoder hands over raw.
func msgpackStrings(k any) wire.Raw {
	if k == nil {
		return nil
	}
	ss := k.([]string)
	b := []byte{0x90 | byte(len(ss))}
	for _, s := range ss {
		b = append(append(b, 0xa0|byte(len(s))), s...)
	}
	return b
}

// entry is one Sink call.
type entry struct {
	rank  int
	clear string // the KVClear reason; "" for a batch
	batch wire.KVEventBatch
}

func (e entry) probe() bool { return e.clear == "" && e.batch.TS < 0 }

func (e entry) String() string {
	if e.clear != "" {
		return "clear(" + e.clear + ")"
	}
	return "batch(ts=" + strconv.FormatFloat(e.batch.TS, 'g', -1, 64) + ")"
}

// recorder is the Sink: it keeps every call, in order. A light recorder keeps only
// each batch's ts (a flood would otherwise hold every event).
type recorder struct {
	light bool
	mu    sync.Mutex
	log   []entry
	wake  chan struct{}
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) KVBatch(rank int, b *wire.KVEventBatch) {
	r.add(entry{rank: rank, batch: copyBatch(b, r.light)})
}

func (r *recorder) KVClear(rank int, reason string) { r.add(entry{rank: rank, clear: reason}) }

func (r *recorder) add(e entry) {
	r.mu.Lock()
	r.log = append(r.log, e)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// copyBatch deep-copies b, which the subscriber reuses after the call.
func copyBatch(b *wire.KVEventBatch, light bool) wire.KVEventBatch {
	c := wire.KVEventBatch{TS: b.TS, DataParallelRank: b.DataParallelRank, Skipped: b.Skipped}
	if light {
		return c
	}
	for _, e := range b.Events {
		e.BlockHashes = slices.Clone(e.BlockHashes)
		e.TokenIDs = slices.Clone(e.TokenIDs)
		if e.ExtraKeys != nil {
			keys := make([]wire.Raw, len(e.ExtraKeys))
			for i, k := range e.ExtraKeys {
				keys[i] = slices.Clone(k)
			}
			e.ExtraKeys = keys
		}
		c.Events = append(c.Events, e)
	}
	return c
}

// within waits up to d for ok to hold over the log; false when it did not.
func (r *recorder) within(d time.Duration, ok func([]entry) bool) ([]entry, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		log := r.snapshot()
		if ok(log) {
			return log, true
		}
		select {
		case <-r.wake:
		case <-timer.C:
			return r.snapshot(), false
		}
	}
}

// content is log without the probes.
func content(log []entry) []entry {
	return slices.DeleteFunc(slices.Clone(log), entry.probe)
}

// publisher is a running testdata/publisher.py.
type publisher struct {
	*pypeer.Peer
	endpoint, replay string // as bound (a bound tcp endpoint resolved: its real port)
	rank             int
}

// startPublisher runs testdata/publisher.py for rel with args (see its usage).
func startPublisher(t *testing.T, rel release, rank int, args ...string) *publisher {
	t.Helper()
	python := pytest.Find(t, "zmq", "msgpack")
	args = append([]string{"--fixture", rel.path, "--rank", strconv.Itoa(rank)}, args...)
	p := pypeer.Start(t, testwait.Deadline, python, "testdata/publisher.py", args...)
	ev := p.Expect(t, "bound")
	pub := &publisher{Peer: p, endpoint: ev["endpoint"].(string), rank: rank}
	if r, ok := ev["replay"].(string); ok {
		pub.replay = r
	}
	return pub
}

// port is the port of a bound tcp endpoint.
func port(t *testing.T, endpoint string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(endpoint, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// target resolves the publisher's endpoints as switchyard would from the
// configuration "tcp://*:PORT" of an engine on this host (rank 0).
func (p *publisher) target(t *testing.T, withReplay bool, topic string) Target {
	t.Helper()
	given := "tcp://*:" + port(t, p.endpoint)
	ep, err := Resolve(given, p.rank, "127.0.0.1", false)
	if err != nil {
		t.Fatal(err)
	}
	tg := Target{Endpoint: ep, Topic: topic, Given: given}
	if withReplay {
		r, err := Resolve("tcp://*:"+port(t, p.replay), p.rank, "127.0.0.1", true)
		if err != nil {
			t.Fatal(err)
		}
		tg.Replay = r.Addr
	}
	return tg
}

// publish sends spec and returns the seqs it took.
func (p *publisher) publish(t *testing.T, s batchSpec) (first, last uint64) {
	t.Helper()
	return p.do(t, s.cmd("publish"))
}

func (p *publisher) do(t *testing.T, cmd map[string]any) (first, last uint64) {
	t.Helper()
	p.Send(t, cmd)
	ev := p.Expect(t, "published")
	return uint64(ev["first"].(float64)), uint64(ev["last"].(float64))
}

func (p *publisher) skip(t *testing.T, n int) {
	t.Helper()
	p.Send(t, map[string]any{"cmd": "skip", "n": n})
	p.Expect(t, "skipping")
}

// replayRequests returns the start seq of every replay request the ROUTER got.
func (p *publisher) replayRequests(t *testing.T) []uint64 {
	t.Helper()
	p.Send(t, map[string]any{"cmd": "stats"})
	var starts []uint64
	for _, s := range p.Expect(t, "stats")["replays"].([]any) {
		starts = append(starts, uint64(s.(float64)))
	}
	return starts
}

// harness is one subscriber following one publisher.
type harness struct {
	rel    release
	pub    *publisher
	sub    *Subscriber
	rec    *recorder
	rank   int
	probes int
}

// follow subscribes a new Subscriber (closed at cleanup) to target as rank.
func follow(t *testing.T, cfg Config, rank int, target Target) (*Subscriber, *recorder) {
	t.Helper()
	rec := newRecorder()
	sub := New(cfg, rec)
	t.Cleanup(func() { testwait.Func(t, "Subscriber.Close", func() { sub.Close() }) })
	sub.Set(rank, target)
	return sub, rec
}

// testConfig is quick to retry and to give up on a replay.
func testConfig() Config {
	return Config{Retry: 50 * time.Millisecond, ReplayTimeout: 2 * time.Second}
}

// sync publishes probes (empty batches, ts < 0) until one reaches the sink: a SUB
// joins a PUB asynchronously, and what the PUB sends before the subscription
// arrives is lost. The probe waited for is the newest, so no probe is still on its
// way when sync returns.
func (h *harness) sync(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(testwait.Deadline)
	for {
		h.probes++
		ts := -float64(h.probes)
		h.pub.publish(t, batchSpec{TS: ts, DefaultDP: true})
		if _, ok := h.rec.within(250*time.Millisecond, func(log []entry) bool {
			return len(log) > 0 && log[len(log)-1].clear == "" && log[len(log)-1].batch.TS == ts
		}); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no probe reached the subscriber in %v; status %+v; the sink saw %v",
				testwait.Deadline, h.status(t), h.rec.snapshot())
		}
	}
}

func (h *harness) status(t *testing.T) Status {
	t.Helper()
	st, ok := h.sub.Status(h.rank)
	if !ok {
		t.Fatalf("rank %d has no subscription", h.rank)
	}
	return st
}

// expect checks that, past mark, the sink saw exactly want (probes aside).
func (h *harness) expect(t *testing.T, mark int, want []entry) {
	t.Helper()
	got := content(h.rec.snapshot()[mark:])
	if d := cmp.Diff(want, got, cmp.AllowUnexported(entry{}), cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("the sink saw (-want +got):\n%s\nall: %v", d, got)
	}
}

func batchEntry(rank int, b wire.KVEventBatch) entry { return entry{rank: rank, batch: b} }

// marker is a small batch told apart by its ts.
func marker(ts float64) batchSpec {
	return batchSpec{TS: ts, DefaultDP: true, Events: []map[string]any{stored([]any{uint64(ts)}, nil, tokens(1, 4))}}
}

func (h *harness) want(t *testing.T, specs ...batchSpec) []entry {
	t.Helper()
	var es []entry
	for _, s := range specs {
		es = append(es, batchEntry(h.rank, wantBatch(t, h.rel, s, h.pub.rank)))
	}
	return es
}

func clearEntry(rank int, reason string) entry { return entry{rank: rank, clear: reason} }

// startDial starts a publisher binding wildcard endpoints with ephemeral ports and
// a subscriber dialing them.
func startDial(t *testing.T, rel release, cfg Config, withReplay bool, pubArgs ...string) *harness {
	t.Helper()
	args := append([]string{"--endpoint", "tcp://*:*"}, pubArgs...)
	if withReplay {
		args = append(args, "--replay-endpoint", "tcp://*:*")
	}
	pub := startPublisher(t, rel, 0, args...)
	sub, rec := follow(t, cfg, 0, pub.target(t, withReplay, ""))
	return &harness{rel: rel, pub: pub, sub: sub, rec: rec}
}

// Every release: the publisher's encoder matches the release's golden payloads
// byte for byte, and what it publishes (built from the field lists, and each
// fixture's payload verbatim) reaches the Sink in order and decodes to what was
// published, including batches the PUB dropped and the replay ROUTER delivered.
func TestInteropReleases(t *testing.T) {
	t.Parallel()
	for _, rel := range loadReleases(t) {
		t.Run(rel.Label, func(t *testing.T) {
			t.Parallel()
			pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*", "--replay-endpoint", "tcp://*:*",
				"--topic", "kv-events")
			// The peer encodes as the release did.
			for _, c := range rel.Cases {
				s, ok := fixtureSpecs[c.Name]
				if !ok {
					t.Fatalf("fixture case %q is new to this test: add it to fixtureSpecs", c.Name)
				}
				pub.Send(t, s.cmd("encode"))
				if got := pub.Expect(t, "encoded")["payload_hex"]; got != c.PayloadHex {
					t.Fatalf("%s: publisher.py encodes\n%s\nthe release encodes\n%s", c.Name, got, c.PayloadHex)
				}
			}

			sub, rec := follow(t, testConfig(), 0, pub.target(t, true, "kv"))
			h := &harness{rel: rel, pub: pub, sub: sub, rec: rec}
			h.sync(t)
			mark, before := len(rec.snapshot()), h.status(t)

			specs := contentSpecs()
			var want []entry
			for i, s := range specs {
				if i == 3 {
					pub.skip(t, 3) // three batches only the replay ROUTER can deliver
				}
				pub.publish(t, s)
				want = append(want, batchEntry(0, wantBatch(t, rel, s, 0)))
			}
			for _, c := range rel.Cases {
				pub.do(t, map[string]any{"cmd": "publish_case", "case": c.Name})
				payload, _ := hex.DecodeString(c.PayloadHex)
				var dec wire.KVBatchDecoder
				b, err := dec.Decode(payload)
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				want = append(want, batchEntry(0, copyBatch(b, false)))
			}
			h.sync(t)
			h.expect(t, mark, want)
			after := h.status(t)
			if after.Gaps-before.Gaps > 1 || after.Replays == before.Replays || after.Undecodable != 0 {
				t.Fatalf("status %+v after %+v: want the gap replayed, nothing undecodable", after, before)
			}
			if !after.Connected || after.LastSeq < int64(len(specs)+len(rel.Cases)) {
				t.Fatalf("status %+v", after)
			}
		})
	}
}

// A gap the buffer still covers is replayed: the missing batches arrive, in order,
// before the one that revealed the gap, and nothing is cleared. The endpoints are
// configured as "tcp://*:BASE" for DP rank 2, so the publisher offsets its ports as
// vLLM does and the subscriber must resolve the same ports.
func TestInteropGapReplayed(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	ports := freePorts(t, 2)
	const rank = 2
	base, replayBase := ports[0]-rank, ports[1]-rank
	pub := startPublisher(t, rel, rank, "--endpoint", fmt.Sprintf("tcp://*:%d", base),
		"--replay-endpoint", fmt.Sprintf("tcp://*:%d", replayBase))
	if got := port(t, pub.endpoint); got != strconv.Itoa(ports[0]) {
		t.Fatalf("publisher bound %s, want port %d", pub.endpoint, ports[0])
	}
	ep, err := Resolve(fmt.Sprintf("tcp://*:%d", base), rank, "127.0.0.1", false)
	if err != nil {
		t.Fatal(err)
	}
	rp, err := Resolve(fmt.Sprintf("tcp://*:%d", replayBase), rank, "127.0.0.1", true)
	if err != nil {
		t.Fatal(err)
	}
	sub, rec := follow(t, testConfig(), rank, Target{Endpoint: ep, Replay: rp.Addr})
	h := &harness{rel: rel, pub: pub, sub: sub, rec: rec, rank: rank}
	h.sync(t)
	mark, before := len(rec.snapshot()), h.status(t)

	a, b, c, d := marker(1), marker(2), marker(3), marker(4)
	pub.publish(t, a)
	pub.skip(t, 2)
	_, bSeq := pub.publish(t, b)
	pub.publish(t, c)
	pub.publish(t, d)
	h.sync(t)
	h.expect(t, mark, h.want(t, a, b, c, d))
	after := h.status(t)
	if after.Gaps-before.Gaps > 1 || after.Replays == before.Replays {
		t.Fatalf("status %+v after %+v: want the gap replayed", after, before)
	}
	if reqs := pub.replayRequests(t); !slices.Contains(reqs, bSeq) {
		t.Fatalf("replay requests %v: want one from %d (the first missing seq)", reqs, bSeq)
	}
}

// A gap the buffer no longer covers, a replay ROUTER that never answers, and no
// replay endpoint at all: each clears the rank ("gap"), then batches go on.
func TestInteropGapUncoverable(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	t.Run("buffer dropped", func(t *testing.T) {
		t.Parallel()
		h := startDial(t, rel, testConfig(), true)
		h.sync(t)
		mark := len(h.rec.snapshot())
		a, b, c, d := marker(1), marker(2), marker(3), marker(4)
		h.pub.publish(t, a)
		h.pub.skip(t, 2)
		h.pub.publish(t, b)
		_, cSeq := h.pub.publish(t, c)
		h.pub.Send(t, map[string]any{"cmd": "drop_oldest", "through": cSeq})
		h.pub.Expect(t, "dropped")
		h.pub.publish(t, d)
		h.sync(t)
		h.expect(t, mark, append(h.want(t, a), append([]entry{clearEntry(0, "gap")}, h.want(t, d)...)...))
		if st := h.status(t); st.Gaps != 1 {
			t.Fatalf("status %+v: want one gap", st)
		}
	})
	t.Run("replay silent", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.ReplayTimeout = 300 * time.Millisecond
		h := startDial(t, rel, cfg, true)
		h.sync(t)
		mark := len(h.rec.snapshot())
		h.pub.Send(t, map[string]any{"cmd": "replay_mode", "mode": "silent"})
		h.pub.Expect(t, "replay_mode")
		a, b, c := marker(1), marker(2), marker(3)
		h.pub.publish(t, a)
		h.pub.skip(t, 1)
		h.pub.publish(t, b)
		h.pub.publish(t, c)
		h.sync(t)
		want := append(h.want(t, a), append([]entry{clearEntry(0, "gap")}, h.want(t, c)...)...)
		h.expect(t, mark, want)
		// The ROUTER answers again: the next gap is replayed.
		h.pub.Send(t, map[string]any{"cmd": "replay_mode", "mode": "normal"})
		h.pub.Expect(t, "replay_mode")
		d, e := marker(4), marker(5)
		h.pub.skip(t, 1)
		h.pub.publish(t, d)
		h.pub.publish(t, e)
		h.sync(t)
		h.expect(t, mark, append(want, h.want(t, d, e)...))
	})
	t.Run("no replay endpoint", func(t *testing.T) {
		t.Parallel()
		h := startDial(t, rel, testConfig(), false)
		h.sync(t)
		mark := len(h.rec.snapshot())
		a, b, c := marker(1), marker(2), marker(3)
		h.pub.publish(t, a)
		h.pub.skip(t, 1)
		h.pub.publish(t, b)
		h.pub.publish(t, c)
		h.sync(t)
		h.expect(t, mark, append(h.want(t, a), append([]entry{clearEntry(0, "gap")}, h.want(t, c)...)...))
		if st := h.status(t); st.Replays != 0 || st.Gaps != 1 {
			t.Fatalf("status %+v: want one gap and no replay", st)
		}
	})
}

// ReplayTimeout bounds each wait of a replay, not the whole of it: a buffer that
// takes several timeouts to replay, on a loaded machine, is applied whole while
// its answers keep coming.
func TestInteropReplaySlowButSteady(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*", "--replay-endpoint", "tcp://*:*")
	var specs []batchSpec
	for i := range 40 {
		specs = append(specs, marker(float64(i+1)))
		pub.publish(t, specs[i])
	}
	pub.Send(t, map[string]any{"cmd": "replay_mode", "mode": "slow", "delay": 0.025})
	pub.Expect(t, "replay_mode")
	cfg := testConfig()
	cfg.ReplayTimeout = 400 * time.Millisecond // the whole replay takes 1 s or more
	sub, rec := follow(t, cfg, 0, pub.target(t, true, ""))
	h := &harness{rel: rel, pub: pub, sub: sub, rec: rec}
	h.sync(t)
	h.expect(t, 0, h.want(t, specs...))
}

// A ROUTER that keeps answering, but too slowly, is still cut off: the whole
// replay is bounded by replayWaits ReplayTimeouts, so a trickling engine holds up
// only its own rank's events, and not for long. The batches replayed by then stay
// applied, as for a buffer that no longer reaches back.
func TestInteropReplayTrickleBounded(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*", "--replay-endpoint", "tcp://*:*")
	const n = 200
	var specs []batchSpec
	for i := range n {
		specs = append(specs, marker(float64(i+1)))
		pub.publish(t, specs[i])
	}
	// 200 answers 20 ms apart take 4 s; the bound is 15 x 50 ms.
	pub.Send(t, map[string]any{"cmd": "replay_mode", "mode": "slow", "delay": 0.02})
	pub.Expect(t, "replay_mode")
	cfg := testConfig()
	cfg.ReplayTimeout = 50 * time.Millisecond
	sub, rec := follow(t, cfg, 0, pub.target(t, true, ""))
	h := &harness{rel: rel, pub: pub, sub: sub, rec: rec}
	h.sync(t)
	got := content(rec.snapshot())
	if len(got) == 0 || len(got) >= n {
		t.Fatalf("%d batches applied from a replay of %d answering every 20 ms: want the replay cut off by its bound, and what it applied kept", len(got), n)
	}
	h.expect(t, 0, h.want(t, specs[:len(got)]...))
}

// A buffered message over MaxMessageSize drops the replay connection whenever it
// is replayed, so no replay gets past it by asking again. It is lost for good: a
// late join applies what the buffer holds around it, and a gap over it clears the
// rank and applies what came after it, rather than clearing the rank for every
// message that follows the oversized one.
func TestInteropReplayPastOversized(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	cfg := testConfig()
	cfg.MaxMessageSize = 64 << 10
	t.Run("late join", func(t *testing.T) {
		t.Parallel()
		pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*", "--replay-endpoint", "tcp://*:*")
		a, b := marker(1), marker(2)
		pub.publish(t, a)
		pub.Send(t, map[string]any{"cmd": "publish_raw", "size": 1 << 20})
		pub.Expect(t, "published")
		pub.publish(t, b)
		sub, rec := follow(t, cfg, 0, pub.target(t, true, ""))
		h := &harness{rel: rel, pub: pub, sub: sub, rec: rec}
		h.sync(t)
		h.expect(t, 0, h.want(t, a, b))
		if st := h.status(t); st.Undecodable != 1 || st.Gaps != 0 {
			t.Fatalf("status %+v: want the oversized message counted and no gap", st)
		}
	})
	t.Run("gap", func(t *testing.T) {
		t.Parallel()
		h := startDial(t, rel, cfg, true)
		h.sync(t)
		mark := len(h.rec.snapshot())
		a, b, c := marker(1), marker(2), marker(3)
		h.pub.publish(t, a)
		h.pub.skip(t, 2)
		h.pub.Send(t, map[string]any{"cmd": "publish_raw", "size": 1 << 20})
		h.pub.Expect(t, "published")
		h.pub.publish(t, b)
		h.pub.publish(t, c)
		h.sync(t)
		want := append(h.want(t, a), clearEntry(0, "gap"))
		h.expect(t, mark, append(want, h.want(t, b, c)...))
		if st := h.status(t); st.Undecodable != 1 || st.Gaps != 1 {
			t.Fatalf("status %+v: want the oversized message counted, and one gap", st)
		}
	})
}

// A quiet engine is no gap: however long nothing arrives, and whatever its replay
// ROUTER does meanwhile (never answers, or is not there at all), a rank that missed
// nothing keeps its index.
func TestInteropQuietNoClear(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	const quiet = 2500 * time.Millisecond
	check := func(t *testing.T, h *harness) {
		t.Helper()
		h.sync(t)
		mark := len(h.rec.snapshot())
		a, b := marker(1), marker(2)
		h.pub.publish(t, a)
		h.sync(t)
		time.Sleep(quiet)
		h.pub.publish(t, b)
		h.sync(t)
		h.expect(t, mark, h.want(t, a, b))
	}
	t.Run("replay silent", func(t *testing.T) {
		t.Parallel()
		cfg := testConfig()
		cfg.ReplayTimeout = 300 * time.Millisecond
		h := startDial(t, rel, cfg, true)
		h.pub.Send(t, map[string]any{"cmd": "replay_mode", "mode": "silent"})
		h.pub.Expect(t, "replay_mode")
		check(t, h)
	})
	t.Run("replay unreachable", func(t *testing.T) {
		t.Parallel()
		pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*")
		tg := pub.target(t, false, "")
		tg.Replay = fmt.Sprintf("tcp://127.0.0.1:%d", freePorts(t, 1)[0])
		cfg := testConfig()
		cfg.ReplayTimeout = 300 * time.Millisecond
		sub, rec := follow(t, cfg, 0, tg)
		check(t, &harness{rel: rel, pub: pub, sub: sub, rec: rec})
	})
}

// An engine restart (both sockets closed and bound again, seq back to 0) clears the
// rank once, when its connection ends ("reconnect"), and the new engine's batches follow, including those it
// published before the subscriber had reconnected: the replay buffer still holds
// them, as it does for a subscriber that joins late.
func TestInteropRestart(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	cfg := testConfig()
	// The subscriber notices the restart at once and waits Retry before it dials
	// again: the batches published right after the restart go out to nobody.
	cfg.Retry = 300 * time.Millisecond
	h := startDial(t, rel, cfg, true)
	h.sync(t)
	mark := len(h.rec.snapshot())
	// The old engine's seq runs well ahead of where the new one is when the
	// subscriber is back: a new seq at or past the old one's next reads as a gap,
	// and the restart goes unseen (vLLM's seq carries no epoch).
	a := marker(1)
	h.pub.do(t, counted(a, restartLead))
	h.sync(t)
	h.pub.Send(t, map[string]any{"cmd": "restart"})
	h.pub.Expect(t, "restarted")
	b0, b1, b2 := marker(10), marker(11), marker(12)
	if first, _ := h.pub.publish(t, b0); first != 0 {
		t.Fatalf("the restarted publisher's first seq is %d", first)
	}
	h.pub.publish(t, b1)
	h.pub.publish(t, b2)
	h.sync(t)
	c := marker(13)
	h.pub.publish(t, c)
	h.sync(t)
	want := h.want(t, slices.Repeat([]batchSpec{a}, restartLead)...)
	// The connection ended with the old engine: the rank is cleared then
	// ("reconnect"), before the new engine's seq could be compared with the old.
	want = append(want, clearEntry(0, "reconnect"))
	h.expect(t, mark, append(want, h.want(t, b0, b1, b2, c)...))
}

// restartLead is how many batches an engine publishes before the restart tests
// restart it.
const restartLead = 50

// counted is the publish command for n copies of s.
func counted(s batchSpec, n int) map[string]any {
	c := s.cmd("publish")
	c["count"] = n
	return c
}

// A subscriber that joins after the engine published replays the buffer from 0; one
// whose buffer no longer reaches back to 0 still applies what the buffer holds.
func TestInteropLateJoin(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	t.Run("from 0", func(t *testing.T) {
		t.Parallel()
		pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*", "--replay-endpoint", "tcp://*:*")
		a, b, c := marker(1), marker(2), marker(3)
		for _, s := range []batchSpec{a, b, c} {
			pub.publish(t, s)
		}
		sub, rec := follow(t, testConfig(), 0, pub.target(t, true, ""))
		h := &harness{rel: rel, pub: pub, sub: sub, rec: rec}
		h.sync(t)
		h.expect(t, 0, h.want(t, a, b, c))
		if st := h.status(t); st.Replays == 0 || st.Gaps != 0 {
			t.Fatalf("status %+v: want a replay and no gap", st)
		}
		if reqs := pub.replayRequests(t); len(reqs) == 0 || reqs[0] != 0 {
			t.Fatalf("replay requests %v, want the first from seq 0", reqs)
		}
	})
	t.Run("buffer truncated", func(t *testing.T) {
		t.Parallel()
		pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*", "--replay-endpoint", "tcp://*:*")
		a, b, c, d := marker(1), marker(2), marker(3), marker(4)
		pub.publish(t, a)
		_, bSeq := pub.publish(t, b)
		pub.publish(t, c)
		pub.publish(t, d)
		pub.Send(t, map[string]any{"cmd": "drop_oldest", "through": bSeq})
		pub.Expect(t, "dropped")
		sub, rec := follow(t, testConfig(), 0, pub.target(t, true, ""))
		h := &harness{rel: rel, pub: pub, sub: sub, rec: rec}
		h.sync(t)
		e := marker(5)
		pub.publish(t, e)
		h.sync(t)
		h.expect(t, 0, h.want(t, c, d, e))
		if st := h.status(t); st.Gaps != 0 {
			t.Fatalf("status %+v: a late join is no gap", st)
		}
	})
}

// The publisher connects (its endpoint names a concrete host), so the subscriber
// binds; the PUB for DP rank 1 connects to the configured port + 1. A bound SUB
// outlives one engine connection: the engine's restart reconnects to it, clears the
// rank and the new batches follow. An oversized message drops the engine's
// connection, which libzmq re-establishes on its own.
func TestInteropBind(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	ports := freePorts(t, 2)
	const rank = 1
	given := fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]-rank)
	ep, err := Resolve(given, rank, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if !ep.Bind || ep.Addr != fmt.Sprintf("tcp://127.0.0.1:%d", ports[0]) {
		t.Fatalf("Resolve(%s) = %+v, want a bind at port %d", given, ep, ports[0])
	}
	replayGiven := fmt.Sprintf("tcp://127.0.0.1:%d", ports[1]-rank)
	rp, err := Resolve(replayGiven, rank, "", true)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.MaxMessageSize = 64 << 10
	sub, rec := follow(t, cfg, rank, Target{Endpoint: ep, Replay: rp.Addr, Given: given})
	pub := startPublisher(t, rel, rank, "--endpoint", given, "--replay-endpoint", replayGiven)
	if pub.endpoint != ep.Addr || pub.replay != rp.Addr {
		t.Fatalf("publisher at %s (replay %s), subscriber at %s (replay %s)", pub.endpoint, pub.replay, ep.Addr, rp.Addr)
	}
	h := &harness{rel: rel, pub: pub, sub: sub, rec: rec, rank: rank}
	// A bound SUB is connected once a message arrived on it (not by a replay).
	deadline := time.Now().Add(testwait.Deadline)
	for h.sync(t); !h.status(t).Connected; h.sync(t) {
		if time.Now().After(deadline) {
			t.Fatalf("status %+v: the engine's messages never arrived on the bound SUB", h.status(t))
		}
	}
	mark := len(rec.snapshot())
	a, b, c := marker(1), marker(2), marker(3)
	pub.do(t, counted(a, restartLead))
	pub.skip(t, 1)
	pub.publish(t, b)
	pub.publish(t, c)
	h.sync(t)
	want := h.want(t, slices.Repeat([]batchSpec{a}, restartLead)...)
	want = append(want, h.want(t, b, c)...)
	h.expect(t, mark, want)

	pub.Send(t, map[string]any{"cmd": "restart"})
	pub.Expect(t, "restarted")
	d, e := marker(4), marker(5)
	pub.publish(t, d)
	pub.publish(t, e)
	h.sync(t)
	// The new connection's first message and the old one's end race: the rank may
	// be cleared twice (the seq went back, then the old connection ended) and d
	// replayed. What it holds after its last clear is what the new engine sent.
	got := content(rec.snapshot()[mark:])
	same := func(want, got []entry) bool {
		return cmp.Equal(want, got, cmp.AllowUnexported(entry{}), cmpopts.EquateEmpty())
	}
	if len(got) < len(want) || !same(want, got[:len(want)]) {
		t.Fatalf("the sink saw %v, want it to begin with %v", got, want)
	}
	after := got[len(want):]
	last := -1
	for i, e := range after {
		if e.clear != "" {
			last = i
		}
	}
	reconnect := slices.ContainsFunc(after, func(e entry) bool { return e.clear == "reconnect" })
	if !reconnect || !same(h.want(t, d, e), after[last+1:]) {
		t.Fatalf("after the restart the sink saw %v, want a reconnect clear, and d and e after the last clear", after)
	}
	mark = len(rec.snapshot())

	pub.do(t, map[string]any{"cmd": "publish_raw", "size": 256 << 10})
	f := marker(6)
	pub.publish(t, f)
	h.sync(t)
	// The oversized message is lost for good (the replay steps over it): the rank
	// is cleared, as a gap or at the reconnection it caused, and f arrives.
	got = content(rec.snapshot()[mark:])
	if len(got) == 0 || (got[0].clear != "gap" && got[0].clear != "reconnect") || !same(h.want(t, f), got[len(got)-1:]) {
		t.Fatalf("after an oversized message the sink saw %v, want a clear, and f last", got)
	}
}

// A flood (thousands of batches at once, undecodable payloads, one message past
// MaxMessageSize) costs bounded memory and no crash; the subscriber reconnects after
// the oversized message dropped its connection, clears the rank (the replay meets
// the oversized message again), and keeps applying batches in order.
func TestInteropFlood(t *testing.T) {
	t.Parallel()
	rel := newestRelease(t)
	cfg := testConfig()
	cfg.MaxMessageSize = 64 << 10
	h := startDial(t, rel, cfg, true)
	h.rec.light = true
	h.sync(t)
	mark := len(h.rec.snapshot())

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	heap0 := heap()
	var hashes []any
	for i := range 16 {
		hashes = append(hashes, uint64(1000+i))
	}
	flood := func(ts float64, n int) {
		cmd := batchSpec{TS: ts, DefaultDP: true,
			Events: []map[string]any{stored(hashes, nil, tokens(1, 64))}}.cmd("publish")
		cmd["count"], cmd["ts_step"] = n, 1
		h.pub.do(t, cmd)
	}
	const n = 3000
	flood(1, n)
	for range 3 {
		h.pub.do(t, map[string]any{"cmd": "publish_raw", "hex": "c1"})
	}
	h.pub.do(t, map[string]any{"cmd": "publish_raw", "size": 1 << 20})
	flood(1+n, n)
	h.sync(t)
	heap1 := heap()

	// A loaded machine may still be replaying after the clear when sync returns:
	// the recorder is read until its last batch is the flood's last, or 20 s pass.
	var last float64
	var batches, gapClears int
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		last, batches, gapClears = floodTally(t, h.rec.snapshot()[mark:])
		if (batches >= n && last == 2*n) || time.Now().After(end) {
			break
		}
	}
	st := h.status(t)
	t.Logf("flood of %d batches: %d applied, %d gap clears, status %+v, heap %d -> %d KiB",
		2*n, batches, gapClears, st, heap0>>10, heap1>>10)
	if gapClears == 0 {
		t.Fatal("the oversized message was lost but the rank was never cleared")
	}
	if batches < n || last != 2*n {
		t.Fatalf("%d batches applied, the last ts %v: want at least the %d before the oversized message and the last", batches, last, n)
	}
	if st.Undecodable < 3 {
		t.Fatalf("status %+v: want the 3 undecodable payloads counted", st)
	}
	if heap1 > heap0 && heap1-heap0 > 32<<20 {
		t.Fatalf("heap grew from %d to %d KiB over the flood", heap0>>10, heap1>>10)
	}
}

// Close joins every rank's goroutine promptly, whatever it is doing: dialing a
// publisher that is not there, listening for one that never connects, reading, or
// waiting on a replay ROUTER that never answers (ReplayTimeout far away). Drop does
// the same for one rank. TestMain's goleak check proves nothing is left behind.
func TestSubscriberCloseJoins(t *testing.T) {
	rel := newestRelease(t)
	cfg := testConfig()
	cfg.ReplayTimeout = 30 * time.Second
	pub := startPublisher(t, rel, 0, "--endpoint", "tcp://*:*", "--replay-endpoint", "tcp://*:*")
	pub.Send(t, map[string]any{"cmd": "replay_mode", "mode": "silent"})
	pub.Expect(t, "replay_mode")
	ports := freePorts(t, 2)
	rec := newRecorder()
	sub := New(cfg, rec)
	closed := false
	t.Cleanup(func() {
		if !closed {
			sub.Close()
		}
	})
	sub.Set(0, pub.target(t, true, ""))
	sub.Set(1, Target{Endpoint: Resolved{Addr: fmt.Sprintf("tcp://127.0.0.1:%d", ports[0])}})
	sub.Set(2, Target{Endpoint: Resolved{Addr: fmt.Sprintf("tcp://127.0.0.1:%d", ports[1]), Bind: true}})
	sub.Set(3, pub.target(t, false, ""))

	h := &harness{rel: rel, pub: pub, sub: sub, rec: rec}
	h.sync(t)
	// Rank 0 meets a gap and waits on the silent replay ROUTER.
	pub.skip(t, 1)
	pub.publish(t, marker(1))
	pub.publish(t, marker(2))
	deadline := time.Now().Add(testwait.Deadline)
	for len(pub.replayRequests(t)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no replay request reached the ROUTER")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	testwait.Func(t, "Drop(3)", func() { sub.Drop(3) })
	if _, ok := sub.Status(3); ok {
		t.Fatal("a dropped rank still has a status")
	}
	testwait.Func(t, "Subscriber.Close", func() { sub.Close() })
	closed = true
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Drop and Close took %v: a rank waiting on a replay is not stopped (ReplayTimeout %v)", took, cfg.ReplayTimeout)
	}
	for r := range 4 {
		if _, ok := sub.Status(r); ok {
			t.Fatalf("rank %d has a status after Close", r)
		}
	}
	sub.Set(0, pub.target(t, true, "")) // after Close: starts nothing
	if _, ok := sub.Status(0); ok {
		t.Fatal("Set after Close subscribed")
	}
}

// freePorts returns n distinct tcp ports free on 127.0.0.1 (held open together, so
// distinct, then released for the test to bind).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// floodTally reads a flood's record: the last batch's ts, the batches applied and
// the gap (or reconnect) clears; after a clear the replay applies batches again
// from its start.
func floodTally(t *testing.T, got []entry) (last float64, batches, gapClears int) {
	t.Helper()
	for _, e := range got {
		switch {
		case e.probe():
		case e.clear == "gap" || e.clear == "reconnect":
			gapClears++
			last = 0
		case e.clear != "":
			t.Fatalf("clear(%s) in a flood", e.clear)
		default:
			if e.batch.TS <= last {
				t.Fatalf("batch ts %v after %v: out of order", e.batch.TS, last)
			}
			last = e.batch.TS
			batches++
		}
	}
	return last, batches, gapClears
}
