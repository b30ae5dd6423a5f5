package bench

// `switchyard bench --workload embed`: requests per second and per-request
// latency of POST /v1/embeddings through switchyard, against the embed floor
// (floor.EmbedFloor) measured in the same run with the same engines: built-in mock
// pooling engines in this process, fresh for each side, and the same closed-loop
// load of token-id inputs.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/internal/bench/floor"
	"github.com/switchyard-llm/switchyard/internal/mockengine"
	"github.com/switchyard-llm/switchyard/internal/server"
)

// EmbedConfig shapes the embed workload.
type EmbedConfig struct {
	Engines      int
	Clients      int           // closed-loop HTTP clients
	Inputs       int           // token-id inputs per request
	PromptTokens int           // tokens per input
	Hidden       int           // the mock model's embedding size
	Step         time.Duration // the engines' step interval
	Warmup       time.Duration
	Duration     time.Duration
	Seed         uint64
}

// DefaultEmbedConfig: 2 engines, 16 clients, 4 inputs of 32 tokens, 768 dimensions.
func DefaultEmbedConfig() EmbedConfig {
	return EmbedConfig{Engines: 2, Clients: 16, Inputs: 4, PromptTokens: 32, Hidden: 768,
		Step: time.Millisecond, Warmup: time.Second, Duration: 3 * time.Second, Seed: 1}
}

