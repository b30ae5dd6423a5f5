package servertest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// FakeEngines stands in for the frontend and its engines: it is the dispatcher's
// Sender and answers each ADD through HandleOutputs from one goroutine, as the
// frontend's output loops do. Token i of a request is 100+i; a request finishes with
// "length" after max_tokens tokens, unless hold is set, in which case it emits one
// token and stays live until aborted. What it receives is observable on channels.
// hold is read as an ADD arrives, before the ADD shows on adds: a test that changes
// hold after receiving an ADD changes only the ADDs after it.
type FakeEngines struct {
	D      *dispatcher.Dispatcher
	in     chan fakeFrame
	Adds   chan *wire.EngineCoreRequest
	Aborts chan string
	Hold   atomic.Bool
	// Utilities counts UTILITY frames received, over every rank.
	Utilities atomic.Int64
	// UtilityBodies receives the body of every UTILITY frame while it has room.
	UtilityBodies chan []byte
	// after, when set, runs after each engine message, as the serve adapter calls
	// clientapi.ClientServer.EndBatch.
	After atomic.Pointer[func(rank int)]
	// keys receives the client key of every ADD (SendFrom) while it has room.
	Keys chan uint64
	// refuse, when set, is returned by SendFrom for every ADD (a busy engine).
	Refuse atomic.Pointer[error]
	wg     sync.WaitGroup
}

// SendFrom makes the fake a dispatcher.ClientSender, as the frontend is: it
// records the client key and may refuse the ADD.
func (f *FakeEngines) SendFrom(_ context.Context, client uint64, rank int, typ byte, body []byte, aux [][]byte) error {
	select {
	case f.Keys <- client:
	default:
	}
	if err := f.Refuse.Load(); err != nil {
		wire.PutBuffer(body)
		return *err
	}
	return f.Send(rank, typ, body, aux)
}

// Handle delivers one engine message.
func (f *FakeEngines) Handle(rank int, outs *wire.EngineCoreOutputs) {
	f.D.HandleOutputs(rank, outs)
	if after := f.After.Load(); after != nil {
		(*after)(rank)
	}
}

type fakeFrame struct {
	rank int
	typ  byte
	body []byte
}

func (f *FakeEngines) Send(rank int, typ byte, body []byte, aux [][]byte) error {
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

// NewFakeCore starts a dispatcher over ranks fake engines, all up.
func NewFakeCore(t testing.TB, ranks int) *FakeEngines {
	t.Helper()
	return NewFakeCoreConfig(t, ranks, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin})
}

// NewFakeCoreConfig is NewFakeCore with the dispatcher's configuration.
func NewFakeCoreConfig(t testing.TB, ranks int, cfg dispatcher.Config) *FakeEngines {
	t.Helper()
	f := &FakeEngines{
		Keys:          make(chan uint64, 1024),
		in:            make(chan fakeFrame, 1024),
		Adds:          make(chan *wire.EngineCoreRequest, 1024),
		Aborts:        make(chan string, 1024),
		UtilityBodies: make(chan []byte, 64),
	}
	d, err := dispatcher.New(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	f.D = d
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

func (f *FakeEngines) run() {
	defer f.wg.Done()
	for fr := range f.in {
		switch fr.typ {
		case wire.RequestAdd:
			var req wire.EngineCoreRequest
			if err := wire.DecodeAdd([][]byte{fr.body}, &req); err != nil {
				panic(err) // the dispatcher sent something an engine would die on
			}
			hold := f.Hold.Load() // before the test can see the ADD and change hold
			f.Adds <- &req
			f.generate(fr.rank, &req, hold)
		case wire.RequestAbort:
			ids, _ := wire.DecodeAbort(fr.body)
			for _, id := range ids {
				f.Aborts <- id
			}
		case wire.RequestUtility:
			f.Utilities.Add(1)
			select {
			case f.UtilityBodies <- fr.body:
			default:
			}
			_, callID, _, _, _ := wire.DecodeUtility(fr.body)
			f.Handle(fr.rank, &wire.EngineCoreOutputs{
				EngineIndex:   int64(fr.rank),
				UtilityOutput: &wire.UtilityOutput{CallID: callID, HasResult: true, Result: wire.Raw{0xc3}},
			})
		}
	}
}

func (f *FakeEngines) generate(rank int, req *wire.EngineCoreRequest, hold bool) {
	n := req.Sampling.MaxTokens.Value
	if hold {
		n = 1
	}
	for i := range n {
		out := wire.EngineCoreOutput{RequestID: req.RequestID, NewTokenIDs: []int64{100 + i}, FinishReason: wire.FinishNone}
		if i == req.Sampling.MaxTokens.Value-1 {
			out.FinishReason = wire.FinishLength
		}
		f.Handle(rank, &wire.EngineCoreOutputs{EngineIndex: int64(rank), Outputs: []wire.EngineCoreOutput{out}})
	}
}

// ExpectAbort waits for an ABORT naming an id with the given prefix.
func (f *FakeEngines) ExpectAbort(t testing.TB, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		select {
		case id := <-f.Aborts:
			if len(id) >= len(prefix) && id[:len(prefix)] == prefix {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no ABORT for %s* reached the engine", prefix)
		}
	}
}

// NoAdds checks that nothing was sent to an engine.
func (f *FakeEngines) NoAdds(t testing.TB) {
	t.Helper()
	select {
	case req := <-f.Adds:
		t.Fatalf("request %s reached an engine", req.RequestID)
	default:
	}
}

// NextKey waits for the client key of the next ADD.
func (f *FakeEngines) NextKey(t testing.TB) uint64 {
	t.Helper()
	select {
	case k := <-f.Keys:
		return k
	case <-time.After(5 * time.Second):
		t.Fatal("no ADD reached the engines")
		return 0
	}
}
