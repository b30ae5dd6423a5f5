package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/switchyard-llm/switchyard/internal/bench/floor"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The HTTP comparison (`switchyard bench --http`): an HTTP floor and switchyard's HTTP
// API, each started the same way (in a child process of its own when
// Options.ServerCommand is set, so the CPU and allocations measured are that server's
// alone; the load generator and the engines stay in this process), with the same bench
// engines and the same closed-loop load, first answering JSON, then SSE.

// HTTPReport is the HTTP comparison's result: one HTTPMode per answer shape and the
// worse of the two ratios at the top, which the goals are stated on.
type HTTPReport struct {
	JSON *HTTPMode `json:"json"`
	SSE  *HTTPMode `json:"sse"`
	// CPURatio is switchyard's CPU per request over the floor's (the larger of JSON
	// and SSE); OverheadRatio the same for the latency overhead percentiles.
	CPURatio      float64 `json:"cpu_ratio"`
	OverheadRatio *Ratio  `json:"overhead_ratio,omitempty"`
	// ServerProcess: the CPU and allocations are the server process's alone (a child
	// process); false when everything ran in this process (no ServerCommand).
	ServerProcess bool `json:"server_process"`
}

// HTTPMode is one answer shape: the floor and switchyard phases and their ratios.
type HTTPMode struct {
	Floor         *Phase  `json:"floor"`
	Switchyard    *Phase  `json:"switchyard"`
	CPURatio      float64 `json:"cpu_ratio"`
	AllocRatio    float64 `json:"alloc_ratio"`
	OverheadRatio *Ratio  `json:"overhead_ratio,omitempty"`
}

// runHTTP runs the four phases of the HTTP comparison.
func runHTTP(ctx context.Context, cfg Config, opt Options) (*HTTPReport, error) {
	rep := &HTTPReport{ServerProcess: len(opt.ServerCommand) > 0}
	for _, stream := range []bool{false, true} {
		c := cfg
		c.HTTPStream = stream
		var ph [2]*Phase
		for i, kind := range []string{"floor", "switchyard"} {
			label := kind
			if i == 1 && cfg.BaselineVsBaseline { // A/A: the floor again, under its own name
				kind, label = "floor", "floor-2"
			}
			p, err := runPhase(ctx, c, opt, func(ctx context.Context) (system, error) {
				return startHTTPSystem(ctx, c, opt, kind, label)
			})
			if err != nil {
				return nil, fmt.Errorf("http %s: %w", kind, err)
			}
			ph[i] = p
			runtime.GC()
		}
		m := &HTTPMode{Floor: ph[0], Switchyard: ph[1], OverheadRatio: ratioOf(ph[1], ph[0])}
		if f := ph[0].CPUSecondsPer1kRequests; f > 0 {
			m.CPURatio = ph[1].CPUSecondsPer1kRequests / f
		}
		if f := ph[0].AllocsPerRequest; f > 0 {
			m.AllocRatio = ph[1].AllocsPerRequest / f
		}
		if stream {
			rep.SSE = m
		} else {
			rep.JSON = m
		}
	}
	rep.CPURatio = max(rep.JSON.CPURatio, rep.SSE.CPURatio)
	if a, b := rep.JSON.OverheadRatio, rep.SSE.OverheadRatio; a != nil && b != nil {
		rep.OverheadRatio = &Ratio{P50: max(a.P50, b.P50), P99: max(a.P99, b.P99)}
	}
	return rep, nil
}

// httpSide is one HTTP server of the comparison, wherever it runs.
type httpSide struct {
	httpAddr, handshake string
	ready               func(ctx context.Context, n int) error
	close               func() error
}

