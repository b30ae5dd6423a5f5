package main

import (
	"context"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func TestListenAddress(t *testing.T) {
	tests := []struct {
		addr          string
		addrSet       bool
		host          string
		hostSet       bool
		port          int
		portSet       bool
		want, wantErr string
	}{
		{addr: "127.0.0.1:8000", want: "127.0.0.1:8000"},
		{addr: "127.0.0.1:8000", port: 9000, portSet: true, want: "127.0.0.1:9000"},
		{addr: "127.0.0.1:8000", host: "0.0.0.0", hostSet: true, want: "0.0.0.0:8000"},
		{addr: "127.0.0.1:8000", host: "::1", hostSet: true, port: 1, portSet: true, want: "[::1]:1"},
		{addr: "127.0.0.1:9000", addrSet: true, port: 9000, portSet: true, want: "127.0.0.1:9000"},
		{addr: "127.0.0.1:9000", addrSet: true, port: 9001, portSet: true, wantErr: "disagree"},
		{addr: "127.0.0.1:8000", port: 70000, portSet: true, wantErr: "--port"},
	}
	for _, tt := range tests {
		got, err := listenAddress(tt.addr, tt.addrSet, tt.host, tt.hostSet, tt.port, tt.portSet)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: %q, %v; want an error naming %s", tt, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%+v: %q, %v; want %q", tt, got, err, tt.want)
		}
	}
}

// vLLM's command lines: a mistyped flag is one line naming the closest flag (not
// the whole help), an engine flag is sent where it belongs, and MODEL is read.
func TestServeVLLMCommandLine(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--http-adress", "127.0.0.1:0"}, "unknown flag --http-adress; did you mean --http-address?"},
		{[]string{"serve", "--served-model", "x"}, "did you mean --served-model-name?"},
		{[]string{"serve", "--tensor-parallel-size", "2"}, "configures vLLM's engines"},
		{[]string{"serve", "a", "b"}, "serve takes one argument"},
		{[]string{"serve", "--tokenizer", "/a", "/b"}, `MODEL "/b" and --tokenizer "/a" name two models`},
		{[]string{"serve", "/no/such/model-dir"}, "/no/such/model-dir"},
		{[]string{"serve", "--http-address", "127.0.0.1:9000", "--port", "9001"}, "disagree"},
		{[]string{"serve", "--max-model-len", "-1"}, "--max-model-len"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := rootCommand()
			stderr := &strings.Builder{}
			cmd.Writer, cmd.ErrWriter = &strings.Builder{}, stderr
			ctx, cancel := context.WithTimeout(t.Context(), testwait.Deadline)
			defer cancel()
			err := cmd.Run(ctx, append([]string{"switchyard"}, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error %v, want one line naming %s", err, tt.want)
			}
			if stderr.Len() > 0 {
				t.Errorf("help printed besides the error:\n%s", stderr)
			}
		})
	}
}
