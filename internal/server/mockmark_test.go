package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Answers from the built-in mock engines are marked; with an engine
// configuration the handler is left as it is.
func TestMarkEngines(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, map[string]any{"status": "ok", "ready_engines": 2})
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		answer(w, map[string]any{"object": "list", "data": []any{map[string]any{"id": "switchyard", "owned_by": "vllm"}}})
	})
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })

	get := func(h http.Handler, method, path string) (*http.Response, map[string]any) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		resp := rec.Result()
		b, _ := io.ReadAll(resp.Body)
		var v map[string]any
		_ = json.Unmarshal(b, &v)
		return resp, v
	}

	mock := markEngines(DefaultConfig(), mux)
	resp, health := get(mock, http.MethodGet, "/health")
	if resp.StatusCode != http.StatusOK || health["engines"] != EnginesMock || health["status"] != "ok" || resp.Header.Get(EnginesHeader) != EnginesMock {
		t.Errorf("/health: %d %v %v", resp.StatusCode, health, resp.Header)
	}
	_, models := get(mock, http.MethodGet, "/v1/models")
	if card := models["data"].([]any)[0].(map[string]any); card["owned_by"] != MockModelOwner || card["id"] != "switchyard" {
		t.Errorf("/v1/models: %v", models)
	}
	if resp, _ := get(mock, http.MethodPost, "/v1/completions"); resp.StatusCode != http.StatusTeapot || resp.Header.Get(EnginesHeader) != EnginesMock {
		t.Errorf("completions: %d %v", resp.StatusCode, resp.Header)
	}

	withEngines := DefaultConfig()
	withEngines.HandshakeAddress = "tcp://127.0.0.1:1"
	resp, health = get(markEngines(withEngines, mux), http.MethodGet, "/health")
	if _, ok := resp.Header[EnginesHeader]; ok || health["engines"] != nil {
		t.Errorf("with engines: %v %v", health, resp.Header)
	}
}
