package mockengine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// goleak.VerifyTestMain for this package's test binary lives in wave_test.go (one
// TestMain per binary).

// recvFrames is s.Recv bounded by testwait.Deadline: a socket that never gets a
// message fails the test, naming what it waited for.
func recvFrames(t *testing.T, s transport.Socket, what string) ([][]byte, error) {
	t.Helper()
	return testwait.Result(t, what, s.Recv)
}

func add(id string, maxTokens int64, mut func(*wire.SamplingParams)) *wire.EngineCoreRequest {
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(maxTokens)
	if mut != nil {
		mut(&sp)
	}
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp}
}

// run steps the scheduler until idle and returns tokens, finish reason and stop
// reason per request.
func run(t *testing.T, s *Scheduler) (map[string][]int64, map[string]wire.FinishReason, map[string]wire.StopReason) {
	t.Helper()
	toks, fin, stop := map[string][]int64{}, map[string]wire.FinishReason{}, map[string]wire.StopReason{}
	for i := 0; !s.Idle(); i++ {
		if i > 1000 {
			t.Fatal("scheduler never idles")
		}
		for _, o := range s.Step(nil) {
			toks[o.RequestID] = append(toks[o.RequestID], o.NewTokenIDs...)
			if o.Finished() {
				fin[o.RequestID], stop[o.RequestID] = o.FinishReason, o.StopReason
			}
		}
	}
	return toks, fin, stop
}

// stream is the uninterrupted token stream of add's prompt (the id does not matter).
func stream(_ string, n int) []int64 { return TokensFor([]int64{1, 2, 3}, n) }

func TestSchedulerStopRules(t *testing.T) {
	eosAt := stream("eos", 4)[3]
	stopAt := stream("stop", 3)[2]
	tests := []struct {
		name       string
		req        *wire.EngineCoreRequest
		tokensStep int
		maxLen     int
		want       []int64
		finish     wire.FinishReason
		stopToken  int64
	}{
		{"max_tokens", add("len", 5, nil), 1, 0, stream("len", 5), wire.FinishLength, 0},
		{"several tokens per step", add("len", 5, nil), 2, 0, stream("len", 5), wire.FinishLength, 0},
		{"eos", add("eos", 50, func(p *wire.SamplingParams) { p.EOSTokenID = wire.SomeInt(eosAt) }), 1, 0, stream("eos", 4), wire.FinishStop, 0},
		{"ignore_eos", add("eos", 6, func(p *wire.SamplingParams) { p.EOSTokenID = wire.SomeInt(eosAt); p.IgnoreEOS = true }), 1, 0, stream("eos", 6), wire.FinishLength, 0},
		{"stop_token_ids", add("stop", 50, func(p *wire.SamplingParams) { p.StopTokenIDs = []int64{stopAt} }), 3, 0, stream("stop", 3), wire.FinishStop, stopAt},
		{"max_model_len", add("mml", 50, nil), 1, 7, stream("mml", 4), wire.FinishLength, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewScheduler(tt.tokensStep, tt.maxLen, 8)
			if err := s.Add(tt.req); err != nil {
				t.Fatal(err)
			}
			toks, fin, stop := run(t, s)
			id := tt.req.RequestID
			if !slices.Equal(toks[id], tt.want) || fin[id] != tt.finish || stop[id].Token != tt.stopToken {
				t.Fatalf("got %v %v %+v, want %v %v %d", toks[id], fin[id], stop[id], tt.want, tt.finish, tt.stopToken)
			}
		})
	}
}

// min_tokens masks EOS: a stop token sampled before it is replaced.
func TestSchedulerMinTokens(t *testing.T) {
	eos := stream("m", 2)[1]
	s := NewScheduler(1, 0, 8)
	s.Add(add("m", 10, func(p *wire.SamplingParams) {
		p.EOSTokenID = wire.SomeInt(eos)
		p.MinTokens = 4
	}))
	toks, fin, _ := run(t, s)
	if toks["m"][1] == eos || len(toks["m"]) < 4 {
		t.Fatalf("EOS not masked before min_tokens: %v", toks["m"])
	}
	if fin["m"] != wire.FinishLength && toks["m"][len(toks["m"])-1] != eos {
		t.Fatalf("finish %v tokens %v", fin["m"], toks["m"])
	}
}

