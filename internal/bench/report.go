package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// SchemaVersion names the JSON layout; --compare refuses files of another schema
// family and tolerates added fields within one.
const SchemaVersion = "switchyard-bench/1"

// Report is everything one `switchyard bench` run states, and the JSON file's layout.
type Report struct {
	Schema    string    `json:"schema"`
	StartedAt time.Time `json:"started_at"`
	Machine   Machine   `json:"machine"`
	Config    Config    `json:"config"`

	Switchyard *Phase `json:"switchyard"`
	Baseline   *Phase `json:"baseline,omitempty"`

	// OverheadRatio is switchyard's dispatch+return latency over the relay baseline's,
	// per percentile, measured in the same run: 1.0 means no cost over the transport.
	OverheadRatio *Ratio `json:"overhead_ratio,omitempty"`

	// Sweep is the throughput-vs-latency curve, one point per offered rate.
	Sweep []SweepPoint `json:"sweep,omitempty"`

	// HTTP is the HTTP comparison's result (Config.HTTP): switchyard's HTTP API
	// against an HTTP floor, JSON and SSE.
	HTTP *HTTPReport `json:"http,omitempty"`

	// Memory is the in-flight memory scenario's result (Config.Inflight > 0).
	Memory *Memory `json:"memory,omitempty"`

	// KV is a kv workload's figures per routing policy (Config.KV), keyed by the
	// policy's name; KVWorkload describes the workload they all replayed.
	KV         map[string]*KVPolicy `json:"kv,omitempty"`
	KVWorkload *KVWorkloadFigures   `json:"kv_workload,omitempty"`

	// Scale is the scale sweeps' points (Config.Scale, RunScale).
	Scale *ScaleReport `json:"scale,omitempty"`

	// Targets checks the figures against the targets where this run's shape
	// matches the target's scenario.
	Targets []Target `json:"targets,omitempty"`

	// Warnings are reasons to distrust the figures, e.g. that the load generator
	// fell behind its schedule, so the offered rate was not reached.
	Warnings []string `json:"warnings,omitempty"`

	// Runs is how many runs this report combines (Config.Repeat); the latency
	// figures are the last run's, the targets every run's.
	Runs int `json:"runs,omitempty"`
	// AARuns is how many A/A runs (the baseline in switchyard's place) alternated
	// with them; their ratios are each target's AAGots.
	AARuns int `json:"aa_runs,omitempty"`
}

// Machine says where the figures were taken; numbers from different machines do not
// compare.
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	CPUModel   string `json:"cpu_model,omitempty"`
	Hostname   string `json:"hostname,omitempty"`
}

