package httpapi

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
)

// vllm:request_max_num_generation_tokens is recorded once per client request
// (per prompt), the most tokens any of its n choices generated, as vLLM's
// ParentRequest records it; not once per choice.
func TestMaxNumGenerationTokensPerClientRequest(t *testing.T) {
	reg := prometheus.NewRegistry()
	vm, err := vllmmetrics.New(reg, "m", 4096)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeCoreConfig(t, 2, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin, VLLM: vm})
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	// Two prompts of n = 3 (choices spread over both engines), then one of n = 1.
	if resp, body := post(t, ts, `{"model": "m", "prompt": [[1, 2], [3, 4]], "max_tokens": 3, "n": 3, "temperature": 1, "ignore_eos": true}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2, "ignore_eos": true}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for name, want := range map[string][2]float64{
		"vllm:request_max_num_generation_tokens": {3, 3 + 3 + 2},
		"vllm:request_params_n":                  {3, 3 + 3 + 1},
	} {
		count, sum := gatheredHist(t, reg, name)
		if count != want[0] || sum != want[1] {
			t.Errorf("%s: %v observations summing to %v, want %v summing to %v", name, count, sum, want[0], want[1])
		}
	}
}

// gatheredHist sums a histogram's count and sum over its series.
func gatheredHist(t *testing.T, reg *prometheus.Registry, name string) (count, sum float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			count += float64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}
