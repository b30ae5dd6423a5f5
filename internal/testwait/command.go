package testwait

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// PipeDelay is how long Wait gives a subprocess's output pipes to close once it has
// exited or been killed: a child it left behind can hold them open for ever.
const PipeDelay = 10 * time.Second

// Command is exec.Command with a deadline: the process is killed d after this call
// (or when the test ends, if it still runs), the test log then says which command
// was killed after how long, and its pipes get PipeDelay to close. Run, Output,
// CombinedOutput and Wait therefore all return within about d + PipeDelay.
func Command(tb testing.TB, d time.Duration, name string, args ...string) *exec.Cmd {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Cancel = func() error {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			tb.Logf("waited %v for %s; killing it", d, cmd)
		}
		return cmd.Process.Kill()
	}
	cmd.WaitDelay = PipeDelay
	return cmd
}
