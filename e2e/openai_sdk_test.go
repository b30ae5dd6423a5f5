package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// openaiModule is the official openai npm package .ci/run installs under
// ${SWITCHYARD_NODE:-$HOME/.cache/switchyard/node}; missing (or node missing), the test fails in CI
// and skips elsewhere.
func openaiModule(t *testing.T) (node, module string) {
	t.Helper()
	home, _ := os.UserHomeDir()
	nodeDir := filepath.Join(home, ".cache", "switchyard", "node")
	if dir := os.Getenv("SWITCHYARD_NODE"); dir != "" {
		nodeDir = dir
	}
	module = filepath.Join(nodeDir, "node_modules", "openai")
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(module, "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node and the openai npm package are needed (.ci/run installs them): %v", err)
		}
		t.Skipf("node and the openai npm package are needed (.ci/run installs them): %v", err)
	}
	return node, module
}

// TestTextOpenAISDK is the new user's proof: the official openai SDK lists the
// models, chats (plain and streamed) and completes against bare `switchyard serve`.
func TestTextOpenAISDK(t *testing.T) {
	node, module := openaiModule(t)
	s := startServe(t)
	cmd := testwait.Command(t, time.Minute, node, "testdata/openai_sdk.cjs")
	cmd.Env = append(os.Environ(), "OPENAI_MODULE="+module, "BASE_URL=http://"+s.http)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("openai SDK: %v\n%s\n%s", err, out, stderr)
	}
	var got struct {
		Model, Chat, Finish, Streamed, Role, Completion string
		Usage                                           *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
		NotFound *struct {
			Status  int
			Message string
		}
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Model != "switchyard" || len(strings.Fields(got.Chat)) < 3 || got.Finish != "stop" || got.Streamed != got.Chat ||
		got.Role != "assistant" || got.Usage == nil || got.Usage.CompletionTokens == 0 || got.Completion == "" ||
		got.NotFound == nil || got.NotFound.Status != 404 || !strings.Contains(got.NotFound.Message, "does not exist") {
		t.Fatalf("openai SDK saw %s", out)
	}
}
