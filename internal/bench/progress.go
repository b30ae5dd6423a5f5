package bench

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// isTerminal is term.IsTerminal, replaceable in tests.
var isTerminal = term.IsTerminal

// ProgressTo returns f for Options.Progress when f is a terminal, and nil
// otherwise: the bar redraws itself with `\r` several times a second, which on a
// terminal is one line and in a redirected log is kilobytes of frames.
func ProgressTo(f *os.File) io.Writer {
	if f == nil || !isTerminal(int(f.Fd())) {
		return nil
	}
	return f
}

// LinesTo returns f for Options.Lines when f is not a terminal (a log file, a
// pipe, a CI job), and nil on a terminal, which gets the bar instead: a run of
// minutes that printed nothing looks hung.
func LinesTo(f *os.File) io.Writer {
	if f == nil || isTerminal(int(f.Fd())) {
		return nil
	}
	return f
}

// linef writes one plain progress line to o.Lines, if set.
func (o Options) linef(format string, args ...any) {
	if o.Lines != nil {
		fmt.Fprintf(o.Lines, "bench: "+format+"\n", args...)
	}
}

// phaseStarted writes the line that opens a phase: its warm-up, or its measured
// window when there is none.
func (o Options) phaseStarted(cfg Config, name string) {
	if cfg.Warmup > 0 {
		o.linef("%s: warm-up started (%v, %s)", name, cfg.Warmup, loadDesc(cfg))
		return
	}
	o.windowOpened(cfg, name)
}

// windowOpened writes the line for the start of a phase's measured window.
func (o Options) windowOpened(cfg Config, name string) {
	if cfg.Warmup > 0 {
		o.linef("%s: warm-up done", name)
	}
	if cfg.Requests > 0 {
		o.linef("%s: measuring %d requests (%s)", name, cfg.Requests, loadDesc(cfg))
		return
	}
	o.linef("%s: measuring for %v (%s)", name, cfg.Duration, loadDesc(cfg))
}

// loadDesc names the load of a phase for its progress lines.
func loadDesc(cfg Config) string {
	if cfg.Rate > 0 {
		return fmt.Sprintf("%g requests/s", cfg.Rate)
	}
	return fmt.Sprintf("%d concurrent", cfg.Concurrency)
}
