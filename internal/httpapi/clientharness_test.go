package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// clientHarness is a clientapi.ClientServer over fake engines plus one DEALER client.
type clientHarness struct {
	f   *fakeEngines
	cs  *clientapi.ClientServer
	cli transport.Socket
	in  chan [][]byte // messages the client received
}

func newClientHarness(t *testing.T, cfg clientapi.ClientConfig) *clientHarness {
	t.Helper()
	return newClientHarnessOn(t, newFakeCore(t, 2), cfg)
}

// newClientHarnessOn is newClientHarness over the given fake engines.
func newClientHarnessOn(t *testing.T, f *fakeEngines, cfg clientapi.ClientConfig) *clientHarness {
	t.Helper()
	if cfg.Address == "" {
		cfg.Address = "tcp://127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := clientapi.ListenClients(ctx, cfg, f.D)
	if err != nil {
		t.Fatal(err)
	}
	end := cs.EndBatch
	f.After.Store(&end)
	cli, err := transport.Dial(ctx, transport.Dealer, cs.Addr(), transport.Options{Identity: []byte("client-1")})
	if err != nil {
		t.Fatal(err)
	}
	h := &clientHarness{f: f, cs: cs, cli: cli, in: make(chan [][]byte, 1024)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := cli.Recv()
			if err != nil {
				return
			}
			h.in <- msg
		}
	}()
	t.Cleanup(func() {
		cli.Close()
		testwait.Closed(t, done, "the client's reader to end")
		f.D.Close() // end what is live before the server closes
		cs.Close()
	})
	return h
}

func (h *clientHarness) add(t *testing.T, id string, maxTokens int64, rank wire.OptInt) {
	t.Helper()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(maxTokens)
	sp.IgnoreEOS = true
	sp.Normalize()
	body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{
		RequestID: id, PromptTokenIDs: []int64{1, 2}, Sampling: &sp, DataParallelRank: rank,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cli.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...); err != nil {
		t.Fatal(err)
	}
}

// next returns the next message the client received.
func (h *clientHarness) next(t *testing.T) [][]byte {
	t.Helper()
	return testwait.Recv(t, h.in, "a message from the server")
}

// nextOutputs expects an EngineCoreOutputs.
func (h *clientHarness) nextOutputs(t *testing.T) *wire.EngineCoreOutputs {
	t.Helper()
	m := h.next(t)
	var o wire.EngineCoreOutputs
	if err := wire.DecodeOutputs(m, &o); err != nil {
		t.Fatalf("not an EngineCoreOutputs (%v): % x", err, m[0])
	}
	return &o
}

// nextError expects an error map.
func (h *clientHarness) nextError(t *testing.T) map[string]any {
	t.Helper()
	return h.decodeError(t, h.next(t))
}

// decodeError decodes an error map.
func (h *clientHarness) decodeError(t *testing.T, m [][]byte) map[string]any {
	t.Helper()
	var e map[string]any
	if len(m) != 1 || len(m[0]) == 0 || m[0][0]&0xf0 != 0x80 {
		t.Fatalf("not an error map: % x", m[0])
	}
	if err := msgpack.Unmarshal(m[0], &e); err != nil {
		t.Fatal(err)
	}
	return e
}
