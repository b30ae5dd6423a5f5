package main

// vLLM's command-line habits for serve, so `vllm serve` lines carry over: the
// model as the one positional argument (loaded as --tokenizer, served under the
// name as given), --host and --port beside --http-address, and a mistyped flag
// answered in one line naming the closest flag instead of the whole help.

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/server"
)

// vllmArgs are the flags bound here, read by apply after parsing.
type vllmArgs struct {
	host string
	port int
}

func (v *vllmArgs) flags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "host", Destination: &v.host, Category: "clients",
			Usage:   "host of the HTTP API (vLLM's flag), combined with --port; default the host of --http-address",
			Sources: cli.EnvVars("SWITCHYARD_HOST")},
		&cli.IntFlag{Name: "port", Destination: &v.port, Category: "clients",
			Usage:   "port of the HTTP API (vLLM's flag), combined with --host; default the port of --http-address",
			Sources: cli.EnvVars("SWITCHYARD_PORT")},
	}
}

// apply reads the positional MODEL and --host/--port into o and cfg.
func (v *vllmArgs) apply(cmd *cli.Command, o *serveOptions, cfg *server.Config) error {
	args := cmd.Args().Slice()
	if cmd.IsSet("lora-modules") {
		args = loraArgs(args, &cfg.LoRA)
	}
	switch {
	case len(args) > 1:
		return fmt.Errorf("serve takes one argument, the model directory (vLLM's MODEL); got %q", args)
	case len(args) == 1:
		model := args[0]
		if cmd.IsSet("tokenizer") && o.tokenizer != model {
			return fmt.Errorf("MODEL %q and --tokenizer %q name two models; give one", model, o.tokenizer)
		}
		o.tokenizer = model
		if !cmd.IsSet("served-model-name") {
			// vLLM serves `vllm serve /models/Qwen3-8B` as model "/models/Qwen3-8B".
			cfg.ServedModelName = model
		}
	}
	addr, err := listenAddress(cfg.HTTPAddress, cmd.IsSet("http-address"), v.host, cmd.IsSet("host"), v.port, cmd.IsSet("port"))
	if err != nil {
		return err
	}
	cfg.HTTPAddress = addr
	return nil
}

// listenAddress combines --host and --port with --http-address: each fills in
// its half of it; both forms given and disagreeing is an error.
func listenAddress(addr string, addrSet bool, host string, hostSet bool, port int, portSet bool) (string, error) {
	if !hostSet && !portSet {
		return addr, nil
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--http-address %q: want HOST:PORT", addr)
	}
	if hostSet {
		h = host
	}
	if portSet {
		if port < 0 || port > 65535 {
			return "", fmt.Errorf("--port %d: want 0..65535", port)
		}
		p = strconv.Itoa(port)
	}
	combined := net.JoinHostPort(h, p)
	if addrSet && combined != addr {
		return "", fmt.Errorf("--http-address %s and --host/--port (%s) disagree; give one of them", addr, combined)
	}
	return combined, nil
}

// engineOnlyFlags are vLLM flags that configure the engines, not the frontend:
// a user who gives one to serve is told where it belongs.
var engineOnlyFlags = map[string]bool{
	"tensor-parallel-size": true, "pipeline-parallel-size": true, "gpu-memory-utilization": true, "dtype": true,
	"quantization": true, "kv-cache-dtype": true, "max-num-seqs": true, "max-num-batched-tokens": true,
	"enforce-eager": true, "enable-prefix-caching": true, "block-size": true, "swap-space": true,
	"trust-remote-code": true, "download-dir": true, "load-format": true, "seed": true,
}

// unknownFlag answers a usage error in one line: a flag serve does not know is
// named with the closest one it does (or, for a vLLM engine flag, where it
// belongs); any other usage error is returned as it is, without the help.
func unknownFlag(_ context.Context, cmd *cli.Command, err error, _ bool) error {
	const prefix = "flag provided but not defined: -"
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return err
	}
	name := strings.TrimLeft(strings.TrimPrefix(msg, prefix), "-")
	if i := strings.IndexByte(name, '='); i >= 0 {
		name = name[:i]
	}
	if engineOnlyFlags[name] {
		return fmt.Errorf("unknown flag --%s: it configures vLLM's engines; give it to them (vllm serve MODEL --headless ... --%s), not to switchyard serve", name, name)
	}
	best, bestD := "", -1
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if d := editDistance(name, n); bestD < 0 || d < bestD {
				best, bestD = n, d
			}
		}
	}
	if best == "" || bestD > max(3, len(name)/2) {
		return fmt.Errorf("unknown flag --%s (switchyard %s --help lists them)", name, cmd.Name)
	}
	return fmt.Errorf("unknown flag --%s; did you mean --%s? (switchyard %s --help lists them)", name, best, cmd.Name)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
