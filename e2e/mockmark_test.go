package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// The embedded default (no engine configuration: built-in mock engines) still
// answers, as the quickstart needs, but every answer says the engines are mocks,
// so a deployment that lost its handshake address does not pass for healthy.
func TestEmbeddedDefaultIsMarked(t *testing.T) {
	s := startServe(t)
	eventually(t, 20*time.Second, "an engine ready", func() bool { c, _ := s.get(t, "/health"); return c == http.StatusOK })

	resp, err := httpc.Get(s.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	var health map[string]any
	err = json.NewDecoder(resp.Body).Decode(&health)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || health["engines"] != "mock" || health["status"] != "ok" {
		t.Errorf("/health: %d %v (%v); want 200, status ok, engines mock", resp.StatusCode, health, err)
	}
	if h := resp.Header.Get("X-Switchyard-Engines"); h != "mock" {
		t.Errorf("/health: X-Switchyard-Engines %q, want mock", h)
	}

	_, body := s.get(t, "/v1/models")
	var models struct {
		Data []struct {
			OwnedBy string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &models); err != nil || len(models.Data) != 1 || models.Data[0].OwnedBy != "switchyard-mock" {
		t.Errorf("/v1/models: %s (%v); want one model owned by switchyard-mock", body, err)
	}

	r, _, err := s.post(t.Context(), `{"prompt": [1, 2, 3], "max_tokens": 2}`)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusOK || r.Header.Get("X-Switchyard-Engines") != "mock" {
		t.Errorf("completion: %d, X-Switchyard-Engines %q; want 200 and mock", r.StatusCode, r.Header.Get("X-Switchyard-Engines"))
	}
	if l := s.waitLog("NO ENGINE CONFIGURATION: serving built-in MOCK engines, whose answers are made up; answers carry X-Switchyard-Engines: mock. "+
		"Set --handshake-address for real engines; --mock-engines 0 refuses to start without them", time.Second); l["level"] != "WARN" {
		t.Errorf("startup warning at level %v, want WARN", l["level"])
	}
}

// With an engine configuration nothing is marked.
func TestEnginesNotMarked(t *testing.T) {
	s := startServe(t, "--handshake-address", "tcp://127.0.0.1:0")
	resp, err := httpc.Get(s.url("/health"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h, ok := resp.Header["X-Switchyard-Engines"]; ok {
		t.Errorf("/health with --handshake-address: X-Switchyard-Engines %q", h)
	}
}

// --mock-engines 0 (SWITCHYARD_MOCK_ENGINES=0 in the deploy files) refuses to
// start without an engine configuration, saying what to set.
func TestMockEnginesRefused(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"serve", "--mock-engines", "0"}},
		{[]string{"SWITCHYARD_MOCK_ENGINES=0"}, []string{"serve"}},
	} {
		cmd := testwait.Command(t, 20*time.Second, binary, append(tc.args, "--http-address", "127.0.0.1:0", "--client-address", "")...)
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || cmd.ProcessState.ExitCode() != 1 {
			t.Errorf("%v %v: exit %v, want 1", tc.env, tc.args, err)
		}
		for _, want := range []string{"--mock-engines 0", "--handshake-address", "--input-address"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("%v %v: output lacks %q:\n%s", tc.env, tc.args, want, out)
			}
		}
	}
}
