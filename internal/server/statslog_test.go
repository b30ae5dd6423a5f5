package server

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// The stats line: one per engine with the interval's prompt and generation
// throughput and the engine's last reported load; one idle report, then quiet
// until something happens.
func TestStatsLog(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := newFakeCoreConfig(t, 2, dispatcher.Config{Policy: dispatcher.PolicyRoundRobin, Registerer: reg})
	buf := &lockedBuffer{}
	clock := time.Unix(1000, 0)
	stats := newStatsLog(slog.New(slog.NewJSONHandler(buf, nil)), f.D, reg, func() time.Time { return clock })
	api := httpapi.NewAPI(httpapi.APIConfig{
		Dispatcher: f.D, Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		Stats: stats,
	})
	ts := httptest.NewServer(api.Handler())
	defer ts.Close()
	// Rank 1 (pinned) gets a 4-token prompt and makes 6 tokens, and reports load.
	if resp, body := post(t, ts, `{"prompt": [1, 2, 3, 4], "max_tokens": 6}`, httpapi.RankHeader, "1"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	f.D.ObserveLoad(1, 3, 5, 0.25)

	clock = clock.Add(2 * time.Second)
	stats.report()
	lines := buf.lines(t, "engine stats")
	if len(lines) != 2 {
		t.Fatalf("%d stats lines, want one per engine:\n%s", len(lines), buf.String())
	}
	want := map[string]any{"rank": 1.0, "prompt_tokens_per_s": 2.0, "generation_tokens_per_s": 3.0,
		"running": 5.0, "waiting": 3.0, "kv_cache_usage_pct": 25.0, "state": "up"}
	for k, v := range want {
		if lines[1][k] != v {
			t.Errorf("rank 1 line %v: %s = %v, want %v", lines[1], k, lines[1][k], v)
		}
	}
	if lines[0]["rank"] != 0.0 || lines[0]["generation_tokens_per_s"] != 0.0 {
		t.Errorf("rank 0 line %v", lines[0])
	}

	// Busy (rank 1 still reports running requests), then idle once, then quiet.
	f.D.ObserveLoad(1, 0, 0, 0)
	for i, wantLines := range []int{4, 4, 6} {
		if i == 2 {
			f.D.ObserveLoad(0, 1, 1, 0.5) // activity again
		}
		clock = clock.Add(10 * time.Second)
		stats.report()
		if got := len(buf.lines(t, "engine stats")); got != wantLines {
			t.Fatalf("report %d: %d lines in all, want %d:\n%s", i, got, wantLines, buf.String())
		}
	}
}

// serve wires both logs by default: a completion gets its access-log line and the
// stats line reports its tokens; --disable-log-requests and --log-stats-interval 0
// turn them off.
func TestServeLogs(t *testing.T) {
	for _, on := range []bool{true, false} {
		buf := &lockedBuffer{}
		s := startServer(t, func(c *Config) {
			c.Logger = slog.New(slog.NewJSONHandler(buf, nil))
			c.LogStatsInterval = 50 * time.Millisecond
			if !on {
				c.DisableLogRequests, c.LogStatsInterval = true, 0
			}
		})
		resp, err := testwait.HTTPClient.Post("http://"+s.HTTPAddr()+"/v1/completions", "application/json",
			strings.NewReader(`{"prompt": [1, 2, 3], "max_tokens": 5}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		time.Sleep(300 * time.Millisecond)
		access, stats := buf.lines(t, "request"), buf.lines(t, "engine stats")
		if !on {
			if len(access)+len(stats) != 0 {
				t.Errorf("logs off, yet %d access and %d stats lines", len(access), len(stats))
			}
			continue
		}
		if len(access) != 1 || access[0]["completion_tokens"] != 5.0 || access[0]["component"] != "http" {
			t.Errorf("access log %v", access)
		}
		var gen float64
		for _, l := range stats {
			gen += l["generation_tokens_per_s"].(float64)
		}
		if len(stats) == 0 || gen == 0 {
			t.Errorf("stats lines %v: want some, with the generated tokens", stats)
		}
	}
}
