package mockengine

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// bootedEngine is a bootstrapped mock engine on loopback TCP with one input and one
// output socket, as a frontend sees it.
type bootedEngine struct {
	in, out transport.Socket
	id      []byte
	done    chan error
}

func bootEngine(t *testing.T) *bootedEngine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	in, err := transport.Listen(ctx, transport.Router, "tcp://127.0.0.1:0", transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := transport.Listen(ctx, transport.Pull, "tcp://127.0.0.1:0", transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.HandshakeAddress, cfg.Inputs, cfg.Outputs = "", []string{in.Addr()}, []string{out.Addr()}
	cfg.StepInterval = time.Millisecond
	e := &bootedEngine{in: in, out: out, done: make(chan error, 1)}
	go func() { e.done <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		testwait.Recv(t, e.done, "Run to return after cancel")
		in.Close()
		out.Close()
	})
	reg, err := recvFrames(t, in, "the engine's registration")
	if err != nil {
		t.Fatal(err)
	}
	e.id = reg[0]
	return e
}

func (e *bootedEngine) sendAdd(t *testing.T, q *wire.EngineCoreRequest) {
	t.Helper()
	body, aux, err := wire.AppendAdd(nil, q)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.in.Send(append([][]byte{e.id, {wire.RequestAdd}, body}, aux...)...); err != nil {
		t.Fatal(err)
	}
}

// result waits for Run's error and leaves it for the cleanup, which waits too.
func (e *bootedEngine) result(t *testing.T) error {
	t.Helper()
	err := testwait.Recv(t, e.done, "Run to return")
	e.done <- err
	return err
}

// untilDead reads outputs until ENGINE_CORE_DEAD and returns Run's error.
func (e *bootedEngine) untilDead(t *testing.T) error {
	t.Helper()
	for {
		frames, err := recvFrames(t, e.out, "ENGINE_CORE_DEAD")
		if err != nil {
			t.Fatalf("no ENGINE_CORE_DEAD: %v", err)
		}
		if wire.IsEngineCoreDead(frames) {
			return e.result(t)
		}
	}
}

// finished reads outputs until request id finishes and returns its tokens.
func (e *bootedEngine) finished(t *testing.T, id string) []int64 {
	t.Helper()
	var toks []int64
	for {
		frames, err := recvFrames(t, e.out, id+"'s outputs")
		if err != nil {
			t.Fatal(err)
		}
		if wire.IsEngineCoreDead(frames) {
			t.Fatalf("engine died: %v", e.result(t))
		}
		var o wire.EngineCoreOutputs
		if err := wire.DecodeOutputs(frames, &o); err != nil {
			t.Fatal(err)
		}
		for _, x := range o.Outputs {
			if x.RequestID == id {
				toks = append(toks, x.NewTokenIDs...)
				if x.Finished() {
					return toks
				}
			}
		}
	}
}

// TestEngineDiesWhereVLLMDies: an ADD a real engine's input thread dies on makes
// the mock send ENGINE_CORE_DEAD and exit with ErrInputThreadDied (W7); the cases
// mirror wire.EngineAccepts' sources.
func TestEngineDiesWhereVLLMDies(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(q *wire.EngineCoreRequest)
	}{
		{"invalid UTF-8 id", func(q *wire.EngineCoreRequest) { q.RequestID = "\xff" }},                       // msgspec str decode
		{"top_p 0", func(q *wire.EngineCoreRequest) { q.Sampling.TopP = 0 }},                                 // _verify_args
		{"stop empty string", func(q *wire.EngineCoreRequest) { q.Sampling.Stop = []string{""} }},            // _verify_args
		{"lora id 0", func(q *wire.EngineCoreRequest) { q.LoRA = &wire.LoRARequest{Name: "a", Path: "/p"} }}, // LoRARequest.__post_init__
		{"repetition min_count", func(q *wire.EngineCoreRequest) {
			q.Sampling.RepetitionDetection = wire.Raw{0x81, 0xb0, 'm', 'a', 'x', '_', 'p', 'a', 't', 't', 'e', 'r', 'n', '_', 's', 'i', 'z', 'e', 0x04}
		}}, // RepetitionDetectionParams.__post_init__
		{"structured none set", func(q *wire.EngineCoreRequest) { q.Sampling.StructuredOutputs = wire.Raw{0x80} }}, // StructuredOutputsParams.__post_init__
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := bootEngine(t)
			q := add("r", 3, nil)
			tt.edit(q)
			e.sendAdd(t, q)
			if err := e.untilDead(t); !errors.Is(err, ErrInputThreadDied) {
				t.Fatalf("Run returned %v, want ErrInputThreadDied", err)
			}
		})
	}
}

