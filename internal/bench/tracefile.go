package bench

import (
	"os"
	"runtime/trace"
	"strings"
	"time"
)

// traceSpan is how much of a phase startTrace records: a trace grows by megabytes a
// second at the default load, and two seconds show every hand-off many times over.
const traceSpan = 2 * time.Second

// startTrace writes a runtime execution trace of the next traceSpan to
// file.<system> when file is set, and returns what stops it early (the phase
// ended first). The trace shows the scheduler latency of every goroutine hand-off
// on the request path, which a CPU profile cannot.
func startTrace(file, system string, opt Options) (stop func()) {
	if file == "" {
		return func() {}
	}
	return startTraceFile(file+"."+strings.ReplaceAll(system, " ", "-"), opt)
}

// startTraceFile is startTrace into the file at path.
func startTraceFile(path string, opt Options) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		opt.Logger.Warn("bench: trace", "err", err)
		return func() {}
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		opt.Logger.Warn("bench: trace", "err", err)
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-time.After(traceSpan):
		case <-done:
		}
		trace.Stop()
		f.Close()
	}()
	return func() { close(done); <-finished }
}
