package server

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeEngines stands in for the frontend and its engines: it is the dispatcher's
// Sender and answers each ADD through HandleOutputs from one goroutine, as the
// frontend's output loops do. Token i of a request is 100+i; a request finishes with
// "length" after max_tokens tokens, unless hold is set, in which case it emits one
// token and stays live until aborted. What it receives is observable on channels.
// hold is read as an ADD arrives, before the ADD shows on adds: a test that changes
// hold after receiving an ADD changes only the ADDs after it.
type fakeEngines struct {
	d      *dispatcher.Dispatcher
	in     chan fakeFrame
	adds   chan *wire.EngineCoreRequest
	aborts chan string
	hold   atomic.Bool
	// utilities counts UTILITY frames received, over every rank.
	utilities atomic.Int64
	// after, when set, runs after each engine message, as the serve adapter calls
	// ClientServer.EndBatch.
	after atomic.Pointer[func(rank int)]
	// keys receives the client key of every ADD (SendFrom) while it has room.
	keys chan uint64
	// refuse, when set, is returned by SendFrom for every ADD (a busy engine).
	refuse atomic.Pointer[error]
	wg     sync.WaitGroup
}

// SendFrom makes the fake a dispatcher.ClientSender, as the frontend is: it
// records the client key and may refuse the ADD.
func (f *fakeEngines) SendFrom(_ context.Context, client uint64, rank int, typ byte, body []byte, aux [][]byte) error {
	select {
	case f.keys <- client:
	default:
	}
	if err := f.refuse.Load(); err != nil {
		wire.PutBuffer(body)
		return *err
	}
	return f.Send(rank, typ, body, aux)
}

// handle delivers one engine message.
func (f *fakeEngines) handle(rank int, outs *wire.EngineCoreOutputs) {
	f.d.HandleOutputs(rank, outs)
	if after := f.after.Load(); after != nil {
		(*after)(rank)
	}
}

type fakeFrame struct {
	rank int
	typ  byte
	body []byte
}

func (f *fakeEngines) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	b := append([]byte(nil), body...)
	wire.PutBuffer(body)
	select {
	case f.in <- fakeFrame{rank, typ, b}:
		return nil
	default:
		return &testFullError{}
	}
}

type testFullError struct{}

func (*testFullError) Error() string { return "fake engine queue full" }

// newFakeCore starts a dispatcher over ranks fake engines, all up.
func newFakeCore(t testing.TB, ranks int) *fakeEngines {
	t.Helper()
	return newFakeCoreConfig(t, ranks, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin})
}

// newFakeCoreConfig is newFakeCore with the dispatcher's configuration.
func newFakeCoreConfig(t testing.TB, ranks int, cfg dispatcher.Config) *fakeEngines {
	t.Helper()
	f := &fakeEngines{
		keys:   make(chan uint64, 1024),
		in:     make(chan fakeFrame, 1024),
		adds:   make(chan *wire.EngineCoreRequest, 1024),
		aborts: make(chan string, 1024),
	}
	d, err := dispatcher.New(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	for r := range ranks {
		d.EngineUp(r)
	}
	f.wg.Add(1)
	go f.run()
	t.Cleanup(func() {
		d.Close()
		close(f.in)
		testwait.Wait(t, &f.wg, "the fake engines' loop to end")
	})
	return f
}

func (f *fakeEngines) run() {
	defer f.wg.Done()
	for fr := range f.in {
		switch fr.typ {
		case wire.RequestAdd:
			var req wire.EngineCoreRequest
			if err := wire.DecodeAdd([][]byte{fr.body}, &req); err != nil {
				panic(err) // the dispatcher sent something an engine would die on
			}
			hold := f.hold.Load() // before the test can see the ADD and change hold
			f.adds <- &req
			f.generate(fr.rank, &req, hold)
		case wire.RequestAbort:
			ids, _ := wire.DecodeAbort(fr.body)
			for _, id := range ids {
				f.aborts <- id
			}
		case wire.RequestUtility:
			f.utilities.Add(1)
			_, callID, _, _, _ := wire.DecodeUtility(fr.body)
			f.handle(fr.rank, &wire.EngineCoreOutputs{
				EngineIndex:   int64(fr.rank),
				UtilityOutput: &wire.UtilityOutput{CallID: callID, HasResult: true, Result: wire.Raw{0xc3}},
			})
		}
	}
}

func (f *fakeEngines) generate(rank int, req *wire.EngineCoreRequest, hold bool) {
	n := req.Sampling.MaxTokens.Value
	if hold {
		n = 1
	}
	for i := range n {
		out := wire.EngineCoreOutput{RequestID: req.RequestID, NewTokenIDs: []int64{100 + i}, FinishReason: wire.FinishNone}
		if i == req.Sampling.MaxTokens.Value-1 {
			out.FinishReason = wire.FinishLength
		}
		f.handle(rank, &wire.EngineCoreOutputs{EngineIndex: int64(rank), Outputs: []wire.EngineCoreOutput{out}})
	}
}

// expectAbort waits for an ABORT naming an id with the given prefix.
func (f *fakeEngines) expectAbort(t *testing.T, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case id := <-f.aborts:
			if len(id) >= len(prefix) && id[:len(prefix)] == prefix {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no ABORT for %s* reached the engine", prefix)
		}
	}
}

// noAdds checks that nothing was sent to an engine.
func (f *fakeEngines) noAdds(t *testing.T) {
	t.Helper()
	select {
	case req := <-f.adds:
		t.Fatalf("request %s reached an engine", req.RequestID)
	default:
	}
}
