package clientapi

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
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
	h.f.ExpectAbort(t, "c")
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

// A client that never reads must not hold up the others: its writes block only its
// own writer. Before, one writer served every client and blocked on the non-reader
// for up to the 10 s send timeout, so everyone else's outputs waited that long.
func TestClientProtocolNonReaderDoesNotBlockOthers(t *testing.T) {
	h := newClientHarness(t, ClientConfig{Address: "ipc://" + filepath.Join(t.TempDir(), "c")})
	h.f.Hold.Store(true) // each ADD yields one output and stays live
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A connects, starts one request, and never reads again.
	a, err := transport.Dial(ctx, transport.Dealer, h.cs.Addr(), transport.Options{Identity: []byte("reader-a")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(1 << 30)
	sp.IgnoreEOS = true
	sp.Normalize()
	body, _, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: "a1", PromptTokenIDs: []int64{1}, Sampling: &sp, DataParallelRank: wire.SomeInt(0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Send([]byte{wire.RequestAdd}, body); err != nil {
		t.Fatal(err)
	}
	aID := testwait.Recv(t, h.f.Adds, "A's ADD").RequestID
	// Far more output for A than its socket and receive queue hold (~20 MB): A's
	// writer is soon blocked in a write.
	toks := make([]int64, 1000)
	for i := range toks {
		toks[i] = 100000 + int64(i)
	}
	for range 4000 {
		h.f.Handle(0, &wire.EngineCoreOutputs{Outputs: []wire.EngineCoreOutput{{RequestID: aID, NewTokenIDs: toks, FinishReason: wire.FinishNone}}})
	}
	// B (the harness client) keeps getting its outputs at once, request after request.
	for i := range 20 {
		id := fmt.Sprintf("b%d", i)
		h.add(t, id, 5, wire.SomeInt(1))
		select {
		case m := <-h.in:
			var o wire.EngineCoreOutputs
			if err := wire.DecodeOutputs(m, &o); err != nil || len(o.Outputs) != 1 || o.Outputs[0].RequestID != id {
				t.Fatalf("B got %v %+v, want an output of %s", err, o.Outputs, id)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("B's request %s got no output within 3s while A does not read", id)
		}
	}
	a.Close() // A's writer fails at once and A is gone; cleanup does not wait for its send timeout
	h.f.ExpectAbort(t, aID)
}
