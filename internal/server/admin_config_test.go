package server

import (
	"strings"
	"testing"
)

// --api-key without --admin-token is refused at start: the API keys do not
// cover drain/undrain, which would then trust any loopback caller, and behind a
// reverse proxy on the same host that is every client.
func TestAPIKeyNeedsAdminToken(t *testing.T) {
	cfg := DefaultConfig()
	cfg.APIKeys = []string{"user-key"}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "--admin-token") || !strings.Contains(err.Error(), "--api-key") {
		t.Fatalf("--api-key without --admin-token: %v; want an error naming both flags", err)
	}
	cfg.AdminToken = "s3cret"
	if err := cfg.Validate(); err != nil {
		t.Errorf("--api-key with --admin-token: %v", err)
	}
	cfg.APIKeys = nil
	cfg.AdminToken = ""
	if err := cfg.Validate(); err != nil {
		t.Errorf("neither flag: %v", err)
	}
}
