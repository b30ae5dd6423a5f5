package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sampleReport is a small report as a run would write it.
func sampleReport(swP50, swP99 float64) *Report {
	mk := func(name string, p50, p99 float64) *Phase {
		h := NewHist()
		for i := range 97 {
			h.Record(time.Duration(p50*1000) + time.Duration(i))
		}
		for range 3 {
			h.Record(time.Duration(p99 * 1000))
		}
		s := h.Summarize()
		return &Phase{Name: name, Requests: 100, Seconds: 1, RequestsPerS: 100, OutputTokensPerS: 800,
			Dispatch: s, Return: s, Overhead: s, TTFT: s, ITL: s, E2E: s, PerRank: []int64{50, 50}}
	}
	r := &Report{Schema: SchemaVersion, StartedAt: time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC),
		Machine: Machine{GOOS: "linux", GOARCH: "amd64", CPUs: 2}, Config: DefaultConfig(),
		Switchyard: mk("switchyard", swP50, swP99), Baseline: mk("relay", 100, 200)}
	r.OverheadRatio = ratioOf(r.Switchyard, r.Baseline)
	r.Targets = checkTargets(r)
	return r
}

func TestReportJSONSchema(t *testing.T) {
	r := sampleReport(120, 300)
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The names product.md promises, read the way CI scripts read them.
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	ratio, _ := m["overhead_ratio"].(map[string]any)
	for _, k := range []string{"p50", "p99"} {
		if _, ok := ratio[k].(float64); !ok {
			t.Errorf("overhead_ratio.%s missing or not a number: %v", k, m["overhead_ratio"])
		}
	}
	for _, path := range []string{"schema", "machine", "config", "switchyard", "baseline", "targets"} {
		if _, ok := m[path]; !ok {
			t.Errorf("top-level %q missing", path)
		}
	}
	sw := m["switchyard"].(map[string]any)
	for _, k := range []string{"dispatch", "return", "overhead", "ttft", "itl", "e2e", "requests_per_s",
		"output_tokens_per_s", "cpu_s_per_1k_requests", "peak_rss_bytes", "allocs_per_request", "per_rank"} {
		if _, ok := sw[k]; !ok {
			t.Errorf("switchyard.%s missing", k)
		}
	}
	if _, ok := sw["dispatch"].(map[string]any)["p99_us"]; !ok {
		t.Error("switchyard.dispatch.p99_us missing")
	}

	back, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("round trip (-wrote +read):\n%s", diff)
	}
}

func TestReadReportRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	if err := os.WriteFile(path, []byte(`{"schema":"something-else/3"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReport(path); !errors.Is(err, ErrSchema) {
		t.Errorf("ReadReport = %v, want ErrSchema", err)
	}
}

func TestRatioAndTargets(t *testing.T) {
	r := sampleReport(120, 500) // baseline 100/200: 1.2x at p50, 2.5x at p99
	if math.Abs(r.OverheadRatio.P50-1.2) > 0.01 || math.Abs(r.OverheadRatio.P99-2.5) > 0.05 {
		t.Fatalf("ratio = %+v, want ~1.2 and ~2.5", r.OverheadRatio)
	}
	met := map[string]bool{}
	for _, tg := range r.Targets {
		met[tg.Name] = tg.MetRuns == 1
		if tg.Met || tg.Runs != 1 || tg.Judged() {
			t.Errorf("a single run judged %+v", tg)
		}
	}
	if !met["dispatch+return p50 vs relay"] || met["dispatch+return p99 vs relay"] {
		t.Errorf("targets = %+v, want p50 met and p99 missed", r.Targets)
	}
	r.Config.RelayWork = 10 * time.Microsecond // a calibration run: the relay is handicapped
	for _, tg := range checkTargets(r) {
		if strings.Contains(tg.Name, "vs relay") {
			t.Errorf("a --relay-work run stated %q", tg.Name)
		}
	}
	r.Config.RelayWork = 0
	r.Config.Rate = 100 // not the target's scenario: no verdict
	if ts := checkTargets(r); len(ts) != 0 {
		t.Errorf("checkTargets on another scenario = %+v, want none", ts)
	}
}

func TestCompare(t *testing.T) {
	a, b := sampleReport(120, 300), sampleReport(150, 300)
	b.Switchyard.OutputTokensPerS = 1000
	b.Config.Rate = 4000
	changes, err := Compare(a, b)
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Change{}
	for _, c := range changes {
		by[c.Figure] = c
	}
	p50 := by["switchyard.overhead.p50_us"]
	if p50.Verdict != "worse" || math.Abs(p50.Percent-25) > 0.5 {
		t.Errorf("overhead p50 change = %+v, want +25%% worse", p50)
	}
	if c := by["switchyard.output_tokens_per_s"]; c.Verdict != "better" || c.Percent != 25 {
		t.Errorf("tokens/s change = %+v, want +25%% better", c)
	}
	if c := by["overhead_ratio.p50"]; c.Verdict != "worse" {
		t.Errorf("ratio change = %+v, want worse", c)
	}
	for k := range by {
		if strings.Contains(k, "cdf") || strings.HasPrefix(k, "config.") {
			t.Errorf("figure %q should not be compared", k)
		}
	}
	var out bytes.Buffer
	if err := PrintCompare(&out, "a.json", "b.json", a, b, false); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"config.rate: 5000 -> 4000", "switchyard.overhead.p50_us", "+25.0%", "worse"} {
		if !strings.Contains(s, want) {
			t.Errorf("PrintCompare output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "switchyard.requests ") {
		t.Errorf("unchanged figures printed without all:\n%s", s)
	}
}

func TestPrintTableAndChart(t *testing.T) {
	r := sampleReport(120, 300)
	r.Sweep = []SweepPoint{
		{OfferedRate: 1000, Switchyard: r.Switchyard, Baseline: r.Baseline},
		{OfferedRate: 2000, Switchyard: r.Switchyard, Baseline: r.Baseline},
	}
	var out bytes.Buffer
	if err := PrintTable(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dispatch+return", "overhead ratio", "targets", "sweep"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
