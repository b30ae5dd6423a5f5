package server

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// A client that reads everything must never be dropped because the server's own
// writer fell behind the engines. The fake engine produces one output per message as
// fast as it can while MaxQueued is tiny, so the writer is behind almost at once:
// before EndBatch stalled the producers, the client was declared slow, its requests
// were aborted and it never heard of them again (the bench's closed loop stalled).
func TestClientProtocolReadingClientNeverDropped(t *testing.T) {
	h := newClientHarness(t, ClientConfig{MaxQueued: 8})
	const reqs, tokens = 8, 100
	for i := range reqs {
		h.add(t, fmt.Sprintf("r%d", i), tokens, wire.OptInt{})
	}
	got := map[string]int{}
	finished := 0
	deadline := time.After(20 * time.Second)
	for finished < reqs {
		var m [][]byte
		select {
		case m = <-h.in:
		case <-deadline:
			t.Fatalf("only %d of %d requests finished (tokens so far %v)", finished, reqs, got)
		}
		var o wire.EngineCoreOutputs
		if err := wire.DecodeOutputs(m, &o); err != nil {
			t.Fatalf("not an EngineCoreOutputs (%v): %q", err, m[0])
		}
		for _, out := range o.Outputs {
			got[out.RequestID] += len(out.NewTokenIDs)
			if out.Finished() {
				finished++
				if out.FinishReason != wire.FinishLength || got[out.RequestID] != tokens {
					t.Errorf("%s ended with finish %v after %d tokens, want length after %d",
						out.RequestID, out.FinishReason, got[out.RequestID], tokens)
				}
			}
		}
	}
}

// A client that really stops reading is dropped, but still connected: each of its
// live requests must end with an ABORT output and a SlowClient error must say why,
// or the client waits for them forever.
func TestClientProtocolSlowClientIsTold(t *testing.T) {
	h := newClientHarness(t, ClientConfig{
		Address:   "ipc://" + filepath.Join(t.TempDir(), "c"),
		MaxQueued: 8,
	})
	// The test does not read h.in until the drop, so the harness's reader stops once
	// h.in is full, then the socket buffers fill and the writer blocks.
	const reqs, tokens = 4, 20000
	for i := range reqs {
		h.add(t, fmt.Sprintf("s%d", i), tokens, wire.OptInt{})
	}
	h.f.expectAbort(t, "c")
	ended := map[string]wire.FinishReason{}
	slowErr := false
	deadline := time.After(20 * time.Second)
	for len(ended) < reqs || !slowErr {
		var m [][]byte
		select {
		case m = <-h.in:
		case <-deadline:
			t.Fatalf("after the drop: ended %v, SlowClient error %v", ended, slowErr)
		}
		if len(m) == 1 && len(m[0]) > 0 && m[0][0]&0xf0 == 0x80 {
			e := h.decodeError(t, m)
			if e["type"] != ErrTypeSlowClient {
				t.Fatalf("error %v", e)
			}
			slowErr = true
			continue
		}
		var o wire.EngineCoreOutputs
		if err := wire.DecodeOutputs(m, &o); err != nil {
			t.Fatalf("not an EngineCoreOutputs (%v)", err)
		}
		for _, out := range o.Outputs {
			if out.Finished() {
				if _, dup := ended[out.RequestID]; dup {
					t.Errorf("%s ended twice", out.RequestID)
				}
				ended[out.RequestID] = out.FinishReason
			}
		}
	}
	aborted := 0
	for id, r := range ended {
		switch r {
		case wire.FinishAbort:
			aborted++
		case wire.FinishLength:
		default:
			t.Errorf("%s ended with %v", id, r)
		}
	}
	if aborted == 0 {
		t.Errorf("no request was aborted: %v", ended)
	}
}
