package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"
)

// toyEngine stands in for an engine core and the frontend's sockets: it is the
// Dispatcher's Sender, and it answers each ADD by feeding outputs back through
// HandleOutputs.
//
// Send must not call back into the Dispatcher: it runs while the request's own
// lock is held (so no abort can overtake the ADD), and HandleOutputs takes that
// lock. So Send only queues the frame, and one goroutine (like a real engine's
// receive loop) decodes it and delivers the outputs.
type toyEngine struct {
	adds chan []byte
	done chan struct{}
}

func newToyEngine() *toyEngine {
	return &toyEngine{adds: make(chan []byte, 16), done: make(chan struct{})}
}

// Send takes ownership of body, as a Sender must: it goes back to wire's pool once
// the engine has read it.
func (e *toyEngine) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	if typ != wire.RequestAdd {
		wire.PutBuffer(body) // ABORTs and UTILITY calls: nothing to answer here
		return nil
	}
	select {
	case e.adds <- body:
		return nil
	default:
		wire.PutBuffer(body)
		return errors.New("toy engine: queue full") // the request fails; Send never blocks long
	}
}

// run is the engine: two steps of output per request, the second one finished.
func (e *toyEngine) run(d *dispatcher.Dispatcher, rank int) {
	defer close(e.done)
	for body := range e.adds {
		var req wire.EngineCoreRequest
		err := wire.DecodeAdd([][]byte{body}, &req)
		wire.PutBuffer(body) // decoded strings are copies; nothing here aliases body
		if err != nil {
			continue
		}
		steps := []wire.EngineCoreOutput{
			{RequestID: req.RequestID, NewTokenIDs: []int64{9906, 11}, FinishReason: wire.FinishNone},
			{RequestID: req.RequestID, NewTokenIDs: []int64{1917, 2}, FinishReason: wire.FinishStop},
		}
		for _, o := range steps {
			d.HandleOutputs(rank, &wire.EngineCoreOutputs{Outputs: []wire.EngineCoreOutput{o}})
		}
	}
}

// Submit a request to one engine and read its stream to the end.
func Example() {
	eng := newToyEngine()
	d, err := dispatcher.New(dispatcher.DefaultConfig(), eng)
	if err != nil {
		fmt.Println(err)
		return
	}
	go eng.run(d, 0)
	d.EngineUp(0) // the frontend calls this when rank 0 has finished its handshake

	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(4)
	sp.SetEOS(wire.SomeInt(2)) // the model's EOS id
	if err := sp.Prepare(); err != nil {
		fmt.Println(err)
		return
	}
	req := &wire.EngineCoreRequest{RequestID: "req-1", PromptTokenIDs: []int64{1, 15043}, Sampling: &sp}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := d.Submit(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("rank:", s.Rank())
	for {
		out, err := s.Recv(ctx)
		if err == io.EOF {
			break // after the output with Finish set
		}
		if err != nil {
			fmt.Println(err) // *RequestFailedError, *SlowConsumerError, ctx.Err()
			break
		}
		fmt.Println("tokens:", out.TokenIDs)
		if out.Finished() {
			fmt.Println("finish:", out.Finish)
		}
	}

	// Close fails whatever is still live; after it returns nothing is sent, so the
	// engine's queue can be closed.
	d.Close()
	close(eng.adds)
	select {
	case <-eng.done:
	case <-ctx.Done():
	}
	// Output:
	// rank: 0
	// tokens: [9906 11]
	// tokens: [1917 2]
	// finish: stop
}
