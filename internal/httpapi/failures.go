package httpapi

// How a request that cannot be served becomes its HTTP answer: a body that is too
// large, late or malformed, a Submit the dispatcher refuses, and a request that
// ends without a normal final output. Every endpoint maps its failures here, so
// one cause has one status and text whichever endpoint met it.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// tooLarge answers a body over the limit.
func tooLarge(limit int64) *APIError {
	return &APIError{Status: http.StatusRequestEntityTooLarge, Type: TypeBadRequest,
		Message: fmt.Sprintf("request body larger than %d bytes (--max-body-bytes)", limit)}
}

// bodyError maps a failure to read or decode the body.
func (a *API) bodyError(err error) *APIError {
	var ae *APIError
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return &APIError{Status: http.StatusRequestTimeout, Type: TypeBadRequest,
			Message: fmt.Sprintf("request body not received within %v (--http-body-timeout)", a.bodyTimeout)}
	}
	return badRequest("", "reading request body: %v", err)
}

// submitError maps a refused Submit to its HTTP answer.
func (a *API) submitError(err error) *APIError {
	var bad *dispatcher.InvalidDataParallelRank
	var dup *dispatcher.DuplicateRequestId
	var inv *wire.ValidationError
	var long *dispatcher.PromptTooLongError
	if busy := busyError(err); busy != nil {
		return busy
	}
	switch {
	case errors.As(err, &inv):
		return validationAPIError(inv)
	case errors.As(err, &long):
		return promptTooLong(long)
	case errors.As(err, &bad):
		e := InvalidRankError(bad.Rank, bad.ConnectedRanks)
		e.Message = bad.Error() // with why the rank's engine was refused, if it was
		return e
	case errors.As(err, &dup):
		return &APIError{Status: http.StatusBadRequest, Type: apicore.TypeDuplicateRequestID, Param: "request_id", Message: err.Error()}
	case errors.Is(err, dispatcher.ErrDraining), errors.Is(err, dispatcher.ErrClosed):
		msg := "switchyard is shutting down and accepts no new requests"
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Message: msg}
	case errors.Is(err, dispatcher.ErrNoEngines):
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Message: "no engine is connected and ready"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &APIError{Status: 499, Type: TypeBadRequest, Message: "client went away"}
	}
	return &APIError{Status: http.StatusInternalServerError, Type: TypeInternal, Message: err.Error()}
}

// failure maps a request that ended without a normal final output.
func (a *API) failure(err error) *APIError {
	if errors.Is(err, dispatcher.ErrClosed) {
		msg := "request aborted: switchyard shut down before it finished"
		if reason := a.shutdownReason(); reason != nil {
			msg = "request aborted: " + reason.Error()
		}
		return &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Message: msg}
	}
	if busy := busyError(err); busy != nil {
		return busy
	}
	return &APIError{Status: http.StatusInternalServerError, Type: TypeInternal, Message: err.Error()}
}
