package coordinator

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a socket event; tests never sleep.
const waitTimeout = 10 * time.Second

// endpointFunc returns a fresh endpoint to bind for name.
type endpointFunc func(name string) string

// forEachTransport runs body over ipc:// and tcp://, as yamux's
// testConnTypes does for its connection kinds.
func forEachTransport(t *testing.T, body func(t *testing.T, ep endpointFunc)) {
	t.Run("ipc", func(t *testing.T) {
		// Unix socket paths are limited to ~104 bytes: t.TempDir() can be too long.
		dir, err := os.MkdirTemp("", "coord")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		body(t, func(name string) string { return "ipc://" + filepath.Join(dir, name) })
	})
	t.Run("tcp", func(t *testing.T) {
		body(t, func(string) string { return "tcp://127.0.0.1:0" })
	})
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// recvWithin waits for one value on c or fails the test.
func recvWithin[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	return testwait.RecvWithin(t, c, waitTimeout, what)
}
