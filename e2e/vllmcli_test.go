package e2e

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// `switchyard serve MODEL`, as `vllm serve MODEL`: the directory is loaded as the
// tokenizer and the model is served under the path exactly as given; --host and
// --port name the HTTP address as vLLM's do.
func TestServeModelArgument(t *testing.T) {
	dir, err := filepath.Abs("../internal/minitok")
	if err != nil {
		t.Fatal(err)
	}
	s := startServe(t, "--host", "127.0.0.1", "--port", "0", dir)
	code, body := s.get(t, "/v1/models")
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &models); err != nil || code != 200 || len(models.Data) != 1 || models.Data[0].ID != dir {
		t.Fatalf("/v1/models: %d %s; want the model %q", code, body, dir)
	}
}
