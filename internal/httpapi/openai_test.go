package httpapi

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// parse runs the whole pure path: decode, validate, prompts.
func parse(body string) (*CompletionRequest, [][]int64, error) {
	req, err := ParseCompletion([]byte(body))
	if err != nil {
		return nil, nil, err
	}
	if err := req.Validate(); err != nil {
		return nil, nil, err
	}
	p, err := req.Prompts()
	return req, p, err
}

func TestParseCompletionRejects(t *testing.T) {
	tests := []struct {
		name, body string
		wantParam  string
		wantMsg    string
	}{
		{"malformed JSON", `{"prompt": [1,2`, "", "invalid JSON body"},
		{"empty body", ``, "", "empty body"},
		{"trailing garbage", `{"prompt": [1]} {}`, "", "unexpected data"},
		{"missing prompt", `{"max_tokens": 4}`, "prompt", "prompt is required"},
		{"null prompt", `{"prompt": null}`, "prompt", "prompt is required"},
		{"text prompt", `{"prompt": "hello"}`, "prompt", "text needs a tokenizer"},
		{"text prompts", `{"prompt": ["hello", "you"]}`, "prompt", "text needs a tokenizer"},
		{"mixed prompts", `{"prompt": ["hello", [1]]}`, "prompt", "all strings or all lists"},
		{"empty prompt", `{"prompt": []}`, "prompt", "must not be empty"},
		{"empty inner prompt", `{"prompt": [[1], []]}`, "prompt", "prompt[1] must not be empty"},
		{"negative token", `{"prompt": [1, -2, 3]}`, "prompt", "prompt[1]: token id -2 is negative"},
		{"negative token nested", `{"prompt": [[1], [4, -1]]}`, "prompt", "prompt[1][1]: token id -1 is negative"},
		{"float token", `{"prompt": [1.5]}`, "prompt", "non-negative integer"},
		{"max_tokens type", `{"prompt": [1], "max_tokens": "4"}`, "max_tokens", "expected an integer"},
		{"max_tokens zero", `{"prompt": [1], "max_tokens": 0}`, "max_tokens", "at least 1"},
		{"n zero", `{"prompt": [1], "n": 0}`, "n", "between 1 and"},
		{"n too big", `{"prompt": [1], "n": 1000}`, "n", "between 1 and"},
		{"temperature negative", `{"prompt": [1], "temperature": -0.1}`, "temperature", "temperature must be in"},
		{"temperature too big", `{"prompt": [1], "temperature": 2.5}`, "temperature", "temperature must be in"},
		{"top_p zero", `{"prompt": [1], "top_p": 0}`, "top_p", "(0, 1]"},
		{"top_p above one", `{"prompt": [1], "top_p": 1.1}`, "top_p", "(0, 1]"},
		{"top_k below -1", `{"prompt": [1], "top_k": -2}`, "top_k", "top_k"},
		{"min_p above one", `{"prompt": [1], "min_p": 1.5}`, "min_p", "min_p"},
		{"presence_penalty", `{"prompt": [1], "presence_penalty": 3}`, "presence_penalty", "presence_penalty"},
		{"frequency_penalty", `{"prompt": [1], "frequency_penalty": -3}`, "frequency_penalty", "frequency_penalty"},
		{"repetition_penalty", `{"prompt": [1], "repetition_penalty": 0}`, "repetition_penalty", "greater than 0"},
		{"min_tokens negative", `{"prompt": [1], "min_tokens": -1}`, "min_tokens", "greater than or equal to 0"},
		{"min_tokens over max", `{"prompt": [1], "max_tokens": 2, "min_tokens": 3}`, "min_tokens", "max_tokens=2"},
		{"stop token negative", `{"prompt": [1], "stop_token_ids": [5, -1]}`, "stop_token_ids", "stop_token_ids[1]"},
		{"stop strings", `{"prompt": [1], "stop": ["\n"]}`, "stop", "--tokenizer"},
		{"echo", `{"prompt": [1], "echo": true}`, "echo", "--tokenizer"},
		{"logprobs", `{"prompt": [1], "logprobs": 2}`, "logprobs", "--tokenizer"},
		{"best_of", `{"prompt": [1], "best_of": 3}`, "best_of", "must equal n"},
		{"stream_options without stream", `{"prompt": [1], "stream_options": {"include_usage": true}}`, "stream_options", "only allowed"},
		{"seed type", `{"prompt": [1], "seed": "x"}`, "seed", "expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parse(tt.body)
			if err == nil {
				t.Fatalf("accepted %s", tt.body)
			}
			ae, ok := err.(*APIError)
			if !ok {
				t.Fatalf("error %T %v, want *APIError", err, err)
			}
			if ae.Status != 400 || ae.Type != TypeBadRequest {
				t.Errorf("status %d type %q, want 400 %s", ae.Status, ae.Type, TypeBadRequest)
			}
			if ae.Param != tt.wantParam {
				t.Errorf("param %q, want %q", ae.Param, tt.wantParam)
			}
			if !strings.Contains(ae.Message, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", ae.Message, tt.wantMsg)
			}
		})
	}
}

