package httpapi

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/servertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeEngines = servertest.FakeEngines

func newFakeCore(t testing.TB, ranks int) *fakeEngines { return servertest.NewFakeCore(t, ranks) }

func newFakeCoreConfig(t testing.TB, ranks int, cfg dispatcher.Config) *fakeEngines {
	return servertest.NewFakeCoreConfig(t, ranks, cfg)
}
