// Package pytest finds the Python interpreter that the interop tests run their peers
// with (pyzmq engines and clients, msgpack round trips, a Mooncake-connector client).
//
// A real libzmq peer is the only proof that our pure-Go ZeroMQ sockets interoperate, so
// every interop test goes through here: one rule for every package about which
// interpreter is used and when a test skips. The python3 first on PATH is often a
// version manager's interpreter without Debian's python3-zmq, so several candidates are
// tried in order.
package pytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// Candidates are the interpreters tried, in order: $SWITCHYARD_PYTHON (set by .ci/run),
// python3 on PATH, then Debian's /usr/bin/python3.
func Candidates() []string {
	var c []string
	if p := os.Getenv("SWITCHYARD_PYTHON"); p != "" {
		c = append(c, p)
	}
	return append(c, "python3", "/usr/bin/python3")
}

// Find returns the first interpreter that can import every module, or skips the test
// saying what to install (fails it under CI=true, where .ci/run installs them).
func Find(tb testing.TB, modules ...string) string {
	tb.Helper()
	imp := "import " + strings.Join(modules, ", ")
	if len(modules) == 0 {
		imp = "pass"
	}
	var tried []string
	for _, p := range Candidates() {
		path, err := exec.LookPath(p)
		if err != nil {
			tried = append(tried, p+": not found")
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), testwait.Deadline)
		out, err := exec.CommandContext(ctx, path, "-c", imp).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if timedOut {
			tb.Fatalf("waited %v for %s -c %q", testwait.Deadline, path, imp)
		}
		if err != nil {
			tried = append(tried, p+": "+strings.TrimSpace(lastLine(string(out))))
			continue
		}
		return path
	}
	msg := fmt.Sprintf("no python3 can %q (apt-get install -y python3-zmq python3-msgpack python3-requests, or set SWITCHYARD_PYTHON); tried %s",
		imp, strings.Join(tried, "; "))
	if os.Getenv("CI") == "true" {
		// CI installs the peers: a missing one is a broken install, not a skip.
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
