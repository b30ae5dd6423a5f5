package mockengine

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// kvFrontend is a fake frontend (ROUTER in, PULL out) of one bootstrapped mock
// engine, and a SUB on the engine's KV events. Every receive is bounded.
type kvFrontend struct {
	t      *testing.T
	layout *wire.Layout
	in     transport.Socket
	id     []byte
	reg    wire.ReadyResponse
	outs   chan [][]byte
	events chan [][]byte // the SUB's messages
	calls  uint64
}

// recvInto forwards s's messages to ch until s closes.
func recvInto(s transport.Socket, ch chan<- [][]byte) {
	for {
		f, err := s.Recv()
		if errors.Is(err, transport.ErrClosed) {
			close(ch)
			return
		}
		if err == nil {
			ch <- f
		}
	}
}

// startKVEngine runs a mock engine of cfg against a fake frontend on ipc
// sockets in dir, and returns once it registered.
func startKVEngine(t *testing.T, dir string, cfg Config) *kvFrontend {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in, err := transport.Listen(ctx, transport.Router, "ipc://"+dir+"/in", transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := transport.Listen(ctx, transport.Pull, "ipc://"+dir+"/out", transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.HandshakeAddress, cfg.Inputs, cfg.Outputs = "", []string{in.Addr()}, []string{out.Addr()}
	f := &kvFrontend{t: t, layout: cfg.Layout, in: in, outs: make(chan [][]byte, 64), events: make(chan [][]byte, 256)}
	ins := make(chan [][]byte, 4)
	go recvInto(in, ins)
	go recvInto(out, f.outs)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := testwait.Recv(t, done, "the mock engine to stop"); err != nil {
			t.Errorf("engine: %v", err)
		}
		in.Close()
		out.Close()
	})
	reg := testwait.Recv(t, ins, "the registration")
	f.id = reg[0]
	if f.reg, err = wire.DecodeReadyResponse(reg[1]); err != nil {
		t.Fatal(err)
	}
	return f
}

// subscribe connects a SUB to endpoint (all topics starting with topic).
func (f *kvFrontend) subscribe(endpoint, topic string) {
	f.t.Helper()
	sub, err := transport.Dial(context.Background(), transport.Sub, endpoint, transport.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { sub.Close() })
	if err := sub.Send(append([]byte{1}, topic...)); err != nil {
		f.t.Fatal(err)
	}
	go recvInto(sub, f.events)
}

// utility calls method and returns its result.
func (f *kvFrontend) utility(method string, args wire.Raw) wire.Raw {
	f.t.Helper()
	f.calls++
	body, err := wire.AppendUtility(nil, 0, f.calls, method, args)
	if err != nil {
		f.t.Fatal(err)
	}
	f.in.Send(f.id, []byte{wire.RequestUtility}, body)
	for {
		var o wire.EngineCoreOutputs
		if err := f.decode(testwait.Recv(f.t, f.outs, method+"'s answer"), &o); err != nil {
			f.t.Fatal(err)
		}
		if u := o.UtilityOutput; u != nil && u.CallID == f.calls {
			return u.Result
		}
	}
}

// decode decodes an output message of the engine's layout.
func (f *kvFrontend) decode(frames [][]byte, o *wire.EngineCoreOutputs) error {
	d := wire.OutputsDecoder{Layout: f.layout}
	*o = wire.EngineCoreOutputs{}
	return d.Decode(frames, o)
}

// generate sends r and returns its outputs' cached tokens once it finished.
func (f *kvFrontend) generate(r *wire.EngineCoreRequest) int64 {
	f.t.Helper()
	body, aux, err := f.layout.AppendAdd(nil, r)
	if err != nil {
		f.t.Fatal(err)
	}
	f.in.Send(append([][]byte{f.id, {wire.RequestAdd}, body}, aux...)...)
	var cached int64
	for {
		var o wire.EngineCoreOutputs
		if err := f.decode(testwait.Recv(f.t, f.outs, r.RequestID+"'s outputs"), &o); err != nil {
			f.t.Fatal(err)
		}
		for _, x := range o.Outputs {
			if x.RequestID != r.RequestID {
				continue
			}
			cached = max(cached, x.NumCachedTokens) // in PrefillStats only, in newer releases
			if x.PrefillStats != nil {
				cached = max(cached, x.PrefillStats.NumCachedTokens)
			}
			if x.Finished() {
				return cached
			}
		}
	}
}

// awaitSubscribed resets the idle engine's cache until the SUB receives the
// AllBlocksCleared it publishes each time: the subscription has then reached the
// PUB (which drops what it sends before). It returns that message's seq.
func (f *kvFrontend) awaitSubscribed() uint64 {
	f.t.Helper()
	deadline := time.Now().Add(testwait.Deadline)
	for time.Now().Before(deadline) {
		f.utility("reset_prefix_cache", nil)
		select {
		case m := <-f.events:
			_, seq, _, err := wire.ParseKVEventMessage(m)
			if err != nil {
				f.t.Fatal(err)
			}
			return seq
		case <-time.After(100 * time.Millisecond):
		}
	}
	f.t.Fatal("the SUB never received a KV event")
	return 0
}

// nextEvents receives the SUB's next message and decodes it, checking its
// framing; want is the seq it must have.
func (f *kvFrontend) nextEvents(d *wire.KVBatchDecoder, topic string, want uint64) (*wire.KVEventBatch, [][]byte) {
	f.t.Helper()
	m := testwait.Recv(f.t, f.events, "KV event message "+strconv.FormatUint(want, 10))
	tp, seq, payload, err := wire.ParseKVEventMessage(m)
	if err != nil || string(tp) != topic || seq != want {
		f.t.Fatalf("message topic %q seq %d (%v), want %q seq %d", tp, seq, err, topic, want)
	}
	b, err := d.Decode(payload)
	if err != nil {
		f.t.Fatalf("seq %d: %v", seq, err)
	}
	if b.Skipped != [wire.KVSkipReasons]int{} {
		f.t.Fatalf("seq %d: events skipped %v", seq, b.Skipped)
	}
	return b, m
}
