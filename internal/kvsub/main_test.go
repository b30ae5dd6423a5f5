package kvsub

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test ends with no goroutine left behind: a Subscriber's Close (and Drop)
// must join its ranks' goroutines and their sockets'.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
