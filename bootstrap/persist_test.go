package bootstrap

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSnapshotCostPerChange: each registration appends its dp rank's state
// to the change log instead of rewriting the whole registry, so the bytes
// written grow linearly with the registrations, not quadratically (the
// rewrite cost 18 s per 1,000 registrations by the 4,000th).
func TestSnapshotCostPerChange(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotPath = filepath.Join(t.TempDir(), "registry.json")
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	s, _ := newTestServer(t, cfg, newFakeProber())
	const n = 600
	for dp := range n {
		if code, body := do(t, s.Handler(), "POST", "/register", regBody(fmt.Sprintf("E%04d", dp), dp, 0, 0, fmt.Sprintf("tcp://10.0.%d.%d:1", dp/256, dp%256))); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	written := testutil.ToFloat64(s.metrics.snapshotBytes)
	// About 250 bytes a record; a whole-file rewrite per change writes
	// n*n/2 records' worth (tens of MB here).
	if written > n*1024 {
		t.Fatalf("%.0f bytes written for %d registrations, want under %d", written, n, n*1024)
	}
	t.Logf("%d registrations wrote %.0f bytes", n, written)
}

// TestSnapshotLogReplay: the snapshot plus its change log bring every engine
// back after a restart, across folds, and a torn last record (a crash
// mid-append) is ignored while a corrupt earlier one is an error.
func TestSnapshotLogReplay(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig()
	cfg.SnapshotPath = filepath.Join(dir, "registry.json")
	cfg.SnapshotCompactBytes = 2 << 10 // fold every few registrations
	p := newFakeProber()
	s1, _ := newTestServer(t, cfg, p)
	const n = 40
	for dp := range n {
		a := fmt.Sprintf("10.0.0.%d:1", dp+1)
		p.set(a, true)
		if code, body := do(t, s1.Handler(), "POST", "/register", regBody(fmt.Sprintf("E%02d", dp), dp, 0, 0, "tcp://"+a)); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	do(t, s1.Handler(), "DELETE", "/v2/engines/E07", "")
	do(t, s1.Handler(), "POST", "/v2/engines/E08/drain", "")
	_, want := do(t, s1.Handler(), "GET", "/query", "")
	s1.closeJournal()
	if _, err := os.Stat(cfg.SnapshotPath); err != nil {
		t.Fatalf("no fold happened: %v", err)
	}

	f, err := os.OpenFile(cfg.SnapshotPath+".log", os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"dp_rank":3,"generation":9,"eng`) // torn
	f.Close()

	s2, _ := newTestServer(t, cfg, p)
	s2.sweep(context.Background())
	if _, got := do(t, s2.Handler(), "GET", "/query", ""); got != want {
		t.Fatalf("after restart:\n%s\nwant\n%s", got, want)
	}
	if _, got := do(t, s2.Handler(), "GET", "/v2/engines/E08", ""); !strings.Contains(got, `"state":"draining"`) {
		t.Fatalf("drain lost: %s", got)
	}
	s2.closeJournal()

	os.WriteFile(cfg.SnapshotPath+".log", []byte("{bad\n"+`{"dp_rank":1}`+"\n"), 0o644)
	if _, err := newServer(cfg, NewRegistry(cfg.Policy()), p, time.Now); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("corrupt log: %v", err)
	}
}
