package e2e

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// serve refuses --api-key without --admin-token, from flags or the environment,
// with an error naming both flags.
func TestAPIKeyWithoutAdminTokenRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"--api-key", "k"}},
		{"VLLM_API_KEY", []string{"VLLM_API_KEY=k"}, nil},
	} {
		cmd := testwait.Command(t, testwait.Deadline, binary, append([]string{"serve", "--http-address", "127.0.0.1:0", "--client-address", ""}, tc.args...)...)
		cmd.Env = append(cmd.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || !strings.Contains(string(out), "--admin-token") || !strings.Contains(string(out), "--api-key") {
			t.Errorf("%s: serve with an API key and no admin token: %v\n%s", tc.name, err, out)
		}
	}
}
