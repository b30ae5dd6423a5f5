// Package pypeer runs a Python test peer: a testdata script that takes JSON commands
// on stdin and reports JSON events on stdout, one object a line, such as
// coordinator/testdata/coordinator.py (vLLM's DP coordinator's front publisher) and
// engine.py (a DP engine's coordinator side). Find the interpreter with pytest.Find.
package pypeer

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// Peer is a running Python peer.
type Peer struct {
	name    string
	stdin   io.WriteCloser
	events  chan map[string]any
	timeout time.Duration
}

// Start runs python script args... . timeout bounds every wait for an event and,
// at cleanup, the wait for the peer to exit after {"cmd": "exit"} and the end of its
// stdin (it is killed then). A stdout line that is not a JSON object, a failed exit
// or no exit in time is a test error that shows the peer's stderr.
func Start(t testing.TB, timeout time.Duration, python, script string, args ...string) *Peer {
	t.Helper()
	name := filepath.Base(script)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, python, append([]string{script}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	p := &Peer{name: name, stdin: stdin, events: make(chan map[string]any, 64), timeout: timeout}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Errorf("%s: bad event %q", name, sc.Text())
				continue
			}
			p.events <- ev
		}
	}()
	t.Cleanup(func() {
		p.Send(t, map[string]any{"cmd": "exit"})
		stdin.Close()
		done := make(chan error, 1)
		go func() { <-scanned; done <- cmd.Wait() }()
		timer := time.NewTimer(timeout)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s exited: %v\n%s", name, err, stderr.String())
			}
		case <-timer.C:
			cancel() // kills the process; Wait then returns once its pipes are drained
			testwait.RecvWithin(t, done, timeout, name+" to be reaped after it was killed for not exiting")
			t.Errorf("%s did not exit\n%s", name, stderr.String())
		}
		cancel()
	})
	return p
}

// Send writes cmd to the peer's stdin as one line.
func (p *Peer) Send(t testing.TB, cmd map[string]any) {
	t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := p.stdin.Write(append(b, '\n')); err != nil {
		t.Errorf("%s stdin: %v", p.name, err)
	}
}

// Expect returns the next event, which must be named ev.
func (p *Peer) Expect(t testing.TB, ev string) map[string]any {
	t.Helper()
	got := p.nextBy(t, ev, time.Now().Add(p.timeout))
	if got["event"] != ev {
		t.Fatalf("%s event = %v, want %q", p.name, got, ev)
	}
	return got
}

// Await returns the next event named ev, passing over any others.
func (p *Peer) Await(t testing.TB, ev string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(p.timeout)
	for {
		if got := p.nextBy(t, ev, deadline); got["event"] == ev {
			return got
		}
	}
}

// nextBy returns the next event, failing the test (waiting for ev) at deadline.
func (p *Peer) nextBy(t testing.TB, ev string, deadline time.Time) map[string]any {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case got := <-p.events:
		return got
	case <-timer.C:
		t.Fatalf("%s: timed out waiting for event %q", p.name, ev)
		return nil
	}
}
