package mockengine

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// kvScenario is what the tests run: a prompt of 10 tokens in blocks of 4, twice,
// three tokens each, then a reset. wantStored are the BlockStored events it
// publishes (hash is how the events name a block hash), one message each.
type kvScenario struct {
	prompt []int64
	hashes [3]uint64 // the prompt's two full blocks, then the block its answer fills
	tokens []int64   // the first three blocks' tokens
}

func newKVScenario() kvScenario {
	sc := kvScenario{prompt: seqTokens(1, 10)}
	sc.tokens = append(slices.Clone(sc.prompt), TokensFor(sc.prompt, 2)...)
	parent := noParentHash
	for i := range sc.hashes {
		sc.hashes[i] = BlockHash(parent, sc.tokens[4*i:4*i+4], nil)
		parent = sc.hashes[i]
	}
	return sc
}

// wantStored are the scenario's BlockStored events, hashes in wire form.
func (sc kvScenario) wantStored(hash func(uint64) wire.KVBlockHash) []wire.KVEvent {
	h := func(i int) wire.KVBlockHash { return hash(sc.hashes[i]) }
	return []wire.KVEvent{
		{Kind: wire.KVBlockStored, BlockHashes: []wire.KVBlockHash{h(0), h(1)}, TokenIDs: sc.tokens[:8], BlockSize: 4},
		{Kind: wire.KVBlockStored, BlockHashes: []wire.KVBlockHash{h(2)}, Parent: h(1), HasParent: true, TokenIDs: sc.tokens[8:12], BlockSize: 4},
		// The second request hits the prompt's two blocks, and fills the third
		// again: vLLM names a block it caches anew even when it was cached.
		{Kind: wire.KVBlockStored, BlockHashes: []wire.KVBlockHash{h(2)}, Parent: h(1), HasParent: true, TokenIDs: sc.tokens[8:12], BlockSize: 4},
		{Kind: wire.KVAllBlocksCleared},
	}
}