// startHTTPSide starts the floor or switchyard (as `serve --handshake-address` wires
// it) on loopback, waiting for cfg.Engines bench engines.
func startHTTPSide(ctx context.Context, kind string, cfg Config) (*httpSide, error) {
	switch kind {
	case "floor":
		ep, err := newEndpoints(cfg.Transport)
		if err != nil {
			return nil, err
		}
		f, err := floor.StartHTTPFloor(ctx, cfg.layout(), floor.HTTPFloorAddrs{HTTP: "127.0.0.1:0", Handshake: "tcp://127.0.0.1:0",
			Input: ep.next("input"), Output: ep.next("output")})
		if err != nil {
			ep.cleanup()
			return nil, err
		}
		return &httpSide{httpAddr: f.HTTPAddr(), handshake: f.HandshakeAddr(), ready: f.AwaitEngines,
			close: func() error { err := f.Close(); ep.cleanup(); return err }}, nil
	case "switchyard":
		sys, err := startEmbedded(ctx, cfg)
		if err != nil {
			return nil, err
		}
		es := sys.(*embeddedSystem)
		return &httpSide{httpAddr: es.srv.HTTPAddr(), handshake: es.handshake(), ready: es.ready, close: es.close}, nil
	}
	return nil, fmt.Errorf("bench: unknown HTTP system %q", kind)
}

// httpSystem is one phase's server: in this process, or a child started with
// Options.ServerCommand (`switchyard bench http-server`) and steered over its
// control address.
type httpSystem struct {
	kind, phase string
	cfg         Config
	side        *httpSide // in process
	proc        *exec.Cmd
	info        HTTPServerInfo
	ctl         *http.Client
}

// HTTPServerInfo is the line a child HTTP server prints when it is listening.
type HTTPServerInfo struct {
	HTTP      string `json:"http"`
	Handshake string `json:"handshake"`
	Control   string `json:"control"`
}

