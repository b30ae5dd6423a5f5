package bootstrap

import (
	"testing"
)

// The /v2 admin API does not take a request with forwarding headers as local:
// behind a reverse proxy on the registry's host every caller is loopback.
func TestAdminForwardedNotLocal(t *testing.T) {
	s, _ := newTestServer(t, testConfig(), newFakeProber())
	h := s.Handler()
	if code, body := do(t, h, "POST", "/register", regBody("A", 0, 0, 0, "tcp://10.0.0.1:1")); code != 200 {
		t.Fatalf("register: %d %s", code, body)
	}
	for _, hdr := range [][]string{
		{"X-Forwarded-For", "203.0.113.7"},
		{"Forwarded", "for=203.0.113.7"},
		{"X-Real-IP", "203.0.113.7"},
	} {
		if code, body := do(t, h, "POST", "/v2/engines/A/drain", "", hdr...); code != 403 {
			t.Errorf("drain with %s: %d %s; want 403", hdr[0], code, body)
		}
		if code, body := do(t, h, "GET", "/v2/engines", "", hdr...); code != 403 {
			t.Errorf("list with %s: %d %s; want 403", hdr[0], code, body)
		}
	}
	if code, body := do(t, h, "POST", "/v2/engines/A/drain", ""); code != 200 {
		t.Errorf("drain from loopback, not forwarded: %d %s; want 200", code, body)
	}
}

// The registry's token, like the API server's keys, takes the Bearer scheme in
// any case.
func TestAdminBearerAnyCase(t *testing.T) {
	cfg := testConfig()
	cfg.Token = "tok"
	s, _ := newTestServer(t, cfg, newFakeProber())
	h := s.Handler()
	do(t, h, "POST", "/register", regBody("A", 0, 0, 0, "tcp://10.0.0.1:1"))
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		if code, body := do(t, h, "POST", "/v2/engines/A/undrain", "", "Authorization", scheme+" tok"); code != 200 {
			t.Errorf("%q scheme: %d %s; want 200", scheme, code, body)
		}
	}
	for _, a := range []string{"Basic tok", "tok", "bearer TOK", "Bearertok"} {
		if code, body := do(t, h, "POST", "/v2/engines/A/undrain", "", "Authorization", a); code != 401 {
			t.Errorf("%q: %d %s; want 401", a, code, body)
		}
	}
}
