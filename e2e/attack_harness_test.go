package e2e

// The standing attack suite's harness: every attack test (attack_*_test.go) runs
// against a real switchyard process, takes a baseline of its resources first, attacks
// it with bounded counts and times on loopback only, then asserts the process still
// serves and its resources came back near the baseline. Figures go to the test log
// (go test -v ./e2e -run Attack) so they can be quoted.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// resources is one sample of a process's footprint, from /proc and /metrics.
type resources struct {
	RSS        int64 // bytes (VmRSS)
	FDs        int   // open file descriptors
	Threads    int
	Goroutines int // go_goroutines from /metrics; -1 when not readable
}

func (r resources) String() string {
	return fmt.Sprintf("rss=%.1fMiB fds=%d threads=%d goroutines=%d",
		float64(r.RSS)/(1<<20), r.FDs, r.Threads, r.Goroutines)
}

// sampleResources reads pid's footprint; metricsURL (may be empty) is a /metrics
// address for the goroutine count.
func sampleResources(t *testing.T, pid int, metricsURL string) resources {
	t.Helper()
	var r resources
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading /proc/%d/status: %v", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(st))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			r.RSS = kb << 10
		case "Threads:":
			r.Threads, _ = strconv.Atoi(f[1])
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("reading /proc/%d/fd: %v", pid, err)
	}
	r.FDs = len(ents)
	r.Goroutines = -1
	if metricsURL != "" {
		if resp, err := httpc.Get(metricsURL); err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			for line := range strings.SplitSeq(body.String(), "\n") {
				if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
					f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					r.Goroutines = int(f)
				}
			}
		}
	}
	return r
}

// settle waits up to d for the footprint to come back within the given slack of the
// baseline (RSS within rssSlack bytes, fds within fdSlack, goroutines within
// goSlack), sampling every 250 ms, and returns the last sample. It fails the test
// when it never does, naming what stayed high.
func settle(t *testing.T, pid int, metricsURL string, base resources, d time.Duration,
	rssSlack int64, fdSlack, goSlack int) resources {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		now := sampleResources(t, pid, metricsURL)
		ok := now.RSS <= base.RSS+rssSlack && now.FDs <= base.FDs+fdSlack &&
			(base.Goroutines < 0 || now.Goroutines <= base.Goroutines+goSlack)
		if ok {
			return now
		}
		if time.Now().After(deadline) {
			t.Errorf("resources did not return near the baseline within %v: before %v, after %v (slack rss %dMiB fds %d goroutines %d)",
				d, base, now, rssSlack>>20, fdSlack, goSlack)
			return now
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// attackReport logs one attack's figures in a fixed shape the closing note quotes.
func attackReport(t *testing.T, name string, sent, failed int, before, after resources) {
	t.Helper()
	t.Logf("ATTACK %s: sent=%d failed=%d before[%v] after[%v]", name, sent, failed, before, after)
}
