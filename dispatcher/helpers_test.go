package dispatcher

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sentFrame is one frame a fakeSender accepted, decoded enough to assert on.
type sentFrame struct {
	rank int
	typ  byte
	body []byte
	add  *wire.EngineCoreRequest // typ == RequestAdd
	ids  []string                // typ == RequestAbort
	// typ == RequestUtility
	clientIndex int64
	callID      uint64
	method      string
	args        wire.Raw
}

// fakeSender records frames instead of writing them; fail makes a rank refuse.
type fakeSender struct {
	t      testing.TB
	decode bool // decode bodies (off in benchmarks)
	mu     sync.Mutex
	frames []sentFrame
	fail   map[int]error
	ch     chan sentFrame
}

func newFakeSender(t testing.TB) *fakeSender {
	return &fakeSender{t: t, decode: true, fail: map[int]error{}, ch: make(chan sentFrame, 1<<16)}
}

func (f *fakeSender) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	f.mu.Lock()
	err := f.fail[rank]
	f.mu.Unlock()
	if err != nil {
		wire.PutBuffer(body)
		return err
	}
	if !f.decode {
		wire.PutBuffer(body)
		return nil
	}
	fr := sentFrame{rank: rank, typ: typ, body: append([]byte(nil), body...)}
	wire.PutBuffer(body)
	var derr error
	switch typ {
	case wire.RequestAdd:
		fr.add = &wire.EngineCoreRequest{}
		derr = wire.DecodeAdd(append([][]byte{fr.body}, aux...), fr.add)
	case wire.RequestAbort:
		fr.ids, derr = wire.DecodeAbort(fr.body)
	case wire.RequestUtility:
		fr.clientIndex, fr.callID, fr.method, fr.args, derr = wire.DecodeUtility(fr.body)
	}
	if derr != nil {
		f.t.Errorf("fakeSender: rank %d type %d: undecodable body: %v", rank, typ, derr)
	}
	f.mu.Lock()
	f.frames = append(f.frames, fr)
	f.mu.Unlock()
	select {
	case f.ch <- fr:
	default:
	}
	return nil
}

func (f *fakeSender) setFail(rank int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, rank)
	} else {
		f.fail[rank] = err
	}
}

// sent returns the frames of type typ recorded so far.
func (f *fakeSender) sent(typ byte) []sentFrame {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sentFrame
	for _, fr := range f.frames {
		if fr.typ == typ {
			out = append(out, fr)
		}
	}
	return out
}

// next waits for the next frame of type typ (others are skipped) or fails the test.
func (f *fakeSender) next(t testing.TB, typ byte) sentFrame {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case fr := <-f.ch:
			if fr.typ == typ {
				return fr
			}
		case <-deadline.C:
			t.Fatalf("no frame of type %d within 5s", typ)
		}
	}
}

// harness is a Dispatcher over a fakeSender with ranks already up.
type harness struct {
	d   *Dispatcher
	s   *fakeSender
	reg *prometheus.Registry
}

func newHarness(t testing.TB, cfg Config, ranks ...int) *harness {
	t.Helper()
	s := newFakeSender(t)
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	d, err := New(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	for _, r := range ranks {
		d.EngineUp(r)
	}
	return &harness{d: d, s: s, reg: reg}
}

func mkReq(id string) *wire.EngineCoreRequest {
	sp := wire.DefaultSamplingParams()
	sp.SetEOS(wire.SomeInt(2))
	sp.Normalize()
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp}
}

func pinned(id string, rank int64) *wire.EngineCoreRequest {
	r := mkReq(id)
	r.DataParallelRank = wire.SomeInt(rank)
	return r
}

func tokOut(id string, toks ...int64) wire.EngineCoreOutput {
	return wire.EngineCoreOutput{RequestID: id, NewTokenIDs: toks, FinishReason: wire.FinishNone}
}

func finOut(id string, f wire.FinishReason, toks ...int64) wire.EngineCoreOutput {
	return wire.EngineCoreOutput{RequestID: id, NewTokenIDs: toks, FinishReason: f}
}

func batch(rank int, outs ...wire.EngineCoreOutput) *wire.EngineCoreOutputs {
	return &wire.EngineCoreOutputs{EngineIndex: int64(rank), Outputs: outs}
}

// waitCtx ends after testwait.Deadline: the context for a call, such as a Stream's
// Recv, that would otherwise wait with no end.
func waitCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
	t.Cleanup(cancel)
	return ctx
}

// recvAll reads a stream to its end, returning every output and the terminal error
// (nil for io.EOF).
func recvAll(t testing.TB, s *Stream) ([]Output, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var outs []Output
	for {
		o, err := s.Recv(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return outs, nil
			}
			return outs, err
		}
		outs = append(outs, o)
	}
}
