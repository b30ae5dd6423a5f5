package main

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Bad settings are refused before anything starts, naming the flag at fault.
func TestServeRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--lb-policy", "random"}, "--lb-policy"},
		{[]string{"serve", "--mock-engines", "0"}, "--mock-engines"},
		{[]string{"serve", "--handshake-address", "localhost:1"}, "--handshake-address"},
		{[]string{"serve", "--handshake-address", "tcp://127.0.0.1:0", "--data-parallel-size", "0"}, "--data-parallel-size"},
		{[]string{"serve", "--http-address", "nope"}, "--http-address"},
		{[]string{"serve", "--engine-transport", "udp"}, "--engine-transport"},
		{[]string{"serve", "--step-ms", "0"}, "--step-ms"},
		{[]string{"--log-format", "xml", "serve"}, "--log-format"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := rootCommand()
			cmd.Writer, cmd.ErrWriter = &strings.Builder{}, &strings.Builder{}
			err := cmd.Run(context.Background(), append([]string{"switchyard"}, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}
