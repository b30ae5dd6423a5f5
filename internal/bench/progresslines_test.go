package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for the sampler's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Off a terminal, a run says what it is doing: a plain line per repeated run and
// per phase's start, end of warm-up and end, in that order.
func TestProgressLinesOffTerminal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := smokeConfig("ipc")
	cfg.Repeat = 2
	var out lockedBuffer
	if _, err := Run(ctx, cfg, Options{Lines: &out}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Logf("progress lines:\n%s", got)
	var want []string
	for _, run := range []string{"run 1 of 2", "run 2 of 2"} {
		want = append(want, run)
		for _, sys := range []string{"relay", "switchyard"} {
			want = append(want, sys+": warm-up started (100ms, 400 requests/s)", sys+": warm-up done",
				sys+": measuring for 300ms (400 requests/s)", sys+": phase done: ")
		}
	}
	rest := got
	for _, w := range want {
		i := strings.Index(rest, "bench: "+w)
		if i < 0 {
			t.Fatalf("no line %q in order in:\n%s", w, got)
		}
		rest = rest[i+len(w):]
	}
	if n := strings.Count(got, "\n"); n != len(want) {
		t.Errorf("%d lines, want %d", n, len(want))
	}
}

// Lines go where the bar does not: a file or a pipe, not a terminal.
func TestLinesToOnlyOffTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if LinesTo(f) != f || LinesTo(nil) != nil {
		t.Error("no progress lines into a regular file")
	}
	old := isTerminal
	defer func() { isTerminal = old }()
	isTerminal = func(fd int) bool { return fd == int(f.Fd()) }
	if LinesTo(f) != nil {
		t.Error("progress lines on a terminal, which has the bar")
	}
}
