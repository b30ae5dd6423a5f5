package main

// A second shutdown signal. The first SIGTERM or SIGINT cancels the root context
// (main): every command treats that as "shut down gracefully", which may wait up
// to --shutdown-timeout for requests in flight. A second one means the operator
// (or a supervisor that escalates) will not wait: the process exits at once, as
// uvicorn's server does on a second Ctrl-C, with the status a death by that signal
// gives in a shell (130 for SIGINT, 143 for SIGTERM), so a script can tell a forced
// stop from a clean one.
//
// signal.Notify hands every signal to each channel registered for it, so this
// watcher counts the same signals main's context hears, without taking them from
// it.

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// watchSecondSignal starts the watcher; main calls it next to the context it
// makes (not init: a test binary must not take signals or leave a goroutine).
func watchSecondSignal() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	go forceExitOnSecond(sigs)
}

// forceExitOnSecond lets the first signal be (main's context handles it) and
// exits on the second.
func forceExitOnSecond(sigs <-chan os.Signal) {
	<-sigs
	sig := <-sigs
	code := 1
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	// Plain stderr, as main reports a failed command: the logger is the command's.
	fmt.Fprintf(os.Stderr, "switchyard: second signal (%s): exiting now without waiting for requests in flight (forced shutdown), exit status %d\n", sig, code)
	os.Exit(code)
}
