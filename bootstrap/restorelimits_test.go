package bootstrap

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A snapshot holding more than the limits allow (written with larger limits,
// or by hand) is cut to them at load, with a log line per engine dropped,
// instead of bringing back what the limits prevent: an engine of tp_size 1e9
// made /v2/engines build a billion "missing" entries. It used to load as it was.
func TestSnapshotLoadEnforcesLimits(t *testing.T) {
	cfg := testConfig()
	cfg.SnapshotPath = filepath.Join(t.TempDir(), "registry.json")
	cfg.MaxEngines = 2
	cfg.MaxWorkersPerEngine = 4
	engine := func(dp int, id string, tp int) string {
		return fmt.Sprintf(`{"dp_rank": %d, "generation": 1, "engine": {"engine_id": %q, "generation": 1, "tp_size": %d, "pp_size": 1,
			"created": "2026-01-01T00:00:00Z", "workers": [{"tp_rank": 0, "pp_rank": 0, "addr": "tcp://10.0.0.%d:1", "registered_at": "2026-01-01T00:00:00Z"}]}}`, dp, id, tp, dp+1)
	}
	snap := `{"version": 1, "saved_at": "2026-01-01T00:00:00Z", "slots": [` + strings.Join([]string{
		engine(0, "huge", 1000000000),
		engine(1, strings.Repeat("x", 300), 1),
		engine(2, "E2", 1),
		engine(3, "E3", 2),
		engine(4, "E4", 1),
	}, ",") + `]}`
	if err := os.WriteFile(cfg.SnapshotPath, []byte(snap), 0o644); err != nil {
		t.Fatal(err)
	}
	s, clk := newTestServer(t, cfg, newFakeProber())
	var ids []string
	for _, e := range s.reg.Engines(clk.Now()) {
		if e.Current {
			ids = append(ids, e.EngineID)
		}
	}
	if strings.Join(ids, ",") != "E2,E3" {
		t.Fatalf("engines after load: %v, want E2,E3 (tp_size 1e9, a 300-byte id and the third engine past --max-engines dropped)", ids)
	}
	if code, body := do(t, s.Handler(), "GET", "/v2/engines", ""); code != 200 || len(body) > 1<<16 {
		t.Fatalf("/v2/engines: %d, %d bytes", code, len(body))
	}
}
