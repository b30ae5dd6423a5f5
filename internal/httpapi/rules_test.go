package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// EngineRequests runs Prepare itself: the range checks see the caller's values
// before the greedy reset. Normalize used to reset top_p=0 to 1 under temperature 0
// and send it; vLLM refuses it.
func TestEngineRequestsPrepareRefuses(t *testing.T) {
	zero := 0.0
	req := &CompletionRequest{Temperature: &zero, TopP: &zero} // not through Validate
	_, err := req.EngineRequests([][]int64{{1, 2}}, Translate{BaseID: "cmpl-p"})
	apiErr, ok := err.(*APIError)
	if !ok || apiErr.Status != 400 || apiErr.Param != "top_p" {
		t.Fatalf("temperature 0, top_p 0: got %v, want a 400 naming top_p", err)
	}
}

// vLLM's ParentRequest gives child i the seed seed+i; one seed for every choice
// made n identical completions.
func TestEngineRequestsChildSeeds(t *testing.T) {
	for _, tt := range []struct {
		name string
		body string
		want []wire.OptInt
	}{
		{"seed", `{"prompt": [[1], [2]], "n": 3, "seed": 5}`,
			[]wire.OptInt{wire.SomeInt(5), wire.SomeInt(6), wire.SomeInt(7), wire.SomeInt(5), wire.SomeInt(6), wire.SomeInt(7)}},
		{"seed -1 is no seed", `{"prompt": [1], "n": 2, "seed": -1}`, []wire.OptInt{{}, {}}},
		{"no seed", `{"prompt": [1], "n": 2}`, []wire.OptInt{{}, {}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, prompts, err := parse(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			ers, err := req.EngineRequests(prompts, Translate{BaseID: "cmpl-s"})
			if err != nil {
				t.Fatal(err)
			}
			var got []wire.OptInt
			for _, er := range ers {
				got = append(got, er.Sampling.Seed)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("seeds (-want +got):\n%s", diff)
			}
		})
	}
	req, prompts, _ := parse(`{"prompt": [1], "n": 2, "seed": 9223372036854775807}`)
	if _, err := req.EngineRequests(prompts, Translate{BaseID: "cmpl-s"}); err == nil || err.(*APIError).Param != "seed" {
		t.Errorf("seed overflowing with n: %v, want a 400 naming seed", err)
	}
}

// The generation config's further EOS ids join stop_token_ids (unless ignore_eos)
// and _all_stop_token_ids, as update_from_generation_config does.
func TestEngineRequestsSeveralEOS(t *testing.T) {
	m := apicore.ModelRules{EOSTokenIDs: []int64{2, 9, 7}}
	for _, tt := range []struct {
		body              string
		eos               wire.OptInt
		stop, allStop     []int64
		ignoreEOSExpected bool
	}{
		{`{"prompt": [1], "stop_token_ids": [5]}`, wire.SomeInt(2), []int64{5, 9, 7}, []int64{2, 5, 7, 9}, false},
		{`{"prompt": [1], "ignore_eos": true}`, wire.OptInt{}, []int64{}, []int64{2, 7, 9}, true},
	} {
		req, prompts, err := parse(tt.body)
		if err != nil {
			t.Fatal(err)
		}
		ers, err := req.EngineRequests(prompts, Translate{BaseID: "cmpl-e", Model: m})
		if err != nil {
			t.Fatal(err)
		}
		sp := ers[0].Sampling
		if err := ers[0].Validate(); err != nil {
			t.Errorf("%s: %v", tt.body, err)
		}
		if sp.EOSTokenID != tt.eos || sp.IgnoreEOS != tt.ignoreEOSExpected {
			t.Errorf("%s: _eos_token_id %+v ignore_eos %v", tt.body, sp.EOSTokenID, sp.IgnoreEOS)
		}
		if diff := cmp.Diff(tt.stop, sp.StopTokenIDs); diff != "" {
			t.Errorf("%s: stop_token_ids (-want +got):\n%s", tt.body, diff)
		}
		if diff := cmp.Diff(tt.allStop, sp.AllStopTokenIDs); diff != "" {
			t.Errorf("%s: _all_stop_token_ids (-want +got):\n%s", tt.body, diff)
		}
	}
}

func TestModelRulesCheck(t *testing.T) {
	m := apicore.ModelRules{VocabSize: 100, MaxLogprobs: 20}
	bias, _ := msgpack.Marshal(map[int64]float64{3: 1, 100: -1})
	words, _ := msgpack.Marshal([][]int64{{1, 2}, {99, 100}})
	for _, tt := range []struct {
		name  string
		edit  func(q *wire.EngineCoreRequest)
		field string // "" = accepted
	}{
		{"in range", func(q *wire.EngineCoreRequest) {}, ""},
		{"prompt", func(q *wire.EngineCoreRequest) { q.PromptTokenIDs = []int64{1, 100} }, "prompt_token_ids"},
		{"stop_token_ids", func(q *wire.EngineCoreRequest) { q.Sampling.StopTokenIDs = []int64{100} }, "sampling_params.stop_token_ids"},
		{"allowed_token_ids", func(q *wire.EngineCoreRequest) { q.Sampling.AllowedTokenIDs = []int64{5, 123} }, "sampling_params.allowed_token_ids"},
		{"logit_bias", func(q *wire.EngineCoreRequest) { q.Sampling.LogitBias = bias }, "sampling_params.logit_bias"},
		{"bad words", func(q *wire.EngineCoreRequest) { q.Sampling.BadWordsTokenIDs = words }, "sampling_params._bad_words_token_ids"},
		{"logprobs 20", func(q *wire.EngineCoreRequest) { q.Sampling.Logprobs = wire.SomeInt(20) }, ""},
		{"logprobs 21", func(q *wire.EngineCoreRequest) { q.Sampling.Logprobs = wire.SomeInt(21) }, "sampling_params.logprobs"},
		{"logprobs -1", func(q *wire.EngineCoreRequest) { q.Sampling.Logprobs = wire.SomeInt(-1) }, "sampling_params.logprobs"},
		{"prompt_logprobs 21", func(q *wire.EngineCoreRequest) { q.Sampling.PromptLogprobs = wire.SomeInt(21) }, "sampling_params.prompt_logprobs"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sp := wire.DefaultSamplingParams()
			q := &wire.EngineCoreRequest{RequestID: "r", PromptTokenIDs: []int64{1, 99}, Sampling: &sp}
			tt.edit(q)
			err := m.Check(q)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			inv, ok := err.(*wire.ValidationError)
			if !ok || inv.Field != tt.field {
				t.Fatalf("got %v, want a ValidationError on %s", err, tt.field)
			}
		})
	}
	// Off: no vocabulary bound, no logprobs cap.
	sp := wire.DefaultSamplingParams()
	sp.Logprobs = wire.SomeInt(1000)
	if err := (apicore.ModelRules{MaxLogprobs: -1}).Check(&wire.EngineCoreRequest{PromptTokenIDs: []int64{1 << 40}, Sampling: &sp}); err != nil {
		t.Errorf("no bounds configured: %v", err)
	}
}

// The HTTP API applies --vocab-size before anything is sent: 400 naming the field.
func TestCompletionVocabBound(t *testing.T) {
	f := newFakeCore(t, 1)
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return nil },
		Model: apicore.ModelRules{VocabSize: 10, MaxLogprobs: apicore.DefaultMaxLogprobs}})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	for body, param := range map[string]string{
		`{"prompt": [1, 10]}`:                     "prompt",
		`{"prompt": [1], "stop_token_ids": [12]}`: "stop_token_ids",
	} {
		resp, b := post(t, ts, body)
		var e ErrorBody
		_ = json.Unmarshal(b, &e)
		if resp.StatusCode != 400 || e.Error.Param == nil || *e.Error.Param != param {
			t.Errorf("%s: %d %s, want 400 naming %s", body, resp.StatusCode, b, param)
		}
	}
	f.NoAdds(t)
}