// label names the phase ("floor-2" for an A/A run's second floor).
func startHTTPSystem(ctx context.Context, cfg Config, opt Options, kind, label string) (system, error) {
	shape := "json"
	if cfg.HTTPStream {
		shape = "sse"
	}
	s := &httpSystem{kind: kind, phase: label + " " + shape, cfg: cfg, ctl: &http.Client{}}
	if len(opt.ServerCommand) == 0 {
		side, err := startHTTPSide(ctx, kind, cfg)
		if err != nil {
			return nil, err
		}
		s.side = side
		s.info = HTTPServerInfo{HTTP: side.httpAddr, Handshake: side.handshake}
		return s, nil
	}
	args := append(append([]string(nil), opt.ServerCommand[1:]...), serverArgs(cfg, kind, label, shape)...)
	cmd := exec.Command(opt.ServerCommand[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the %s server: %w", kind, err)
	}
	s.proc = cmd
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err == nil {
		err = json.Unmarshal(line, &s.info)
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("bench: the %s server did not say where it listens: %w", kind, err)
	}
	return s, nil
}

// serverArgs are the child server's flags for one phase: its system, the engines it
// waits for, the switchyard phase's routing policy, and the profile and trace files.
func serverArgs(cfg Config, kind, label, shape string) []string {
	args := []string{"--system", kind,
		"--engines", strconv.Itoa(cfg.Engines), "--transport", cfg.Transport}
	if cfg.VLLMLayout != "" {
		args = append(args, "--vllm-layout", cfg.VLLMLayout)
	}
	if cfg.Policy != "" && kind == "switchyard" {
		args = append(args, "--lb-policy", cfg.Policy)
	}
	if cfg.Profile != "" && kind == "switchyard" {
		args = append(args, "--cpuprofile", cfg.Profile+"."+shape, "--memprofile", cfg.Profile+"."+shape+".allocs")
	}
	if cfg.Trace != "" {
		args = append(args, "--trace", cfg.Trace+".server."+label+"-"+shape)
	}
	return args
}

func (s *httpSystem) name() string      { return s.phase }
func (s *httpSystem) handshake() string { return s.info.Handshake }

func (s *httpSystem) pid() int {
	if s.proc != nil {
		return s.proc.Process.Pid
	}
	return 0
}

func (s *httpSystem) ready(ctx context.Context, n int) error {
	if s.side != nil {
		return s.side.ready(ctx, n)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.info.Control+"/ready", nil)
	resp, err := s.ctl.Do(req)
	if err != nil {
		return fmt.Errorf("bench: %s server not ready: %w", s.kind, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: %s server: %s", s.kind, strings.TrimSpace(string(b)))
	}
	return nil
}

func (s *httpSystem) connect(_ context.Context, sk sink) (conn, error) {
	return newHTTPConn("http://"+s.info.HTTP, s.cfg, sk, s.cfg.HTTPStream), nil
}

// snap reads the server's own CPU and allocation counters: a child answers them
// from inside (getrusage and runtime/metrics); in process they are this process's.
func (s *httpSystem) snap() procSnap {
	if s.proc == nil {
		return snapSelf()
	}
	at := time.Now()
	var w snapWire
	resp, err := s.ctl.Get("http://" + s.info.Control + "/snap")
	if err == nil {
		err = json.NewDecoder(resp.Body).Decode(&w)
		resp.Body.Close()
	}
	if err != nil {
		return snapPID(s.pid())
	}
	return procSnap{at: at, cpu: time.Duration(w.CPUNS), allocs: w.Allocs, bytes: w.Bytes}
}

func (s *httpSystem) close() error {
	if s.side != nil {
		return s.side.close()
	}
	if s.proc == nil || s.proc.Process == nil {
		return nil
	}
	_ = s.proc.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- s.proc.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(15 * time.Second):
		_ = s.proc.Process.Kill()
		<-done
		return fmt.Errorf("bench: the %s server did not stop on SIGTERM", s.kind)
	}
}

// snapper is a system that reads its own cost counters (a child server).
type snapper interface{ snap() procSnap }

type snapWire struct {
	CPUNS  int64  `json:"cpu_ns"`
	Allocs uint64 `json:"allocs"`
	Bytes  uint64 `json:"bytes"`
}

// HTTPServerConfig is the child server's command line.
type HTTPServerConfig struct {
	System     string // "floor" or "switchyard"
	Bench      Config // Engines, Transport, VLLMLayout are used
	CPUProfile string // switchyard's CPU profile over the child's life
	MemProfile string // and its allocation profile at exit
	// Trace is a file for a runtime trace of the server's first traceSpan of the
	// measured window (from the first GET /snap, which opens it).
	Trace string
}

// RunHTTPServer is `switchyard bench http-server`: it starts one side of the HTTP
// comparison, prints its HTTPServerInfo as one JSON line to out, answers GET /ready
// (once cfg.Bench.Engines engines are up) and GET /snap (its CPU and allocation
// counters) on the control address, and stops when ctx ends.
func RunHTTPServer(ctx context.Context, cfg HTTPServerConfig, out io.Writer) error {
	side, err := startHTTPSide(ctx, cfg.System, cfg.Bench)
	if err != nil {
		return err
	}
	defer side.close()
	if cfg.CPUProfile != "" {
		if f, err := os.Create(cfg.CPUProfile); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
		}
	}
	if cfg.MemProfile != "" {
		defer func() {
			if f, err := os.Create(cfg.MemProfile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	ready := make(chan struct{})
	var readyErr error
	go func() {
		defer close(ready)
		rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		readyErr = side.ready(rctx, cfg.Bench.Engines)
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-ready:
		case <-r.Context().Done():
			return
		}
		if readyErr != nil {
			http.Error(w, readyErr.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	var traceMu sync.Mutex // a /snap handler may still run when this returns
	var stopTrace func()
	defer func() {
		traceMu.Lock()
		defer traceMu.Unlock()
		if stopTrace != nil {
			stopTrace()
		}
	}()
	mux.HandleFunc("GET /snap", func(w http.ResponseWriter, _ *http.Request) {
		if cfg.Trace != "" {
			traceMu.Lock()
			if stopTrace == nil {
				stopTrace = startTraceFile(cfg.Trace, Options{}.withDefaults())
			}
			traceMu.Unlock()
		}
		p := snapSelf()
		_ = json.NewEncoder(w).Encode(snapWire{CPUNS: int64(p.cpu), Allocs: p.allocs, Bytes: p.bytes})
	})
	ctl := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = ctl.Serve(ln) }()
	defer ctl.Close()
	b, _ := json.Marshal(HTTPServerInfo{HTTP: side.httpAddr, Handshake: side.handshake, Control: ln.Addr().String()})
	if _, err := fmt.Fprintf(out, "%s\n", b); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
