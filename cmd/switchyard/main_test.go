package main

import (
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/bench"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/server"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
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
		{[]string{"serve", "--eos-token-id", "2,x"}, "--eos-token-id"},
		{[]string{"serve", "--eos-token-id", "5", "--vocab-size", "4"}, "--eos-token-id"},
		{[]string{"serve", "--max-logprobs", "-2"}, "--max-logprobs"},
		{[]string{"serve", "--log-stats-interval=-1s"}, "--log-stats-interval"},
		{[]string{"serve", "--otlp-traces-endpoint", "collector:4317"}, "--otlp-traces-endpoint"},
		{[]string{"serve", "--input-address", "tcp://127.0.0.1:0"}, "--output-address"},
		{[]string{"serve", "--input-address", "tcp://127.0.0.1:0", "--output-address", "tcp://127.0.0.1:0", "--data-parallel-start-rank", "1"}, "--data-parallel-start-rank"},
		{[]string{"serve", "--external-coordinator-address", "tcp://127.0.0.1:1"}, "--external-coordinator-address"},
		{[]string{"serve", "--vllm-layout", "v9.99"}, "neither a file nor a built-in layout (built-in: v0.11, v0.12, v0.15, v0.18, v0.21, newest)"},
		{[]string{"serve", "--vllm-layout", "v0.18", "--vllm-layout", "newest"}, "two built-in layouts forced"},
		{[]string{"serve", "--mock-engine-layouts", "v0.18,nope"}, "--mock-engine-layouts"},
		{[]string{"mock-engine", "--vllm-layout", "nope"}, "--vllm-layout"},
		{[]string{"serve", "--etcd-endpoints", "http://127.0.0.1:1"}, "--etcd-endpoints needs --handshake-address"},
		{[]string{"serve", "--etcd-endpoints", "http://127.0.0.1:1", "--handshake-address", "tcp://127.0.0.1:1"}, "needs --input-address and --output-address"},
		{[]string{"serve", "--etcd-endpoints", "http://127.0.0.1:1", "--frontends", "0"}, "--frontends"},
		{[]string{"serve", "--etcd-endpoints", "http://127.0.0.1:1", "--handshake-address", "tcp://127.0.0.1:1",
			"--input-address", "tcp://127.0.0.1:2", "--output-address", "tcp://127.0.0.1:3", "--data-parallel-size", "2"}, "--coordinator-input-address"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := rootCommand()
			cmd.Writer, cmd.ErrWriter = &strings.Builder{}, &strings.Builder{}
			// Were a bad setting taken, serve would run until its context ends.
			ctx, cancel := context.WithTimeout(t.Context(), testwait.Deadline)
			defer cancel()
			err := cmd.Run(ctx, append([]string{"switchyard"}, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

func TestParseEOS(t *testing.T) {
	for in, want := range map[string][]int64{"": nil, "-1": nil, "2": {2}, "2, 32000,2,7": {2, 32000, 7}} {
		got, err := parseEOS(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseEOS(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "1,,2", "-3"} {
		if _, err := parseEOS(in); err == nil {
			t.Errorf("parseEOS(%q) accepted", in)
		}
	}
}

// --version names the build and every built-in vLLM wire layout.
func TestVersionFlag(t *testing.T) {
	cmd := rootCommand()
	out := &strings.Builder{}
	cmd.Writer, cmd.ErrWriter = out, &strings.Builder{}
	if err := cmd.Run(context.Background(), []string{"switchyard", "--version"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{"switchyard ", runtime.Version()}, wire.LayoutNames()...) {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--version output lacks %q:\n%s", want, out)
		}
	}
}

// The defaults of serve and mock-engine must not point one at the other's wrong
// port: mock-engine's handshake address is not serve's msgpack client address.
func TestDefaultAddressesDistinct(t *testing.T) {
	client := server.DefaultConfig().ClientAddress
	hs := mockengine.DefaultConfig().HandshakeAddress
	if client == hs {
		t.Fatalf("mock-engine's default handshake address %s is serve's default client address", hs)
	}
}

// `bench --compare A.json B.json`, the form both READMEs show, compares the two
// reports, as do the repeated-flag and comma forms; anything but two is refused.
func TestBenchCompareForms(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	for _, p := range []string{a, b} {
		h := bench.NewHist()
		h.Record(time.Millisecond)
		s := h.Summarize()
		r := &bench.Report{Schema: bench.SchemaVersion, Config: bench.DefaultConfig(),
			Switchyard: &bench.Phase{Name: "switchyard", Requests: 1, Seconds: 1, Dispatch: s, Return: s, Overhead: s, TTFT: s, ITL: s, E2E: s}}
		if err := r.WriteJSON(p); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (string, error) {
		cmd := rootCommand()
		out := &strings.Builder{}
		cmd.Writer, cmd.ErrWriter = out, &strings.Builder{}
		err := cmd.Run(context.Background(), append([]string{"switchyard", "bench"}, args...))
		return out.String(), err
	}
	for _, args := range [][]string{
		{"--compare", a, b}, {"--compare", a, "--compare", b}, {"--compare", a + "," + b}, {"--compare", a, b, "--all"},
	} {
		out, err := run(args...)
		if err != nil || !strings.Contains(out, "a.json") || !strings.Contains(out, "b.json") {
			t.Errorf("bench %v: %v\n%s", args, err, out)
		}
	}
	for _, args := range [][]string{{"--compare", a}, {"--compare", a, b, b}} {
		if _, err := run(args...); err == nil || !strings.Contains(err.Error(), "exactly two") {
			t.Errorf("bench %v: %v, want a refusal", args, err)
		}
	}
	if _, err := run(a); err == nil || !strings.Contains(err.Error(), "--compare A.json B.json") {
		t.Errorf("bench with a stray argument: %v", err)
	}
}
