package mockengine

import (
	"encoding/hex"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-llm/switchyard/internal/pypeer"
	"github.com/switchyard-llm/switchyard/internal/pytest"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// A libzmq SUB and DEALER (pyzmq) read the mock's KV events and replay as they
// read a vLLM engine's: the PUB and ROUTER are our own ZeroMQ, so only a real
// libzmq peer proves they interoperate.
func TestKVEventsPyzmq(t *testing.T) {
	python := pytest.Find(t, "zmq")
	dir := t.TempDir()
	pub, rep := "ipc://"+dir+"/kv", "ipc://"+dir+"/replay"
	f := startKVEngine(t, dir, kvConfig(wire.Native(), pub, rep))
	peer := pypeer.Start(t, 20*time.Second, python, "testdata/kv_sub.py", pub, rep, "kv")

	// The subscription reaches the PUB some time after the SUB connects: reset
	// the idle cache (an AllBlocksCleared each time) until the peer gets one.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(1000); i < 1100; i++ {
			body, _ := wire.AppendUtility(nil, 0, i, "reset_prefix_cache", nil)
			f.in.Send(f.id, []byte{wire.RequestUtility}, body)
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	first := peer.Await(t, "msg")
	close(stop)
	testwait.Wait(t, &wg, "the reset pinger")

	sc := newKVScenario()
	f.generate(addPrompt("a", sc.prompt, 3))
	f.generate(addPrompt("b", sc.prompt, 3))
	f.utility("reset_prefix_cache", nil)
	want := sc.wantStored(func(h uint64) wire.KVBlockHash { return wire.KVBlockHash(h) })

	// The peer's messages: the pinger's AllBlocksCleared, then the scenario's.
	payloads := []string{first["payload"].(string)}
	var got []wire.KVEvent
	var d wire.KVBatchDecoder
	for seq := first["seq"].(float64) + 1; len(got) < len(want)-1 || got[len(got)-1].Kind != wire.KVAllBlocksCleared; seq++ {
		m := peer.Expect(t, "msg")
		if m["seq"].(float64) != seq || m["topic"] != "kv" {
			t.Fatalf("message %v, want seq %v topic kv", m, seq)
		}
		payloads = append(payloads, m["payload"].(string))
		b := decodeHex(t, &d, m["payload"].(string))
		if ev := b.Events[0]; ev.Kind == wire.KVBlockStored || len(got) > 0 {
			// The decoder reuses its slices: keep copies.
			ev.BlockHashes, ev.TokenIDs = slices.Clone(ev.BlockHashes), slices.Clone(ev.TokenIDs)
			got = append(got, ev)
		}
	}
	for i := range got {
		if got[i].Kind == wire.KVBlockStored {
			got[i].Medium, got[i].ExtraKeys, got[i].GroupIdx, got[i].SpecKind = wire.OptString{}, nil, wire.OptInt{}, wire.OptString{}
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	peer.Send(t, map[string]any{"cmd": "replay", "start": first["seq"]})
	for i, p := range payloads {
		r := peer.Expect(t, "replay")
		if r["seq"].(float64) != first["seq"].(float64)+float64(i) || r["payload"] != p {
			t.Fatalf("replay %d: %v, want payload %s", i, r, p)
		}
	}
	peer.Expect(t, "replay_end")
}

func decodeHex(t *testing.T, d *wire.KVBatchDecoder, s string) *wire.KVEventBatch {
	t.Helper()
	p, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Decode(p)
	if err != nil || len(b.Events) != 1 {
		t.Fatalf("payload %s: %v", s, err)
	}
	return b
}
