package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A short embed run serves requests on both sides without an error, and its
// table names both.
func TestEmbedBench(t *testing.T) {
	cfg := DefaultEmbedConfig()
	cfg.Clients, cfg.Warmup, cfg.Duration, cfg.Hidden = 2, 100*time.Millisecond, 400*time.Millisecond, 16
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunEmbed(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []EmbedPhase{rep.Floor, rep.Switchyard} {
		if p.Requests == 0 || p.Errors != 0 || p.P50Ms <= 0 {
			t.Errorf("%s: %+v", p.Name, p)
		}
	}
	if tab := rep.EmbedTable(); !strings.Contains(tab, "floor") || !strings.Contains(tab, "switchyard") {
		t.Errorf("table:\n%s", tab)
	}
}
