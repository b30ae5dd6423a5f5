package frontend

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

type levelCounter struct {
	mu     sync.Mutex
	levels map[slog.Level]int
	last   slog.Record
}

func (h *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.levels[r.Level]++
	h.last = r.Clone()
	return nil
}
func (h *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levelCounter) WithGroup(string) slog.Handler      { return h }

// A rank whose handshakes churn (a HELLO storm made three log lines per
// connection) logs churnBurst lines a second; the rest go to Debug and the
// next line logged counts them. Another rank is not held back.
func TestChurnLogHoldsBackAStorm(t *testing.T) {
	h := &levelCounter{levels: map[slog.Level]int{}}
	l := slog.New(h)
	var c churnLog
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		c.log(l, t0.Add(time.Duration(i)*time.Millisecond), 0, slog.LevelWarn, "frontend: engine down")
	}
	c.log(l, t0, 1, slog.LevelInfo, "frontend: engine connected")
	if h.levels[slog.LevelWarn] != churnBurst || h.levels[slog.LevelDebug] != 100-churnBurst || h.levels[slog.LevelInfo] != 1 {
		t.Fatalf("levels %v", h.levels)
	}
	c.log(l, t0.Add(time.Second), 0, slog.LevelInfo, "frontend: engine connected")
	held := int64(-1)
	h.last.Attrs(func(a slog.Attr) bool {
		if a.Key == "handshake_lines_held_back" {
			held = a.Value.Int64()
		}
		return true
	})
	if h.last.Level != slog.LevelInfo || held != 100-churnBurst {
		t.Fatalf("first line of the next second: %v held_back=%d", h.last.Level, held)
	}
}
