package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// An engine that dies mid-request: the request moves to the other rank, and the
// client gets one answer, plain or streamed, with every token once and the usage of
// the original prompt.
func TestEngineDownMigratesRequest(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			f, ts := newTestAPI(t, 2)
			f.Hold.Store(true) // the first engine emits one token and keeps the request
			body := `{"prompt": [1], "max_tokens": 5}`
			if stream {
				body = `{"prompt": [1], "max_tokens": 5, "stream": true, "stream_options": {"include_usage": true}}`
			}
			type answer struct {
				code int
				body []byte
			}
			res := make(chan answer, 1)
			go func() {
				resp, b := postNoFatal(ts, body)
				if resp == nil {
					res <- answer{0, b}
					return
				}
				res <- answer{resp.StatusCode, b}
			}()
			var first *wire.EngineCoreRequest
			select {
			case first = <-f.Adds:
			case a := <-res:
				t.Fatalf("no ADD: %d %s", a.code, a.body)
			case <-time.After(testwait.Deadline):
				t.Fatal("no ADD and no answer")
			}
			// The fake decided to hold this one before it showed the ADD; the
			// continuation runs to the end.
			f.Hold.Store(false)
			rank := liveRank(t, f)
			f.D.EngineDown(rank, errors.New("killed"))
			moved := testwait.Recv(t, f.Adds, "the continuation's ADD")
			delivered := len(moved.PromptTokenIDs) - 1
			if moved.RequestID == first.RequestID || moved.Sampling.MaxTokens.Value != int64(5-delivered) ||
				!slices.Equal(moved.PromptTokenIDs[:1], []int64{1}) {
				t.Fatalf("continuation %q prompt %v max %v (first %q)", moved.RequestID, moved.PromptTokenIDs, moved.Sampling.MaxTokens, first.RequestID)
			}
			a := testwait.Recv(t, res, "the answer")
			var toks []int64
			var usage [2]int
			finish := ""
			chunks := [][]byte{a.body}
			if stream {
				chunks = nil
				for _, e := range readSSE(t, bytes.NewReader(a.body)) {
					if e != "[DONE]" {
						chunks = append(chunks, []byte(e))
					}
				}
			}
			for _, c := range chunks {
				var v struct {
					Choices []struct {
						TokenIDs     []int64 `json:"token_ids"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
					Usage *struct {
						PromptTokens     int `json:"prompt_tokens"`
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal(c, &v); err != nil {
					t.Fatalf("%s: %v", c, err)
				}
				for _, ch := range v.Choices {
					toks = append(toks, ch.TokenIDs...)
					if ch.FinishReason != nil {
						finish = *ch.FinishReason
					}
				}
				if v.Usage != nil {
					usage = [2]int{v.Usage.PromptTokens, v.Usage.CompletionTokens}
				}
			}
			// The fake engine numbers a request's tokens from 100 on each engine.
			want := append(slices.Clone(moved.PromptTokenIDs[1:]), 100, 101, 102, 103, 104)[:5]
			if a.code != 200 || !slices.Equal(toks, want) || finish != "length" || usage != [2]int{1, 5} {
				t.Fatalf("%d: tokens %v (want %v) finish %q usage %v\n%s", a.code, toks, want, finish, usage, a.body)
			}
		})
	}
}

// On the msgpack protocol a moved request keeps arriving under the client's own id,
// and a client ABORT afterwards reaches the new engine under the new engine id.
func TestClientProtocolEngineDownMigrates(t *testing.T) {
	h := newClientHarness(t, clientapi.ClientConfig{})
	h.f.Hold.Store(true)
	h.add(t, "r1", 4, wire.OptInt{})
	first := testwait.Recv(t, h.f.Adds, "the ADD")
	o := h.nextOutputs(t)
	if len(o.Outputs) != 1 || o.Outputs[0].RequestID != "r1" || !slices.Equal(o.Outputs[0].NewTokenIDs, []int64{100}) {
		t.Fatalf("first output %+v", o.Outputs)
	}
	h.f.D.EngineDown(liveRank(t, h.f), errors.New("killed"))
	moved := testwait.Recv(t, h.f.Adds, "the continuation's ADD")
	if !slices.Equal(moved.PromptTokenIDs, []int64{1, 2, 100}) || moved.Sampling.MaxTokens.Value != 3 || moved.RequestID == first.RequestID {
		t.Fatalf("continuation %q %v max %v", moved.RequestID, moved.PromptTokenIDs, moved.Sampling.MaxTokens)
	}
	o = h.nextOutputs(t) // the held engine's one token (100 again: the fake restarts its count)
	if len(o.Outputs) != 1 || o.Outputs[0].RequestID != "r1" || o.Outputs[0].Finished() {
		t.Fatalf("after the move: %+v", o.Outputs)
	}
	if err := h.cli.Send([]byte{wire.RequestAbort}, wire.AppendAbort(nil, []string{"r1"})); err != nil {
		t.Fatal(err)
	}
	h.f.ExpectAbort(t, moved.RequestID)
}

// liveRank is the one rank with a request in flight, the rank to kill.
func liveRank(t *testing.T, f *fakeEngines) int {
	t.Helper()
	st := f.D.Engines()
	switch {
	case st[0].InFlight == 1 && st[1].InFlight == 0:
		return 0
	case st[0].InFlight == 0 && st[1].InFlight == 1:
		return 1
	}
	t.Fatalf("want one request in flight on one rank: %+v", st)
	return -1
}
