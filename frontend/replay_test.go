package frontend

import (
	"context"
	"sync"
	"testing"
)

// memRegistrations is a RegistrationStore in memory.
type memRegistrations struct {
	mu     sync.Mutex
	frames map[int][]byte
}

func (m *memRegistrations) Saw(rank int, frame []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frames[rank] = frame
}

func (m *memRegistrations) Known(_ context.Context, rank int) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.frames[rank]
	return f, ok
}

// TestReplayRegistrationAfterRestart: a bootstrapped frontend restarts on the
// same addresses under a running engine, which (like vLLM's) reconnects but
// never registers again; the registration its previous run saw is replayed
// and the engine serves the new frontend.
func TestReplayRegistrationAfterRestart(t *testing.T) {
	store := &memRegistrations{frames: map[int][]byte{}}
	cfg := bootstrappedConfig(t, "tcp", 0, 1, 1)
	cfg.Bootstrapped.Registrations = store
	first := startFrontend(t, cfg, newRecorder())
	mc := bootMock(first, 0, 1)
	mc.Reconnect = true
	startMock(t, mc)
	waitReady(t, first, 1)
	if _, ok := store.Known(context.Background(), 0); !ok {
		t.Fatal("the registration was not saved")
	}
	in, out := first.sharedIn.Addr(), first.sharedOut.Addr()
	first.Close()

	cfg.Bootstrapped.InputAddress, cfg.Bootstrapped.OutputAddress = in, out
	rec := newRecorder()
	second := startFrontend(t, cfg, rec)
	waitReady(t, second, 1)
	ids := sendAll(t, second, 0, 3, 4, "replay")
	rec.waitFor(t, "served after the restart", func() bool { return rec.allFinished(ids) })
}
