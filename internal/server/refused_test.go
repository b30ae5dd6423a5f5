package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
	"github.com/switchyard-llm/switchyard/wire"
)

// The frontend's refusal of an engine reaches the dispatcher through the
// composition root, so a request pinned to that rank is told why.
func TestEngineRefusedReachesTheDispatcher(t *testing.T) {
	f := newFakeCore(t, 1)
	var h frontend.Handler = &engineEvents{d: f.D, log: slog.New(slog.DiscardHandler)}
	rh, ok := h.(frontend.RefusalHandler)
	if !ok {
		t.Fatal("the engine-event adapter does not hear of refused engines")
	}
	rh.EngineRefused(2, errors.New("max_model_len 0"))
	sp := wire.DefaultSamplingParams()
	sp.IgnoreEOS = true
	_, err := f.D.Submit(context.Background(), &wire.EngineCoreRequest{RequestID: "r", PromptTokenIDs: []int64{1},
		Sampling: &sp, DataParallelRank: wire.SomeInt(2)})
	var bad *dispatcher.InvalidDataParallelRank
	if !errors.As(err, &bad) || bad.Reason != "max_model_len 0" {
		t.Fatalf("pinned to the refused rank: %v", err)
	}
}

// The engine's registered num_gpu_blocks labels vllm:cache_config_info, as vLLM's.
func TestCacheConfigInfoFromRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	vm, err := vllmmetrics.New(reg, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeCoreConfig(t, 0, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin, VLLM: vm})
	h := &engineEvents{d: f.D, log: slog.New(slog.DiscardHandler)}
	h.EngineUp(0, frontend.EngineInfo{Rank: 0, Ready: wire.ReadyResponse{MaxModelLen: wire.SomeInt(4096), NumGPUBlocks: wire.SomeInt(1234)}})
	want := `
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig.
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{engine="0",model_name="m",num_gpu_blocks="1234"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "vllm:cache_config_info"); err != nil {
		t.Error(err)
	}
}

// --max-model-len caps what the engines registered: requests fit the smaller.
func TestMaxModelLenCapsEngines(t *testing.T) {
	f := newFakeCoreConfig(t, 0, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin})
	h := &engineEvents{d: f.D, log: slog.New(slog.DiscardHandler), maxModelLen: 100}
	h.EngineUp(0, frontend.EngineInfo{Rank: 0, Ready: wire.ReadyResponse{MaxModelLen: wire.SomeInt(4096)}})
	h.EngineUp(1, frontend.EngineInfo{Rank: 1, Ready: wire.ReadyResponse{MaxModelLen: wire.SomeInt(50)}})
	for _, c := range []struct {
		rank, prompt int
		want         int64
	}{{0, 150, 100}, {1, 60, 50}} {
		sp := wire.DefaultSamplingParams()
		sp.IgnoreEOS = true
		_, err := f.D.Submit(context.Background(), &wire.EngineCoreRequest{RequestID: "r", PromptTokenIDs: make([]int64, c.prompt),
			Sampling: &sp, DataParallelRank: wire.SomeInt(int64(c.rank))})
		var long *dispatcher.PromptTooLongError
		if !errors.As(err, &long) || long.MaxModelLen != c.want {
			t.Errorf("rank %d, prompt %d: %v; want a refusal at %d", c.rank, c.prompt, err, c.want)
		}
	}
	if got := h.contexts.largest(-1); got != 100 {
		t.Errorf("largest context %d, want 100", got)
	}
}