// EmbedPhase is one side's measurement.
type EmbedPhase struct {
	Name        string  `json:"name"`
	Requests    int     `json:"requests"`
	Errors      int     `json:"errors"`
	RequestsSec float64 `json:"requests_per_sec"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
}

// EmbedReport is the floor's and switchyard's phases and the overhead between them.
type EmbedReport struct {
	Config     EmbedConfig `json:"config"`
	Floor      EmbedPhase  `json:"floor"`
	Switchyard EmbedPhase  `json:"switchyard"`
	// OverheadP50Ms is switchyard's median latency minus the floor's: what
	// switchyard adds to one request; ThroughputRatio its requests/s over the floor's.
	OverheadP50Ms   float64 `json:"overhead_p50_ms"`
	ThroughputRatio float64 `json:"throughput_ratio"`
}

// RunEmbed runs the floor phase, then the switchyard phase.
func RunEmbed(ctx context.Context, cfg EmbedConfig) (*EmbedReport, error) {
	if cfg.Engines < 1 || cfg.Clients < 1 || cfg.Inputs < 1 || cfg.PromptTokens < 1 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("bench embed: engines, clients, inputs, prompt tokens and duration must be positive")
	}
	rep := &EmbedReport{Config: cfg}
	var err error
	if rep.Floor, err = embedPhase(ctx, cfg, "floor"); err != nil {
		return nil, err
	}
	if rep.Switchyard, err = embedPhase(ctx, cfg, "switchyard"); err != nil {
		return nil, err
	}
	rep.OverheadP50Ms = rep.Switchyard.P50Ms - rep.Floor.P50Ms
	if rep.Floor.RequestsSec > 0 {
		rep.ThroughputRatio = rep.Switchyard.RequestsSec / rep.Floor.RequestsSec
	}
	return rep, nil
}

// embedPhase starts one side and its engines, runs the load, and stops them.
func embedPhase(ctx context.Context, cfg EmbedConfig, kind string) (EmbedPhase, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var httpAddr, hs string
	var ready func(context.Context) error
	var stop func()
	switch kind {
	case "floor":
		f, err := floor.StartEmbedFloor(ctx, nil, floor.HTTPFloorAddrs{HTTP: "127.0.0.1:0", Handshake: "tcp://127.0.0.1:0",
			Input: "tcp://127.0.0.1:0", Output: "tcp://127.0.0.1:0"})
		if err != nil {
			return EmbedPhase{}, err
		}
		httpAddr, hs, stop = f.HTTPAddr(), f.HandshakeAddr(), func() { f.Close() }
		ready = func(ctx context.Context) error { return f.AwaitEngines(ctx, cfg.Engines) }
	default:
		sc := server.DefaultConfig()
		sc.HandshakeAddress = "tcp://127.0.0.1:0"
		sc.DataParallelSize = cfg.Engines
		sc.EngineTransport = "tcp"
		sc.HTTPAddress = "127.0.0.1:0"
		sc.ClientAddress = "tcp://127.0.0.1:0"
		sc.ShutdownTimeout = time.Second
		sc.Logger = slog.New(slog.DiscardHandler)
		srv, err := server.Start(ctx, sc)
		if err != nil {
			return EmbedPhase{}, fmt.Errorf("bench embed: starting switchyard: %w", err)
		}
		es := &embeddedSystem{srv: srv}
		httpAddr, hs = srv.HTTPAddr(), srv.HandshakeAddr()
		ready = func(ctx context.Context) error { return es.ready(ctx, cfg.Engines) }
		stop = func() {
			sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer scancel()
			_ = srv.Shutdown(sctx)
		}
	}
	defer stop()
	var engines sync.WaitGroup
	defer engines.Wait()
	defer cancel()
	for rank := range cfg.Engines {
		m := mockengine.DefaultConfig()
		m.HandshakeAddress, m.Rank, m.DataParallelSize = hs, rank, cfg.Engines
		m.StepInterval = cfg.Step
		m.Pooling = &mockengine.PoolingModel{Tasks: []string{"embed"}, Hidden: cfg.Hidden}
		m.Logger = slog.New(slog.DiscardHandler)
		engines.Add(1)
		go func() { defer engines.Done(); _ = mockengine.Run(ctx, m) }()
	}
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	err := ready(rctx)
	rcancel()
	if err != nil {
		return EmbedPhase{}, err
	}
	return embedLoad(ctx, cfg, kind, "http://"+httpAddr+"/v1/embeddings"), nil
}

// embedLoad runs cfg.Clients closed-loop clients for the warmup and the measured
// duration, and summarises the measured requests.
func embedLoad(ctx context.Context, cfg EmbedConfig, name, url string) EmbedPhase {
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	inputs := make([][]int64, cfg.Inputs)
	for i := range inputs {
		inputs[i] = make([]int64, cfg.PromptTokens)
		for j := range inputs[i] {
			inputs[i][j] = rng.Int64N(30000)
		}
	}
	body, _ := json.Marshal(map[string]any{"input": inputs, "encoding_format": "float"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients}, Timeout: 30 * time.Second}
	start := time.Now()
	measureFrom, end := start.Add(cfg.Warmup), start.Add(cfg.Warmup+cfg.Duration)
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var wg sync.WaitGroup
	for range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(end) {
					return
				}
				resp, err := client.Post(url, "application/json", bytes.NewReader(body))
				ok := err == nil && resp.StatusCode == http.StatusOK
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				d := time.Since(t0)
				if t0.Before(measureFrom) {
					continue
				}
				mu.Lock()
				if ok {
					lat = append(lat, d)
				} else {
					errs++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	client.CloseIdleConnections()
	ph := EmbedPhase{Name: name, Requests: len(lat), Errors: errs, RequestsSec: float64(len(lat)) / cfg.Duration.Seconds()}
	if len(lat) > 0 {
		slices.Sort(lat)
		ph.P50Ms = float64(lat[len(lat)/2]) / 1e6
		ph.P99Ms = float64(lat[len(lat)*99/100]) / 1e6
	}
	return ph
}

// EmbedTable is the report as lines for a terminal.
func (r *EmbedReport) EmbedTable() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "embed workload: %d engines, %d clients, %d inputs x %d tokens, %d dimensions, %v measured\n",
		r.Config.Engines, r.Config.Clients, r.Config.Inputs, r.Config.PromptTokens, r.Config.Hidden, r.Config.Duration)
	fmt.Fprintf(&b, "%-11s %10s %8s %9s %9s\n", "system", "req/s", "errors", "p50 ms", "p99 ms")
	for _, p := range []EmbedPhase{r.Floor, r.Switchyard} {
		fmt.Fprintf(&b, "%-11s %10.1f %8d %9.3f %9.3f\n", p.Name, p.RequestsSec, p.Errors, p.P50Ms, p.P99Ms)
	}
	fmt.Fprintf(&b, "switchyard over the floor: %+.3f ms at p50, %.2fx the floor's requests/s\n", r.OverheadP50Ms, r.ThroughputRatio)
	return b.String()
}
