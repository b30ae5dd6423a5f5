package dispatcher

import (
	"errors"

	"github.com/switchyard-llm/switchyard/wire"
)

var errNilRequest = errors.New("dispatcher: nil request")

// validateRequest refuses, before anything is sent, what would kill an engine's input
// thread (an exception there is not answered per request; the engine just stops
// reading). wire's Validate mirrors SamplingParams' post-init checks.
func validateRequest(r *wire.EngineCoreRequest) error {
	if r == nil {
		return errNilRequest
	}
	return r.Validate()
}