func TestParseCompletionAccepts(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		wantPrompts [][]int64
		wantN       int64
	}{
		{"flat", `{"prompt": [1, 2, 3]}`, [][]int64{{1, 2, 3}}, 1},
		{"nested", `{"prompt": [[1], [2, 3]], "n": 2}`, [][]int64{{1}, {2, 3}}, 2},
		{"extras ignored", `{"model": "m", "prompt": [0], "user": "u", "frequency_penalty": 0.5}`, [][]int64{{0}}, 1},
		{"empty stop allowed", `{"prompt": [7], "stop": [], "best_of": 1}`, [][]int64{{7}}, 1},
		{"edges", `{"prompt": [7], "temperature": 0, "top_p": 1, "top_k": -1, "min_p": 1, "presence_penalty": -2}`, [][]int64{{7}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, prompts, err := parse(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantPrompts, prompts); diff != "" {
				t.Errorf("prompts (-want +got):\n%s", diff)
			}
			if req.Choices() != tt.wantN {
				t.Errorf("n = %d, want %d", req.Choices(), tt.wantN)
			}
		})
	}
}

func TestEngineRequestsFanOut(t *testing.T) {
	req, prompts, err := parse(`{"prompt": [[1, 2], [3]], "n": 2, "max_tokens": 5, "temperature": 0.5,
		"top_k": 4, "seed": 9, "stop_token_ids": [7], "min_tokens": 1, "priority": 3, "cache_salt": "s"}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := req.EngineRequests(prompts, Translate{
		BaseID: "cmpl-x", Model: apicore.ModelRules{EOSTokenIDs: []int64{2}}, Rank: wire.SomeInt(1), ArrivalTime: 12.5,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d engine requests, want 4", len(got))
	}
	wantPrompt := [][]int64{{1, 2}, {1, 2}, {3}, {3}}
	for i, er := range got {
		if err := er.Validate(); err != nil {
			t.Errorf("request %d does not validate: %v", i, err)
		}
		if want := "cmpl-x-" + string(rune('0'+i)); er.RequestID != want {
			t.Errorf("request %d id %q, want %q", i, er.RequestID, want)
		}
		if diff := cmp.Diff(wantPrompt[i], er.PromptTokenIDs); diff != "" {
			t.Errorf("request %d prompt (-want +got):\n%s", i, diff)
		}
		sp := er.Sampling
		if sp.N != 1 || sp.MaxTokens != wire.SomeInt(5) || sp.Temperature != 0.5 || sp.TopK != 4 ||
			sp.Seed != wire.SomeInt(9+int64(i%2)) || sp.MinTokens != 1 || sp.EOSTokenID != wire.SomeInt(2) {
			t.Errorf("request %d sampling %+v", i, sp)
		}
		if diff := cmp.Diff([]int64{2, 7}, sp.AllStopTokenIDs); diff != "" {
			t.Errorf("request %d _all_stop_token_ids (-want +got):\n%s", i, diff)
		}
		if er.DataParallelRank != wire.SomeInt(1) || er.Priority != 3 || er.CacheSalt != wire.SomeString("s") ||
			er.ExternalReqID != wire.SomeString("cmpl-x") || er.ArrivalTime != 12.5 {
			t.Errorf("request %d fields %+v", i, er)
		}
	}
	// Each request owns its slices: the encoder may run on them concurrently.
	got[0].Sampling.StopTokenIDs[0] = 99
	if got[1].Sampling.StopTokenIDs[0] != 7 {
		t.Error("engine requests share a stop_token_ids slice")
	}
}

func TestEngineRequestsWithoutEOS(t *testing.T) {
	req, prompts, err := parse(`{"prompt": [1]}`)
	if err != nil {
		t.Fatal(err)
	}
	ers, err := req.EngineRequests(prompts, Translate{BaseID: "cmpl-y"})
	if err != nil {
		t.Fatal(err)
	}
	er := ers[0]
	if err := er.Validate(); err != nil {
		t.Fatalf("request without an EOS does not validate: %v", err)
	}
	if !er.Sampling.IgnoreEOS || er.Sampling.EOSTokenID.Valid {
		t.Errorf("no EOS configured: ignore_eos %v, _eos_token_id %+v; want ignore_eos and no EOS", er.Sampling.IgnoreEOS, er.Sampling.EOSTokenID)
	}
	if er.Sampling.MaxTokens != wire.SomeInt(DefaultMaxTokens) {
		t.Errorf("max_tokens %+v, want the default %d", er.Sampling.MaxTokens, DefaultMaxTokens)
	}
	if er.DataParallelRank.Valid {
		t.Error("rank pinned without a header")
	}
}

func TestInvalidRankError(t *testing.T) {
	e := InvalidRankError(5, []int{0, 1})
	want := "data parallel rank 5 is not connected to this frontend; connected ranks: [0, 1]"
	if e.Message != want || e.Status != 400 || e.Type != "InvalidDataParallelRank" {
		t.Errorf("got %d %s %q", e.Status, e.Type, e.Message)
	}
	if diff := cmp.Diff([]int{0, 1}, e.body().Error.ConnectedRanks); diff != "" {
		t.Errorf("connected_ranks (-want +got):\n%s", diff)
	}
	if got := InvalidRankError(3, nil).body().Error.ConnectedRanks; got == nil {
		t.Error("connected_ranks is omitted when no rank is connected; want []")
	}
}
