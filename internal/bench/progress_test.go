package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// The progress bar goes to a terminal only: a file or a pipe gets none.
func TestProgressOnlyOnTTY(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ProgressTo(f) != nil {
		t.Error("a progress bar into a regular file")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if ProgressTo(w) != nil {
		t.Error("a progress bar into a pipe")
	}
	if ProgressTo(nil) != nil {
		t.Error("a progress bar into nil")
	}
	old := isTerminal
	defer func() { isTerminal = old }()
	isTerminal = func(fd int) bool { return fd == int(w.Fd()) }
	if ProgressTo(w) != w {
		t.Error("no progress bar on a terminal")
	}
}