func TestSchedulerDuplicateAndAbort(t *testing.T) {
	s := NewScheduler(1, 0, 8)
	s.Add(add("a", 100, nil))
	s.Add(add("b", 2, nil))
	if err := s.Add(add("a", 1, nil)); !errors.Is(err, ErrDuplicateRequest) {
		t.Fatalf("duplicate: %v", err)
	}
	s.Abort([]string{"a", "unknown"})
	toks, fin, _ := run(t, s)
	if _, ok := toks["a"]; ok || fin["b"] != wire.FinishLength {
		t.Fatalf("abort: %v %v", toks, fin)
	}
	if err := s.Add(add("a", 1, nil)); err != nil { // finished ids may be reused
		t.Fatal(err)
	}
	if st := s.Stats(); st.NumRunningReqs != 1 || st.StepCounter != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// The edge: a bootstrapped mock engine on real sockets registers, answers utility
// calls, serves an ADD, and dies with ENGINE_CORE_DEAD on a duplicate live id.
func TestEngineOverSockets(t *testing.T) {
	for _, ep := range []string{"ipc://" + t.TempDir() + "/", "tcp://127.0.0.1:0"} {
		t.Run(ep[:3], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			inEP, outEP := ep, ep
			if ep[:3] == "ipc" {
				inEP, outEP = ep+"in", ep+"out"
			}
			in, err := transport.Listen(ctx, transport.Router, inEP, transport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			out, err := transport.Listen(ctx, transport.Pull, outEP, transport.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			cfg := DefaultConfig()
			cfg.HandshakeAddress, cfg.Inputs, cfg.Outputs = "", []string{in.Addr()}, []string{out.Addr()}
			cfg.Rank, cfg.DataParallelSize, cfg.StepInterval = 3, 4, time.Millisecond
			done := make(chan error, 1)
			go func() { done <- Run(ctx, cfg) }()

			reg, err := recvFrames(t, in, "the registration")
			if err != nil || string(reg[0]) != "\x03\x00" {
				t.Fatalf("registration %q %v", reg, err)
			}
			rr, err := wire.DecodeReadyResponse(reg[1])
			if err != nil || rr.DataParallelRank.Value != 3 {
				t.Fatalf("registration %+v %v", rr, err)
			}
			id := reg[0]
			for i, m := range []string{"is_sleeping", "sleep", "is_sleeping", "wake_up", "reset_prefix_cache", "get_supported_tasks", "nope"} {
				body, _ := wire.AppendUtility(nil, 0, uint64(i), m, nil)
				in.Send(id, []byte{wire.RequestUtility}, body)
			}
			// A nil result value decodes as an empty Raw; "!" marks a failure.
			wantResults := []string{"\xc2", "", "\xc3", "", "\xc3", "\x91\xa8generate", "!"}
			for i, want := range wantResults {
				frames, err := recvFrames(t, out, "the answer to utility call "+strconv.Itoa(i))
				var o wire.EngineCoreOutputs
				if err == nil {
					err = wire.DecodeOutputs(frames, &o)
				}
				if err != nil || o.UtilityOutput == nil || o.UtilityOutput.CallID != uint64(i) || o.EngineIndex != 3 {
					t.Fatalf("utility %d: %+v %v", i, o.UtilityOutput, err)
				}
				if u := o.UtilityOutput; want == "!" && !u.Failure.Valid || want != "!" && string(u.Result) != want {
					t.Fatalf("utility %d: %+v", i, u)
				}
			}
			body, _, _ := wire.AppendAdd(nil, add("x", 3, nil))
			in.Send(id, []byte{wire.RequestAdd}, body)
			var toks []int64
			var stats bool
			for len(toks) < 3 {
				frames, err := recvFrames(t, out, "x's tokens")
				if err != nil {
					t.Fatal(err)
				}
				var o wire.EngineCoreOutputs
				if err := wire.DecodeOutputs(frames, &o); err != nil {
					t.Fatal(err)
				}
				stats = stats || o.SchedulerStats != nil
				for _, x := range o.Outputs {
					toks = append(toks, x.NewTokenIDs...)
				}
			}
			if !slices.Equal(toks, stream("x", 3)) || !stats {
				t.Fatalf("tokens %v stats %v", toks, stats)
			}
			body, _, _ = wire.AppendAdd(nil, add("dup", 100, nil))
			in.Send(id, []byte{wire.RequestAdd}, body)
			in.Send(id, []byte{wire.RequestAdd}, body)
			for {
				frames, err := recvFrames(t, out, "ENGINE_CORE_DEAD after the duplicate ADD")
				if err != nil {
					t.Fatal(err)
				}
				if wire.IsEngineCoreDead(frames) {
					break
				}
			}
			if err := testwait.Recv(t, done, "Run to return after ENGINE_CORE_DEAD"); !errors.Is(err, ErrDuplicateRequest) {
				t.Fatalf("run returned %v", err)
			}
		})
	}
}

// A request resubmitted with its prompt plus the tokens it already produced, and
// max_tokens reduced by as many, continues the uninterrupted stream exactly: what
// a migration relies on.
func TestSchedulerContinuesAMovedSequence(t *testing.T) {
	prompt := []int64{7, 8, 9, 10}
	want := TokensFor(prompt, 12)
	for cut := range 12 {
		s := NewScheduler(1, 0, 8)
		sp := wire.DefaultSamplingParams()
		sp.MaxTokens = wire.SomeInt(int64(12 - cut))
		s.Add(&wire.EngineCoreRequest{RequestID: "moved", PromptTokenIDs: append(slices.Clone(prompt), want[:cut]...), Sampling: &sp})
		toks, _, _ := run(t, s)
		if got := append(slices.Clone(want[:cut]), toks["moved"]...); !slices.Equal(got, want) {
			t.Fatalf("cut at %d: got %v, want %v", cut, got, want)
		}
	}
	if TokenAfter(append(slices.Clone(prompt), want[:5]...)) != want[5] {
		t.Fatal("TokenAfter disagrees with TokensFor")
	}
}
