// Package testwait bounds every wait in a test. A test that blocks on a channel, a
// WaitGroup or an HTTP call with no deadline hangs the whole run until go test's
// -timeout kills it, and the panic then names no cause. These helpers fail the test
// instead, after a deadline, with what it was waiting for.
package testwait

import (
	"net/http"
	"sync"
	"testing"
	"time"
)

// Deadline is how long a helper waits when the caller names no other bound. It is
// generous: on a loaded 2-core machine under -race a slow step can take seconds, and
// a wait that reaches it is a hang, not a slow pass.
const Deadline = 30 * time.Second

// Recv receives one value from ch within Deadline, or fails the test naming what.
// A closed channel yields its zero value, as a plain receive does.
func Recv[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	return RecvWithin(tb, ch, Deadline, what)
}

// RecvWithin is Recv with its own bound.
func RecvWithin[T any](tb testing.TB, ch <-chan T, d time.Duration, what string) T {
	tb.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("waited %v for %s", d, what)
	}
	var zero T
	return zero
}

// Send sends v on ch within Deadline, or fails the test naming what.
func Send[T any](tb testing.TB, ch chan<- T, v T, what string) {
	tb.Helper()
	t := time.NewTimer(Deadline)
	defer t.Stop()
	select {
	case ch <- v:
	case <-t.C:
		tb.Fatalf("waited %v to hand over %s", Deadline, what)
	}
}

// Closed waits within Deadline for ch to be closed (or to yield a value), or fails
// the test naming what.
func Closed[T any](tb testing.TB, ch <-chan T, what string) {
	tb.Helper()
	RecvWithin(tb, ch, Deadline, what)
}

// Wait waits for wg within Deadline, or fails the test naming what. The goroutine
// that waits is left behind on failure: the test is over by then.
func Wait(tb testing.TB, wg *sync.WaitGroup, what string) {
	tb.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	RecvWithin(tb, done, Deadline, what)
}

// Func runs f and waits for it within Deadline, or fails the test naming what.
func Func(tb testing.TB, what string, f func()) {
	tb.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	RecvWithin(tb, done, Deadline, what)
}

// HTTPClient is an http.Client whose every call is bounded by Deadline; tests use it
// (or one with their own Timeout) instead of http.DefaultClient, which never gives up.
var HTTPClient = &http.Client{Timeout: Deadline}

// Result runs f (a call that may never return, such as a socket's Recv) on its own
// goroutine and returns its results within Deadline, or fails the test naming what.
func Result[T any](tb testing.TB, what string, f func() (T, error)) (T, error) {
	tb.Helper()
	type res struct {
		v   T
		err error
	}
	c := make(chan res, 1)
	go func() { v, err := f(); c <- res{v, err} }()
	r := Recv(tb, c, what)
	return r.v, r.err
}