// TestEngineTakesWhatVLLMTakes: switchyard's stricter rules (n == 1, max_tokens
// set, no unknown keys, json_object true) are not the engine's; the mock serves
// such requests like a real engine would.
func TestEngineTakesWhatVLLMTakes(t *testing.T) {
	e := bootEngine(t)
	q := add("lenient", 3, func(p *wire.SamplingParams) {
		p.N = 2
		p.Unknown = []wire.RawField{{Key: "future_knob", Value: wire.Raw{0x01}}}
		p.StructuredOutputs = wire.Raw{0x81, 0xab, 'j', 's', 'o', 'n', '_', 'o', 'b', 'j', 'e', 'c', 't', 0xc2}
	})
	if q.Validate() == nil {
		t.Fatal("expected switchyard's Validate to refuse this request")
	}
	e.sendAdd(t, q)
	if toks := e.finished(t, "lenient"); !slices.Equal(toks, stream("lenient", 3)) {
		t.Fatalf("tokens %v", toks)
	}
}

// TestEngineDiesWithoutOutputSocket: outputs for a client_index with no output
// socket are not dropped; the engine dies as vLLM's output thread does (W8).
func TestEngineDiesWithoutOutputSocket(t *testing.T) {
	e := bootEngine(t)
	q := add("c1", 3, nil)
	q.ClientIndex = 1
	e.sendAdd(t, q)
	if err := e.untilDead(t); !errors.Is(err, ErrNoOutputSocket) {
		t.Fatalf("Run returned %v, want ErrNoOutputSocket", err)
	}
	e2 := bootEngine(t)
	body, _ := wire.AppendUtility(nil, 4, 1, "is_sleeping", nil)
	e2.in.Send(e2.id, []byte{wire.RequestUtility}, body)
	if err := e2.untilDead(t); !errors.Is(err, ErrNoOutputSocket) {
		t.Fatalf("utility: Run returned %v, want ErrNoOutputSocket", err)
	}
}

// TestSchedulerMinTokensBeatsMaxModelLen: check_stop returns False before
// min_tokens whatever the length (vllm/v1/core/sched/utils.py), C5.
func TestSchedulerMinTokensBeatsMaxModelLen(t *testing.T) {
	s := NewScheduler(1, 5, 8) // prompt of 3: the model length is reached after 2 tokens
	s.Add(add("m", 10, func(p *wire.SamplingParams) { p.MinTokens = 4 }))
	toks, fin, _ := run(t, s)
	if len(toks["m"]) != 4 || fin["m"] != wire.FinishLength {
		t.Fatalf("got %d tokens, finish %v; want 4 and length", len(toks["m"]), fin["m"])
	}
}

// TestSchedulerResumableContinuation: a same-id ADD for a live request added
// resumable is a streaming-input continuation in vLLM's Scheduler.add_request, not
// a fatal duplicate (C5); a duplicate of a request that was not resumable is.
func TestSchedulerResumableContinuation(t *testing.T) {
	s := NewScheduler(1, 0, 8)
	first := add("sess", 3, nil)
	first.Resumable = true
	if err := s.Add(first); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(add("sess", 3, nil)); err != nil || s.Continuations != 1 {
		t.Fatalf("continuation: %v, %d counted", err, s.Continuations)
	}
	if toks, _, _ := run(t, s); !slices.Equal(toks["sess"], stream("sess", 3)) {
		t.Fatalf("tokens %v", toks["sess"])
	}
	s.Add(add("plain", 3, nil))
	again := add("plain", 3, nil)
	again.Resumable = true // it is the live request's flag that counts
	if err := s.Add(again); !errors.Is(err, ErrDuplicateRequest) {
		t.Fatalf("duplicate of a non-resumable request: %v", err)
	}
}
