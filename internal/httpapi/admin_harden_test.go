package httpapi

import (
	"net/http"
	"testing"

	"github.com/switchyard-llm/switchyard/dispatcher"
)

// A request that came through a proxy (any forwarding header) is not local,
// whatever its loopback remote address says.
func TestAdminForwardedNotLocal(t *testing.T) {
	_, ts := newAdminAPI(t, 1, dispatcher.Config{}, APIConfig{})
	for _, h := range [][]string{
		{"X-Forwarded-For", "203.0.113.7"},
		{"X-Forwarded-For", "127.0.0.1"},
		{"Forwarded", "for=203.0.113.7"},
		{"X-Real-IP", "203.0.113.7"},
		{"x-real-ip", ""},
	} {
		if resp, body := call(t, ts, http.MethodPost, "/v1/engines/0/drain?migrate=true", h...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("drain with %s: %q: %d %s; want 403", h[0], h[1], resp.StatusCode, body)
		}
		if resp, body := call(t, ts, http.MethodPost, "/v1/engines/0/undrain", h...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("undrain with %s: %q: %d %s; want 403", h[0], h[1], resp.StatusCode, body)
		}
	}
	if resp, body := call(t, ts, http.MethodPost, "/v1/engines/0/drain"); resp.StatusCode != http.StatusOK {
		t.Errorf("loopback, no forwarding header: %d %s; want 200", resp.StatusCode, body)
	}
}

// The admin token's scheme is matched in any case, as the API keys' is.
func TestAdminBearerAnyCase(t *testing.T) {
	_, ts := newAdminAPI(t, 1, dispatcher.Config{}, APIConfig{AdminToken: "s3cret", APIKeys: []string{"user-key"}})
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		if resp, body := call(t, ts, http.MethodPost, "/v1/engines/0/undrain", "Authorization", scheme+" s3cret"); resp.StatusCode != http.StatusOK {
			t.Errorf("%q scheme: %d %s; want 200", scheme, resp.StatusCode, body)
		}
	}
	for _, h := range []string{"Basic s3cret", "Bearers3cret", "s3cret", "bearer S3CRET", "bearer user-key", "Bearer  s3cret"} {
		if resp, body := call(t, ts, http.MethodPost, "/v1/engines/0/undrain", "Authorization", h); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%q: %d %s; want 401", h, resp.StatusCode, body)
		}
	}
}
