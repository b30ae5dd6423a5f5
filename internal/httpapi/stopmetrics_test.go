package httpapi

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
)

// A request ended by a stop string (found by the frontend, which then aborts
// the engine's request) is counted as vLLM counts it: a success with
// finished_reason stop, and an e2e latency observation; not a cancellation.
func TestStopStringCountedAsStop(t *testing.T) {
	reg := prometheus.NewRegistry()
	vm, err := vllmmetrics.New(reg, "tiny", 4096)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeCoreConfig(t, 1, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin, VLLM: vm})
	f.Hold.Store(true) // one token, then the request stays live until aborted
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		Text: &Text{Name: "tiny", Root: "/models/tiny", MaxModelLen: 4096, Tokenizer: &fakeTextTok{pieces: map[int64]string{100: "Hello STOP there"}},
			Template: fakeTemplate{format: "string"}}})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	code, body := postPath(t, ts, "/v1/completions", `{"prompt": "x", "max_tokens": 50, "stop": ["STOP"]}`)
	var got TextCompletionResponse
	if err := json.Unmarshal(body, &got); err != nil || code != 200 || *got.Choices[0].FinishReason != "stop" {
		t.Fatalf("%d %s", code, body)
	}
	f.ExpectAbort(t, "cmpl-")
	want := `
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="abort",model_name="tiny"} 0
vllm:request_success_total{engine="0",finished_reason="error",model_name="tiny"} 0
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 0
vllm:request_success_total{engine="0",finished_reason="repetition",model_name="tiny"} 0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm:request_success_total"); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(reg, "vllm:e2e_request_latency_seconds")
	if err != nil || n != 1 {
		t.Errorf("e2e latency series: %d, %v", n, err)
	}
}

// vllm:request_params_n records the n a client asked for, once per prompt, not
// the n=1 of each engine request the frontend fans it out into.
func TestParamsNHistogram(t *testing.T) {
	reg := prometheus.NewRegistry()
	vm, err := vllmmetrics.New(reg, "m", 4096)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeCoreConfig(t, 1, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin, VLLM: vm})
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	if resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2, "n": 3, "temperature": 1}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	want := `
# HELP vllm:request_params_n Histogram of the n request parameter.
# TYPE vllm:request_params_n histogram
vllm:request_params_n_bucket{engine="0",model_name="m",le="1"} 1
vllm:request_params_n_bucket{engine="0",model_name="m",le="2"} 1
vllm:request_params_n_bucket{engine="0",model_name="m",le="5"} 2
vllm:request_params_n_bucket{engine="0",model_name="m",le="10"} 2
vllm:request_params_n_bucket{engine="0",model_name="m",le="20"} 2
vllm:request_params_n_bucket{engine="0",model_name="m",le="+Inf"} 2
vllm:request_params_n_sum{engine="0",model_name="m"} 4
vllm:request_params_n_count{engine="0",model_name="m"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm:request_params_n"); err != nil {
		t.Error(err)
	}
}
