package server

import (
	"net/http"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// The embedded registry takes serve's token and admin settings: DELETE and
// drain used to be open to anyone who could reach it.
func TestEmbeddedRegistryToken(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.BootstrapAddress = "127.0.0.1:0"
		c.Bootstrap.Token = "s3cret"
	})
	base := "http://" + s.BootstrapAddr()
	for _, tt := range []struct {
		method, path, auth string
		want               int
	}{
		{"DELETE", "/v2/engines/E", "", http.StatusUnauthorized},
		{"POST", "/v2/engines/E/drain", "", http.StatusUnauthorized},
		{"DELETE", "/v2/engines/E", "Bearer s3cret", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(tt.method, base+tt.path, nil)
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := testwait.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s %s (auth %q): %d, want %d", tt.method, tt.path, tt.auth, resp.StatusCode, tt.want)
		}
	}
	testwait.HTTPClient.CloseIdleConnections()
}

// A non-loopback admin network without a token is refused at start.
func TestEmbeddedRegistryAdminNeedsToken(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BootstrapAddress = "127.0.0.1:0"
	cfg.Bootstrap.AdminNetworks = []string{"10.0.0.0/8"}
	if err := cfg.Validate(); err == nil {
		t.Fatal("accepted an open admin network without a token")
	}
}