// ThisMachine describes the running host.
func ThisMachine() Machine {
	m := Machine{
		GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
	}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// Phase is one measured system (switchyard, or the relay baseline) under the load.
type Phase struct {
	Name      string  `json:"name"`
	Requests  int64   `json:"requests"` // finished in the measured window
	Failed    int64   `json:"failed"`
	Unmatched int64   `json:"unmatched,omitempty"` // finished but no engine timestamp found
	Seconds   float64 `json:"seconds"`             // length of the measured window
	// Achieved rates over the measured window.
	RequestsPerS     float64 `json:"requests_per_s"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// SendLagP99US is how far behind the Poisson schedule the sender fell at p99; a large
	// value means the client itself could not keep up and the offered rate was not met.
	SendLagP99US float64 `json:"send_lag_p99_us"`

	Dispatch   Summary `json:"dispatch"`    // client submit -> ADD received by the engine
	Return     Summary `json:"return"`      // engine sent first output -> client received it
	ReturnLast Summary `json:"return_last"` // same for the final output
	Overhead   Summary `json:"overhead"`    // dispatch + return, per request
	TTFT       Summary `json:"ttft"`
	ITL        Summary `json:"itl"` // gap between consecutive outputs of one request
	E2E        Summary `json:"e2e"`

	PerRank []int64 `json:"per_rank"` // measured requests served by each engine rank

	// Process figures over the measured window. In the embedded modes the process holds
	// the client and the engines as well, so compare these with the baseline phase:
	// the difference is what the frontend adds over the relay.
	CPUSecondsPer1kRequests float64 `json:"cpu_s_per_1k_requests"`
	PeakRSSBytes            int64   `json:"peak_rss_bytes"`
	AllocsPerRequest        float64 `json:"allocs_per_request"`
	BytesAllocPerRequest    float64 `json:"bytes_alloc_per_request"`
}

// Ratio is switchyard over baseline at two percentiles.
type Ratio struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// SweepPoint is one offered rate of a sweep.
type SweepPoint struct {
	OfferedRate float64 `json:"offered_rate"`
	Switchyard  *Phase  `json:"switchyard"`
	Baseline    *Phase  `json:"baseline,omitempty"`
}

// Memory is the in-flight memory scenario: heap held per request in flight, measured
// as the heap with Inflight requests held minus the heap before they were submitted,
// for switchyard and for the relay (which keeps nothing per request); the difference
// is switchyard's own cost.
type Memory struct {
	Inflight                  int     `json:"inflight"`
	SwitchyardHeapPerRequest  float64 `json:"switchyard_heap_bytes_per_request"`
	BaselineHeapPerRequest    float64 `json:"baseline_heap_bytes_per_request"`
	FrontendBytesPerRequest   float64 `json:"frontend_bytes_per_request"`
	SwitchyardPeakRSSBytes    int64   `json:"switchyard_peak_rss_bytes"`
	BaselinePeakRSSBytes      int64   `json:"baseline_peak_rss_bytes"`
	SwitchyardGoroutinesAtTop int     `json:"switchyard_goroutines_at_top"`
}

// Target is one of the targets checked against this run.
type Target struct {
	Name string  `json:"name"`
	Want string  `json:"want"`
	Got  float64 `json:"got"`
	Unit string  `json:"unit"`
	// Met: over at least two runs (--repeat), the median of the runs' figures meets
	// Want and the A/A series, when there is one, is within AANoise; a single run
	// is not judged and has Met false. A "reported" target is always Met.
	Met  bool   `json:"met"`
	Note string `json:"note,omitempty"`
	// Runs is how many runs checked the target, MetRuns in how many it held, Gots
	// each run's figure (Got is their median).
	Runs    int       `json:"runs"`
	MetRuns int       `json:"met_runs"`
	Gots    []float64 `json:"gots,omitempty"`
	// AAGot is the median of the same ratio in the A/A series run alternately with
	// the measured runs (the baseline in switchyard's place), AAGots each A/A run's.
	AAGot  float64   `json:"aa_got,omitempty"`
	AAGots []float64 `json:"aa_gots,omitempty"`
	// Verdict is the judgement in one word: met, missed, too noisy (the A/A
	// median is beyond AANoise: the machine, not the frontend, decides), not
	// judged (a single run) or reported.
	Verdict string `json:"verdict,omitempty"`
}

// Judged reports whether the target's Met is a verdict: over two runs or more, or
// a figure that is only reported.
func (t Target) Judged() bool { return t.Runs >= 2 || t.Want == wantReported }

// ratioOf divides switchyard's overhead percentiles by the baseline's.
func ratioOf(sw, base *Phase) *Ratio {
	if sw == nil || base == nil || base.Overhead.P50US == 0 || base.Overhead.P99US == 0 {
		return nil
	}
	return &Ratio{
		P50: sw.Overhead.P50US / base.Overhead.P50US,
		P99: sw.Overhead.P99US / base.Overhead.P99US,
	}
}

// WriteJSON writes r to path, indented so that diffs of CI history stay readable.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode report: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if !strings.HasPrefix(r.Schema, "switchyard-bench/") {
		return nil, fmt.Errorf("%w: %s (schema %q)", ErrSchema, path, r.Schema)
	}
	return &r, nil
}
