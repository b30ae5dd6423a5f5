package e2e

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// TestEmbeddingsOpenAISDK: the official openai SDK's embeddings.create against
// switchyard fronting built-in mock pooling engines of every vLLM layout at once
// (one per release, requests spread round-robin): token-id inputs come back equal
// to what the mock model computes for them, in input order, whatever release's
// PoolingParams layout carried each one; text inputs, float and base64, and
// matryoshka dimensions too.
func TestEmbeddingsOpenAISDK(t *testing.T) {
	node, module := openaiModule(t)
	layouts := strings.Join(wire.LayoutNames(), ",")
	s := startServe(t, "--mock-pooling", "embed", "--mock-engines", "6", "--mock-engine-layouts", layouts, "--lb-policy", "round-robin")
	inputs := [][]int64{{1, 2, 3}, {7}, {9, 8, 7, 6, 5}, {42, 43}, {100, 200, 300, 400}, {5, 5}, {11, 12, 13}}
	in, _ := json.Marshal(inputs)
	cmd := testwait.Command(t, time.Minute, node, "testdata/openai_embeddings.cjs")
	cmd.Env = append(os.Environ(), "OPENAI_MODULE="+module, "BASE_URL=http://"+s.http, "TOKEN_INPUTS="+string(in))
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("openai SDK: %v\n%s\n%s", err, out, stderr)
	}
	var got struct {
		Model, Object string
		ByIDs         []struct {
			Index     int
			Object    string
			Embedding []float64
		}
		Usage     struct{ Prompt_tokens, Total_tokens int }
		AsFloat   []float64
		Texts     []int
		TextUsage struct{ Prompt_tokens int }
		Dims      []float64
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Model != "switchyard" || got.Object != "list" || len(got.ByIDs) != len(inputs) {
		t.Fatalf("openai SDK saw %s", out)
	}
	model := &mockengine.PoolingModel{}
	tokens := 0
	for i, ids := range inputs {
		tokens += len(ids)
		_, want := model.PoolingValues(ids, &wire.PoolingParams{Task: "embed"})
		d := got.ByIDs[i]
		if d.Index != i || d.Object != "embedding" || !close32(d.Embedding, want) {
			t.Fatalf("input %d %v: got %+v, want %v", i, ids, d, want)
		}
	}
	if got.Usage.Prompt_tokens != tokens || got.Usage.Total_tokens != tokens {
		t.Fatalf("usage %+v, want %d prompt tokens", got.Usage, tokens)
	}
	if !close32(got.AsFloat, got.ByIDs[0].Embedding) {
		t.Fatalf("float encoding %v differs from base64's %v", got.AsFloat, got.ByIDs[0].Embedding)
	}
	if len(got.Texts) != 2 || got.Texts[0] != mockengine.DefaultPoolingHidden || got.TextUsage.Prompt_tokens == 0 {
		t.Fatalf("text inputs: %s", out)
	}
	var norm float64
	for _, x := range got.Dims {
		norm += x * x
	}
	if len(got.Dims) != 4 || math.Abs(norm-1) > 1e-5 {
		t.Fatalf("dimensions 4: %v (norm² %v)", got.Dims, norm)
	}
}

// close32 compares as float32s: the engine's tensor is float32.
func close32(got, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if float32(got[i]) != float32(want[i]) {
			return false
		}
	}
	return true
}

// A generative model has no embeddings: the engines' get_supported_tasks says so,
// and /v1/embeddings and /pooling answer vLLM's 400 without an engine request.
func TestEmbeddingsOnGenerativeModel(t *testing.T) {
	s := startServe(t)
	for path, msg := range map[string]string{
		"/v1/embeddings": "The model does not support Embeddings API",
		"/pooling":       "The model does not support Pooling API",
	} {
		resp, err := httpc.Post(s.url(path), "application/json", strings.NewReader(`{"input": [1, 2, 3]}`))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Message, Type string }
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 400 || body.Error.Message != msg || body.Error.Type != "BadRequestError" {
			t.Errorf("%s: %d %+v (%v)", path, resp.StatusCode, body, err)
		}
	}
}
