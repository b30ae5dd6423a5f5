package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/lora"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func loraAPI(t *testing.T, adminToken string) (*httptest.Server, *fakeEngines) {
	t.Helper()
	f := newFakeCore(t, 1)
	reg, err := lora.New(lora.Config{Caller: f.D, BaseModel: "m", Static: []lora.Module{{Name: "sql", Path: "/loras/sql"}}})
	if err != nil {
		t.Fatal(err)
	}
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}, ServedModelName: "m",
		LoRA: reg, AdminToken: adminToken, APIKeys: []string{"k"}})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	return ts, f
}

func loraPost(t *testing.T, ts *httptest.Server, path, body string, hdr ...string) (int, string) {
	t.Helper()
	resp, b := postHeaders(t, ts, path, body, hdr...)
	return resp.StatusCode, string(b)
}

// A completion naming an adapter goes out with its LoRARequest; the base model's
// without one; any other name is vLLM's 404 on the token-id path too.
func TestLoRAModelSelectsAdapter(t *testing.T) {
	ts, f := loraAPI(t, "")
	key := []string{"Authorization", "Bearer k"}
	if resp, b := post(t, ts, `{"model": "sql", "prompt": [1, 2], "max_tokens": 2}`, key...); resp.StatusCode != 200 || !strings.Contains(string(b), `"model":"sql"`) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if add := testwait.Recv(t, f.Adds, "the ADD"); add.LoRA == nil || add.LoRA.Name != "sql" || add.LoRA.IntID != 1 || add.LoRA.Path != "/loras/sql" {
		t.Fatalf("ADD's lora_request %+v", add.LoRA)
	}
	if resp, b := post(t, ts, `{"model": "m", "prompt": [1, 2], "max_tokens": 2}`, key...); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if add := testwait.Recv(t, f.Adds, "the ADD"); add.LoRA != nil {
		t.Fatalf("the base model went out with %+v", add.LoRA)
	}
	if resp, b := post(t, ts, `{"model": "sq1", "prompt": [1, 2], "max_tokens": 2}`, key...); resp.StatusCode != 404 || !strings.Contains(string(b), "The model `sq1` does not exist.") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, err := testwait.HTTPClient.Do(func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/models", nil)
		r.Header.Set("Authorization", "Bearer k")
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			ID, Root string
			Parent   *string
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil || len(models.Data) != 2 || models.Data[1].ID != "sql" ||
		models.Data[1].Root != "/loras/sql" || models.Data[1].Parent == nil || *models.Data[1].Parent != "m" {
		t.Fatalf("/v1/models %+v %v", models, err)
	}
}

// The load and unload endpoints are admin endpoints: the admin token, not the
// API key; vLLM's answers otherwise.
func TestLoRAEndpointsAreAdmin(t *testing.T) {
	ts, f := loraAPI(t, "secret")
	body := `{"lora_name": "fin", "lora_path": "/loras/fin"}`
	if code, b := loraPost(t, ts, "/v1/load_lora_adapter", body, "Authorization", "Bearer k"); code != 401 {
		t.Fatalf("the API key on an admin endpoint: %d %s", code, b)
	}
	if code, b := loraPost(t, ts, "/v1/load_lora_adapter", body, "X-Forwarded-For", "203.0.113.1", "Authorization", "Bearer secret"); code != 403 {
		t.Fatalf("a proxied call: %d %s", code, b)
	}
	admin := []string{"Authorization", "Bearer secret"}
	if code, b := loraPost(t, ts, "/v1/load_lora_adapter", body, admin...); code != 200 || b != "Success: LoRA adapter 'fin' added successfully." {
		t.Fatalf("load: %d %s", code, b)
	}
	if f.Utilities.Load() != 1 {
		t.Errorf("%d utility calls, want one add_lora", f.Utilities.Load())
	}
	if code, b := loraPost(t, ts, "/v1/load_lora_adapter", `{"lora_name": "x"}`, admin...); code != 400 || !strings.Contains(b, "Both 'lora_name' and 'lora_path' must be provided.") {
		t.Fatalf("no path: %d %s", code, b)
	}
	if code, b := loraPost(t, ts, "/v1/load_lora_adapter", `{"lora_name": `, admin...); code != 400 {
		t.Fatalf("bad JSON: %d %s", code, b)
	}
	if code, b := loraPost(t, ts, "/v1/unload_lora_adapter", `{"lora_name": "fin"}`, admin...); code != 200 || b != "Success: LoRA adapter 'fin' removed successfully." {
		t.Fatalf("unload: %d %s", code, b)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/unload_lora_adapter", nil)
	resp, err := testwait.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
}

// Without LoRA the endpoints do not exist, and the token-id path takes any
// model name as before.
func TestLoRAOff(t *testing.T) {
	f := newFakeCore(t, 1)
	api := NewAPI(APIConfig{Dispatcher: f.D, Engines: func() []EngineView { return MergeEngines(nil, f.D.Engines()) },
		Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs}})
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	if code, b := loraPost(t, ts, "/v1/load_lora_adapter", `{"lora_name": "a", "lora_path": "/a"}`); code != 404 {
		t.Fatalf("%d %s", code, b)
	}
	if resp, b := post(t, ts, `{"model": "anything", "prompt": [1, 2], "max_tokens": 2}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
