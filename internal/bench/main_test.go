package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// The harness starts engines, relays and receive loops; none may outlive a run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
