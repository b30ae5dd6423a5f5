package httpapi

import (
	"net/http"
	"testing"
)

// vLLM's defaults ("*" everywhere, no credentials): a preflight is answered 200
// with the allow headers (the requested headers echoed), even with an API key
// required, and a simple request gets Access-Control-Allow-Origin.
func TestCORSDefaults(t *testing.T) {
	_, ts := newParityAPI(t, 1, APIConfig{APIKeys: []string{"k"}})
	resp, body := call(t, ts, http.MethodOptions, "/v1/completions", "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization, x-custom")
	h := resp.Header
	if resp.StatusCode != 200 || body != "OK" || h.Get("Access-Control-Allow-Origin") != "*" ||
		h.Get("Access-Control-Allow-Methods") != "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT" ||
		h.Get("Access-Control-Allow-Headers") != "authorization, x-custom" || h.Get("Access-Control-Max-Age") != "600" ||
		h.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight: %d %q %v", resp.StatusCode, body, h)
	}
	resp, _ = call(t, ts, http.MethodGet, "/health", "Origin", "https://app.example")
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("simple request: %v", resp.Header)
	}
	resp, _ = call(t, ts, http.MethodGet, "/health")
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("no Origin, yet Access-Control-Allow-Origin %q", v)
	}
}

// Explicit lists: the origin is named back (Vary: Origin), credentials are
// allowed, and an origin, method or header outside the lists is a 400 naming it.
func TestCORSExplicit(t *testing.T) {
	_, ts := newParityAPI(t, 1, APIConfig{CORS: CORS{AllowedOrigins: []string{"https://a.example"},
		AllowedMethods: []string{"GET", "POST"}, AllowedHeaders: []string{"Authorization"}, AllowCredentials: true}})
	resp, body := call(t, ts, http.MethodOptions, "/v1/models", "Origin", "https://a.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "Authorization, Content-Type")
	h := resp.Header
	if resp.StatusCode != 200 || h.Get("Access-Control-Allow-Origin") != "https://a.example" || h.Get("Vary") != "Origin" ||
		h.Get("Access-Control-Allow-Methods") != "GET, POST" || h.Get("Access-Control-Allow-Credentials") != "true" ||
		h.Get("Access-Control-Allow-Headers") != "accept, accept-language, authorization, content-language, content-type" {
		t.Errorf("preflight: %d %q %v", resp.StatusCode, body, h)
	}
	resp, body = call(t, ts, http.MethodOptions, "/v1/models", "Origin", "https://b.example",
		"Access-Control-Request-Method", "DELETE", "Access-Control-Request-Headers", "x-other")
	if resp.StatusCode != 400 || body != "Disallowed CORS origin, method, headers" {
		t.Errorf("refused preflight: %d %q", resp.StatusCode, body)
	}
	resp, _ = call(t, ts, http.MethodGet, "/v1/models", "Origin", "https://b.example")
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("origin not allowed, yet Access-Control-Allow-Origin %q", v)
	}
	resp, _ = call(t, ts, http.MethodGet, "/v1/models", "Origin", "https://a.example")
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://a.example" {
		t.Errorf("allowed origin: %v", resp.Header)
	}
}

// vLLM takes its CORS lists as JSON, which the flag parser splits at commas.
func TestCORSJSONList(t *testing.T) {
	got := corsList([]string{`["https://a.example"`, ` "https://b.example"]`})
	if len(got) != 2 || got[0] != "https://a.example" || got[1] != "https://b.example" {
		t.Errorf("%q", got)
	}
	if got := corsList([]string{"https://a.example", "https://b.example"}); len(got) != 2 {
		t.Errorf("%q", got)
	}
}
