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
