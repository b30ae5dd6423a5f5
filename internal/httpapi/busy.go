package httpapi

// Fair share and busy engines: which client a request is submitted for (the
// frontend shares a full engine queue between clients, dispatcher.WithClient),
// and how "busy" and "stalled" are answered on both protocols.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
)

// retryAfterGroup is the Retry-After (seconds) while a lockstep group is
// broken: an engine restart takes a while.
const retryAfterGroup = 5

// retryAfterBusy is the Retry-After (seconds) of a 503 for a busy or stalled
// engine: the queue drains in well under a second at engine speeds.
const retryAfterBusy = 1

// Client keys (dispatcher.WithClient): client-protocol connections count up
// from 1; HTTP clients are keyed by remote host with bit 62 set, so the two
// never collide (the dispatcher's anonymous keys have bit 63).
const httpKeyBit = 1 << 62

// httpClientKey names the client of an HTTP request for the fair share: its
// remote host, so one host's burst queues behind itself. All requests behind
// one proxy share one key.
func httpClientKey(r *http.Request) uint64 {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(host))
	return httpKeyBit | h.Sum64()&(httpKeyBit-1)
}

// busyError maps an engine that cannot take work now to a 503 with
// Retry-After; nil when err is not that. A queue wait that ended because the
// caller's context did (the client left) is not busy.
func busyError(err error) *APIError {
	var full *frontend.QueueFullError
	var stalled *dispatcher.EngineStalledError
	var group *dispatcher.GroupBrokenError
	var draining *dispatcher.EngineDrainingError
	switch {
	case errors.As(err, &group):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, RetryAfter: retryAfterGroup,
			Message: group.Error()}
	case errors.As(err, &draining):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, RetryAfter: retryAfterBusy,
			Message: draining.Error() + "; retry later or on another rank"}
	case errors.As(err, &full) && errors.Is(err, frontend.ErrSendWait):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, RetryAfter: retryAfterBusy,
			Message: fmt.Sprintf("engine rank %d is busy: its send queue stayed full (%d queued); retry later", full.Rank, full.Queued)}
	case errors.As(err, &stalled):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, RetryAfter: retryAfterBusy,
			Message: stalled.Error() + "; retry later"}
	}
	return nil
}
