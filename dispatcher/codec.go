package dispatcher

import (
	"errors"

	"github.com/switchyard-llm/switchyard/wire"
)

// validateRequest refuses what would kill an engine's input thread before anything is
// sent. It defers to wire's Validate once that lands; until then it checks the
// invariants the dispatcher itself relies on.
func validateRequest(r *wire.EngineCoreRequest) error {
	if r == nil {
		return errors.New("dispatcher: nil request")
	}
	if r.RequestID == "" {
		return errors.New("dispatcher: request has an empty request_id")
	}
	if (r.Sampling == nil) == (r.PoolingParams == nil) {
		return errors.New("dispatcher: request needs exactly one of sampling_params and pooling_params")
	}
	return nil
}
