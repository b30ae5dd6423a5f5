package bench

import (
	"io"
	"os"

	"golang.org/x/term"
)

// isTerminal is term.IsTerminal, replaceable in tests.
var isTerminal = term.IsTerminal

// ProgressTo returns f for Options.Progress when f is a terminal, and nil
// otherwise: the bar redraws itself with `\r` several times a second, which on a
// terminal is one line and in a redirected log is kilobytes of frames.
func ProgressTo(f *os.File) io.Writer {
	if f == nil || !isTerminal(int(f.Fd())) {
		return nil
	}
	return f
}
