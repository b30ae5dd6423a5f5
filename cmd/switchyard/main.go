// Command switchyard is the one binary: the frontend daemon (serve), a mock engine
// core in its own process (mock-engine), the dispatch-latency benchmark (bench) and
// the bootstrap registry alone (registry).
//
// This is the only place that parses flags, builds the logger and the metrics
// registry and makes the root context; the packages take all of it as arguments.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/internal/version"
)

// --version prints the whole identity (commit, Go version, vLLM layouts), not only
// the module version, so a bug report carries what it needs.
func init() {
	cli.VersionPrinter = func(cmd *cli.Command) { fmt.Fprint(cmd.Root().Writer, version.Get().String()) }
}

func main() {
	// SIGTERM and SIGINT cancel the root context: every command treats that as
	// "shut down gracefully" and exits 0 when it managed to.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	watchSecondSignal() // a second one exits at once (signals.go)
	defer stop()
	if err := rootCommand().Run(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "switchyard:", err)
		stop()
		os.Exit(1)
	}
}

func rootCommand() *cli.Command {
	return &cli.Command{
		Name:    "switchyard",
		Version: version.Get().Version,
		Usage:   "a ZeroMQ-native frontend and dispatcher for vLLM engine cores",
		Description: "Unmodified vLLM engine-core processes (vllm serve MODEL --headless ...) connect to\n" +
			"`switchyard serve`, which dispatches requests from HTTP and msgpack clients to them.\n" +
			"Run `switchyard serve` with no flags to get two built-in mock engines to try it on.",
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:    "log-format",
				Value:   "text",
				Usage:   "log format: text or json (log/slog, written to stderr)",
				Sources: cli.EnvVars("SWITCHYARD_LOG_FORMAT"),
				Validator: func(s string) error {
					if s != "text" && s != "json" {
						return fmt.Errorf("--log-format must be text or json, got %q", s)
					}
					return nil
				},
			},
			&cli.StringFlag{
				Name:    "log-level",
				Value:   "info",
				Usage:   "minimum log level: debug, info, warn or error",
				Sources: cli.EnvVars("SWITCHYARD_LOG_LEVEL"),
				Validator: func(s string) error {
					var l slog.Level
					return l.UnmarshalText([]byte(s))
				},
			},
		},
		Commands: []*cli.Command{
			withMockScript(serveCommand(), "mock-engine-script", "mock engines"),
			withMockScript(mockEngineCommand(), "script", ""),
			vllmLayoutScriptCommand(),
			benchCommand(),
			registryCommand(),
			docsCommand(),
		},
	}
}

// newLogger builds the process logger from --log-format and --log-level.
func newLogger(cmd *cli.Command, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cmd.String("log-level"))) // validated by the flag
	opts := &slog.HandlerOptions{Level: level}
	if cmd.String("log-format") == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// newRegistry builds the process's metrics registry: the Go runtime and process
// collectors, to which the command's packages add their own.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
