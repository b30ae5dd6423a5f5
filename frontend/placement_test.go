package frontend

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// msgCounter counts log lines by message.
type msgCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *msgCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *msgCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Message]++
	return nil
}
func (h *msgCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *msgCounter) WithGroup(string) slog.Handler      { return h }

func (h *msgCounter) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for m, c := range h.n {
		if strings.HasPrefix(m, prefix) {
			n += c
		}
	}
	return n
}

// refusalRecorder is a recorder that also hears of refused engines.
type refusalRecorder struct {
	*recorder
	refused chan error
}

func (r refusalRecorder) EngineRefused(rank int, err error) { r.refused <- err }

// newestWith writes the newest built-in layout with its registration changed by
// edit (and its vllm_version set to version) for py_engine.py to speak.
func newestWith(t *testing.T, version string, edit func([]string) []string) string {
	t.Helper()
	data, err := os.ReadFile("../wire/layouts/newest.json")
	if err != nil {
		t.Fatal(err)
	}
	var l map[string]any
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatal(err)
	}
	var reg []string
	for _, k := range l["registration"].([]any) {
		reg = append(reg, k.(string))
	}
	l["registration"], l["vllm_version"] = edit(reg), version
	out, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "layout.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A libzmq engine of a release in the newest layout's range whose registration
// adds keys switchyard reads (the coordinator's addresses) is placed on that
// layout and serves; the extra keys are logged once for the rank, not again when
// the engine restarts. An engine of a release no layout covers is refused, and
// the handler is told why.
func TestInteropPlaceRegistrationWithKnownExtraKeys(t *testing.T) {
	extra := newestWith(t, "0.24.2", func(reg []string) []string {
		return append(reg, "coord_store_port", "coordinator_input_address", "coordinator_output_address")
	})
	unknown := newestWith(t, "0.99.0", func(reg []string) []string { return reg })
	logs := &msgCounter{n: map[string]int{}}
	rec := refusalRecorder{recorder: newRecorder(), refused: make(chan error, 4)}
	cfg := testConfig(t, "tcp", 2)
	cfg.Logger = slog.New(logs)
	f := startFrontend(t, cfg, rec)
	const extraMsg = "frontend: engine registers keys its vLLM layout does not list"

	pyEngineFile(t, f.HandshakeAddress(), 0, 2, extra) // dies after its second step
	waitReady(t, f, 1)
	info := f.Engines()[0]
	if info.Layout == nil || info.Layout.Name != "newest" || !strings.Contains(info.LayoutHow, "coordinator_input_address") {
		t.Fatalf("placed on %v (%s)", info.Layout, info.LayoutHow)
	}
	ids := sendAllLayout(t, f, 0, 1, 1000, "extra", info.Layout)
	rec.waitFor(t, "rank 0 down after its step limit", func() bool { return len(rec.downs[0]) == 1 && !rec.allFinished(ids) })

	pyEngineFile(t, f.HandshakeAddress(), 0, 0, extra) // the restart
	rec.waitFor(t, "rank 0 up again", func() bool { return rec.ups[0] == 2 })
	ids = sendAllLayout(t, f, 0, 2, 8, "again", f.Engines()[0].Layout)
	rec.waitFor(t, "requests finished on the restarted engine", func() bool { return rec.allFinished(ids) })
	if n := logs.count(extraMsg); n != 1 {
		t.Errorf("extra keys logged %d times, want once", n)
	}

	pyEngineFile(t, f.HandshakeAddress(), 1, 0, unknown)
	err := testwait.Recv(t, rec.refused, "rank 1's refusal")
	var lr *LayoutRefusedError
	if !errors.As(err, &lr) || lr.Rank != 1 || !strings.Contains(lr.Msg, "0.99.0") {
		t.Fatalf("refusal: %v", err)
	}
}