// run drives the engine through the scenario and checks the SUB's messages
// from seq first on: returns them, raw.
func (sc kvScenario) run(t *testing.T, f *kvFrontend, topic string, first uint64, rank int64, enc wire.KVEncoding, hash func(uint64) wire.KVBlockHash) [][][]byte {
	t.Helper()
	if got := f.generate(addPrompt("a", sc.prompt, 3)); got != 0 {
		t.Fatalf("first request: %d cached tokens", got)
	}
	if got := f.generate(addPrompt("b", sc.prompt, 3)); got != 8 {
		t.Fatalf("second request: %d cached tokens, want 8", got)
	}
	if got := f.utility("reset_prefix_cache", nil); !bytes.Equal(got, rawTrue) {
		t.Fatalf("reset_prefix_cache on an idle engine: %x", got)
	}
	var d wire.KVBatchDecoder
	var msgs [][][]byte
	for i, want := range sc.wantStored(hash) {
		b, m := f.nextEvents(&d, topic, first+uint64(i))
		msgs = append(msgs, m)
		if len(b.Events) != 1 || b.DataParallelRank != wire.SomeInt(rank) {
			t.Fatalf("seq %d: %d events, rank %+v", first+uint64(i), len(b.Events), b.DataParallelRank)
		}
		got := b.Events[0]
		if want.Kind != wire.KVAllBlocksCleared {
			want.Medium = wire.SomeString("GPU")
			want.ExtraKeys, got.ExtraKeys = nil, checkExtraKeys(t, enc, got.ExtraKeys, len(want.BlockHashes))
			if enc >= wire.KVEncodingV021 {
				want.GroupIdx, want.SpecKind = wire.SomeInt(0), wire.SomeString("full_attention")
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("seq %d (-want +got):\n%s", first+uint64(i), d)
		}
		if isMap := msgs[i][2][0]&0xf0 == 0x80; isMap != (enc == wire.KVEncodingMap) {
			t.Errorf("seq %d: payload starts %x, encoding %v", first+uint64(i), msgs[i][2][0], enc)
		}
	}
	return msgs
}

// checkExtraKeys: from v0.18 on, one None per block (no LoRA, no salt); before,
// none at all.
func checkExtraKeys(t *testing.T, enc wire.KVEncoding, keys []wire.Raw, blocks int) []wire.Raw {
	t.Helper()
	if enc < wire.KVEncodingV018 {
		if keys != nil {
			t.Errorf("%v has extra_keys %x", enc, keys)
		}
		return nil
	}
	if len(keys) != blocks {
		t.Errorf("%v: %d extra_keys for %d blocks", enc, len(keys), blocks)
	}
	for _, k := range keys {
		if len(k) > 0 && !bytes.Equal(k, rawNil) {
			t.Errorf("%v: extra key %x, want None", enc, k)
		}
	}
	return nil
}

// kvConfig is a mock with a 64-block cache in blocks of 4, publishing to
// endpoint, with replay, stepping every millisecond.
func kvConfig(layout *wire.Layout, endpoint, replay string) Config {
	cfg := DefaultConfig()
	cfg.StepInterval, cfg.Layout = time.Millisecond, layout
	cfg.KVCacheBlocks, cfg.BlockSize = 64, 4
	cfg.KVEvents = KVEventsConfig{Enable: true, Endpoint: endpoint, ReplayEndpoint: replay, Topic: "kv"}
	return cfg
}

// replay asks the replay ROUTER at endpoint for every message from start on.
func replay(t *testing.T, endpoint string, start uint64) [][][]byte {
	t.Helper()
	d, err := transport.Dial(context.Background(), transport.Dealer, endpoint, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ch := make(chan [][]byte, 16)
	go recvInto(d, ch)
	d.Send(nil, wire.AppendKVSeq(nil, start))
	var got [][][]byte
	for {
		m := testwait.Recv(t, ch, "a replay answer")
		seq, payload, end, err := wire.ParseKVReplayReply(m)
		if err != nil {
			t.Fatal(err)
		}
		if end {
			return got
		}
		got = append(got, [][]byte{[]byte("kv"), wire.AppendKVSeq(nil, seq), payload})
	}
}

// Every release's encoding, over ipc: the events of the scenario in order, seq
// +1 a message, the replay giving back the same bytes, and the registration of
// the releases that carry kv_events_config.
func TestKVEventsEachLayout(t *testing.T) {
	for _, l := range wire.BuiltinLayouts() {
		t.Run(l.Name, func(t *testing.T) {
			dir := t.TempDir()
			enc, _ := wire.KVEncodingForLayout(l.Name)
			f := startKVEngine(t, dir, kvConfig(l, "ipc://"+dir+"/kv", "ipc://"+dir+"/replay"))
			checkRegistration(t, l, f.reg, "ipc://"+dir+"/kv", "ipc://"+dir+"/replay")
			f.subscribe("ipc://"+dir+"/kv", "kv")
			first := f.awaitSubscribed() + 1
			sc := newKVScenario()
			msgs := sc.run(t, f, "kv", first, 0, enc, func(h uint64) wire.KVBlockHash { return wire.KVBlockHash(h) })
			got := replay(t, "ipc://"+dir+"/replay", first)
			if d := cmp.Diff(msgs, got); d != "" {
				t.Errorf("replay from %d (-sub +replay):\n%s", first, d)
			}
			if all := replay(t, "ipc://"+dir+"/replay", 0); len(all) != int(first)+len(msgs) || !bytes.Equal(all[0][1], make([]byte, 8)) {
				t.Errorf("replay from 0: %d messages, first seq %x", len(all), all[0][1])
			}
		})
	}
}

// checkRegistration: the cache's size, and kv_events_config as configured
// (rank offset not applied) where the release registers it.
func checkRegistration(t *testing.T, l *wire.Layout, r wire.ReadyResponse, endpoint, replay string) {
	t.Helper()
	if r.Empty {
		return
	}
	if r.NumGPUBlocks != wire.SomeInt(64) || slices.Contains(l.Registration, "block_size") && r.BlockSize != wire.SomeInt(4) {
		t.Errorf("registration num_gpu_blocks %+v block_size %+v", r.NumGPUBlocks, r.BlockSize)
	}
	if !slices.Contains(l.Registration, "kv_events_config") {
		if len(r.KVEventsConfig) != 0 {
			t.Errorf("%s registered kv_events_config %x", l.Name, r.KVEventsConfig)
		}
		return
	}
	var got kvEventsMsgpack
	if err := msgpack.Unmarshal(r.KVEventsConfig, &got); err != nil {
		t.Fatal(err)
	}
	want := kvEventsMsgpack{Enable: true, Publisher: "zmq", Endpoint: endpoint, ReplayEndpoint: &replay,
		BufferSteps: 10000, HWM: 100000, MaxQueueSize: 100000, Topic: "kv"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("kv_events_config (-want +got):\n%s", d)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(r.KVEventsConfig))
	n, _ := dec.DecodeMapLen()
	var keys []string
	for range n {
		k, _ := dec.DecodeString()
		keys = append(keys, k)
		dec.Skip()
	}
	wantKeys := []string{"enable_kv_cache_events", "publisher", "endpoint", "replay_endpoint", "buffer_steps", "hwm", "max_queue_size", "topic"}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("kv_events_config keys %q, want vLLM's %q", keys, wantKeys)
	}
}

// A wildcard tcp endpoint binds at the port offset by the rank; bytes hashes
// are 32-byte bin values that the decoder folds.
func TestKVEventsTCPRankBytes(t *testing.T) {
	port := freePort(t)
	const rank = 2
	base := "tcp://*:" + strconv.Itoa(port-rank)
	dir := t.TempDir()
	cfg := kvConfig(wire.Native(), base, "")
	cfg.Rank, cfg.DataParallelSize, cfg.KVHashBytes = rank, 4, true
	f := startKVEngine(t, dir, cfg)
	f.subscribe("tcp://127.0.0.1:"+strconv.Itoa(port), "")
	first := f.awaitSubscribed() + 1
	hash := func(h uint64) wire.KVBlockHash {
		b := HashBytes(h | 1<<63)
		return wire.KVHashBytes(b[:])
	}
	msgs := newKVScenario().run(t, f, "kv", first, rank, wire.KVEncodingMap, hash)
	if !bytes.Contains(msgs[0][2], []byte{0xc4, 32}) {
		t.Errorf("no 32-byte hash in %x", msgs[0][2])
	}
}

// freePort is a tcp port nobody listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// An endpoint without a wildcard connects, as vLLM's does: to a SUB that binds.
func TestKVEventsConnect(t *testing.T) {
	sub, err := transport.Listen(context.Background(), transport.Sub, "tcp://127.0.0.1:0", transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := startKVEngine(t, dir, kvConfig(wire.Native(), sub.Addr(), ""))
	t.Cleanup(func() { sub.Close() })
	sub.Send([]byte{1})
	go recvInto(sub, f.events)
	first := f.awaitSubscribed() + 1
	newKVScenario().run(t, f, "kv", first, 0, wire.KVEncodingMap, func(h uint64) wire.KVBlockHash { return wire.KVBlockHash(h) })
}
