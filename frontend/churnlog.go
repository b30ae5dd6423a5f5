package frontend

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// churnLog keeps a HELLO storm from flooding the log: every generation a
// HELLO creates logs "rejoining", "connected" and, when it dies in its
// handshake, "engine down", so a storm of HELLO-and-hang-ups wrote three
// lines per connection, and a storm against a live rank one refusal each. Per
// rank, the first churnBurst such lines of each
// second are logged as they are; the rest go to Debug, and the next line
// logged says how many were held back. Lines of engines that came up are
// never held back.
type churnLog struct {
	mu    sync.Mutex
	ranks map[int]*churnWindow
}

type churnWindow struct {
	start      time.Time
	n          int // lines in this window
	suppressed int // lines sent to Debug since the last one logged
}

const (
	churnBurst  = 6 // two generations' worth per second
	churnPeriod = time.Second
)

// log logs msg for rank at level, or at Debug when rank's handshakes churn.
func (c *churnLog) log(l *slog.Logger, now time.Time, rank int, level slog.Level, msg string, args ...any) {
	c.mu.Lock()
	if c.ranks == nil {
		c.ranks = make(map[int]*churnWindow)
	}
	w := c.ranks[rank]
	if w == nil {
		w = &churnWindow{start: now}
		c.ranks[rank] = w
	}
	if now.Sub(w.start) >= churnPeriod {
		w.start, w.n = now, 0
	}
	w.n++
	held := 0
	if w.n > churnBurst {
		w.suppressed++
		level = slog.LevelDebug
	} else {
		held, w.suppressed = w.suppressed, 0
	}
	c.mu.Unlock()
	if held > 0 {
		args = append(args, "handshake_lines_held_back", held)
	}
	l.Log(context.Background(), level, msg, args...)
}
