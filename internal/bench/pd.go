package bench

// The P/D mode (`switchyard bench --pd`): what switchyard's own pairing costs per
// request, against the proxy design vLLM documents (toy_proxy_server.py and the
// Mooncake proxy: the prefill's answer crosses an HTTP response to a proxy, and a
// second HTTP request to the decode API server, before the decode ADD goes out).
//
// Both phases run in this process on the same machine, one after the other:
//
//   - switchyard: `serve --mock-engines D --mock-prefill-engines P` wired by
//     server.Start; a closed loop of requests through the Go API. The handoff is
//     dispatcher.PDConfig.OnHandoff's duration: the prefill's final output received
//     (on the prefill engine's receive goroutine) to the decode ADD handed to the
//     decode engine's writer, every request, exact.
//   - proxy design: the same prefill engines (through the prefill dispatcher) behind
//     a Go net/http "prefill API" that answers each leg's final output as vLLM's
//     API server does (JSON with kv_transfer_params), a proxy that parses it and POSTs
//     the request with those params to a Go net/http "decode API" which submits it to
//     a plain switchyard over decode mock engines. The handoff is from the prefill
//     API having the final output to the decode API's Submit having written the ADD.
//     Go's net/http and encoding/json are faster than vLLM's FastAPI, so this is a
//     floor for the proxy design, not its real cost.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/server"
	"github.com/switchyard-llm/switchyard/wire"
)

// PDConfig is the P/D mode's configuration.
type PDConfig struct {
	Decode, Prefill int // mock engines of each role
	Concurrency     int // requests kept in flight
	Duration        time.Duration
	PromptTokens    int
	OutputTokens    int
	StepTime        time.Duration // mock engine step
}

// PDReport is the P/D mode's result.
type PDReport struct {
	Config          PDConfig
	Requests        int     // switchyard phase, finished
	Pairs           float64 // switchyard_pd_pairs_total: requests that took P then D
	Handoff         Quantiles
	ProxyRequests   int
	ProxyHandoff    Quantiles
	RequestsPerSec  float64
	ProxyReqsPerSec float64
}

// Quantiles of a duration sample, in microseconds.
type Quantiles struct {
	N                  int
	P50, P90, P99, Max float64
}

func quantilesOf(d []time.Duration) Quantiles {
	if len(d) == 0 {
		return Quantiles{}
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[min(len(d)-1, int(q*float64(len(d))))].Nanoseconds()) / 1e3 }
	return Quantiles{N: len(d), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: float64(d[len(d)-1].Nanoseconds()) / 1e3}
}

// samples collects durations from several goroutines.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

func (s *samples) take() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

// RunPD runs both phases and reports.
func RunPD(ctx context.Context, cfg PDConfig) (*PDReport, error) {
	if cfg.Decode < 1 || cfg.Prefill < 1 || cfg.Concurrency < 1 || cfg.PromptTokens < 1 || cfg.OutputTokens < 1 {
		return nil, errors.New("bench: --pd needs at least one engine of each role, --concurrency, --prompt-tokens and --output-tokens >= 1")
	}
	var hand samples
	sc := server.DefaultConfig()
	sc.HTTPAddress, sc.ClientAddress = "127.0.0.1:0", ""
	sc.MockEngines, sc.MockStep = cfg.Decode, cfg.StepTime
	sc.PD.MockPrefillEngines = cfg.Prefill
	sc.PD.OnHandoff = hand.add
	sc.LogStatsInterval, sc.DisableLogRequests = 0, true
	sc.ShutdownTimeout = time.Second
	sc.Logger = slog.New(slog.DiscardHandler)
	pdSrv, err := server.Start(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("bench: starting switchyard with prefill engines: %w", err)
	}
	defer shutdown(pdSrv)
	rep := &PDReport{Config: cfg}
	n, el, err := closedLoop(ctx, cfg, func(ctx context.Context, id string, req *wire.EngineCoreRequest) error {
		return drain(ctx, pdSrv.Dispatcher(), req)
	})
	if err != nil {
		return nil, err
	}
	rep.Requests, rep.RequestsPerSec = n, float64(n)/el.Seconds()
	rep.Handoff = quantilesOf(hand.take())
	rep.Pairs = float64(rep.Handoff.N)

	// The proxy design: the same prefill engines, a plain switchyard for decode.
	dc := sc
	dc.PD = server.PDConfig{}
	decSrv, err := server.Start(ctx, dc)
	if err != nil {
		return nil, fmt.Errorf("bench: starting the decode API's switchyard: %w", err)
	}
	defer shutdown(decSrv)
	var proxyHand samples
	p, err := startProxyDesign(pdSrv.PrefillDispatcher(), decSrv.Dispatcher(), &proxyHand)
	if err != nil {
		return nil, err
	}
	defer p.close()
	n, el, err = closedLoop(ctx, cfg, p.complete)
	if err != nil {
		return nil, err
	}
	rep.ProxyRequests, rep.ProxyReqsPerSec = n, float64(n)/el.Seconds()
	rep.ProxyHandoff = quantilesOf(proxyHand.take())
	return rep, nil
}

func shutdown(s *server.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// closedLoop keeps cfg.Concurrency requests in flight for cfg.Duration.
func closedLoop(ctx context.Context, cfg PDConfig, do func(ctx context.Context, id string, req *wire.EngineCoreRequest) error) (int, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration+30*time.Second)
	defer cancel()
	start := time.Now()
	end := start.Add(cfg.Duration)
	var done atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Concurrency)
	for w := range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(end); i++ {
				id := "pd-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				if err := do(ctx, id, pdRequest(id, cfg, w*1_000_003+i)); err != nil {
					errs <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	return int(done.Load()), time.Since(start), nil
}

func pdRequest(id string, cfg PDConfig, seed int) *wire.EngineCoreRequest {
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens, sp.IgnoreEOS = wire.SomeInt(int64(cfg.OutputTokens)), true
	sp.Normalize()
	prompt := make([]int64, cfg.PromptTokens)
	for i := range prompt {
		prompt[i] = int64(10 + (seed+i)%30000)
	}
	return &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: prompt, Sampling: &sp}
}

// drain submits req and reads its stream to the end.
func drain(ctx context.Context, d *dispatcher.Dispatcher, req *wire.EngineCoreRequest) error {
	s, err := d.Submit(ctx, req)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		out, err := s.Recv(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if out.Finish == wire.FinishError {
			return fmt.Errorf("bench: request %s finished with an error", req.RequestID)
		}
	}
}

// proxyDesign is the two HTTP hops of vLLM's proxies, in Go.
type proxyDesign struct {
	pre, dec     *http.Server
	preURL, dURL string
	client       *http.Client
	hand         *samples
	mu           sync.Mutex
	gotFinal     map[string]time.Time // request id -> the prefill API had its final output
}

type proxyBody struct {
	ID       string         `json:"id"`
	Prompt   []int64        `json:"prompt"`
	Max      int64          `json:"max_tokens"`
	KVParams map[string]any `json:"kv_transfer_params"`
}

func startProxyDesign(pre, dec *dispatcher.Dispatcher, hand *samples) (*proxyDesign, error) {
	p := &proxyDesign{hand: hand, gotFinal: map[string]time.Time{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}}
	// The prefill API server: submit the leg, answer its final output as JSON.
	preMux := http.NewServeMux()
	preMux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var b proxyBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kv, _ := msgpack.Marshal(b.KVParams)
		req := pdRequest(b.ID+"#p", PDConfig{PromptTokens: 1, OutputTokens: 1}, 0)
		req.PromptTokenIDs = b.Prompt
		req.Sampling.ExtraArgs, _ = wire.AppendExtraArgsWith(nil, nil, kv)
		s, err := pre.Submit(r.Context(), req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer s.Close()
		var params map[string]any
		for {
			out, err := s.Recv(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			if out.Finished() {
				p.mu.Lock()
				p.gotFinal[b.ID] = time.Now()
				p.mu.Unlock()
				_ = msgpack.Unmarshal(out.KVTransferParams, &params)
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": b.ID, "object": "text_completion",
			"choices": []any{map[string]any{"index": 0, "text": "", "finish_reason": "length"}}, "kv_transfer_params": params})
	})
	// The decode API server: submit the request with the params; the ADD is out
	// when Submit returns.
	decMux := http.NewServeMux()
	decMux.HandleFunc("/v1/completions", func(w http.ResponseWriter, r *http.Request) {
		var b proxyBody
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kv, _ := msgpack.Marshal(b.KVParams)
		req := pdRequest(b.ID, PDConfig{PromptTokens: 1, OutputTokens: int(b.Max)}, 0)
		req.PromptTokenIDs = b.Prompt
		req.Sampling.ExtraArgs, _ = wire.AppendExtraArgsWith(nil, nil, kv)
		s, err := dec.Submit(r.Context(), req)
		now := time.Now()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer s.Close()
		p.mu.Lock()
		if t, ok := p.gotFinal[b.ID]; ok {
			p.hand.add(now.Sub(t))
			delete(p.gotFinal, b.ID)
		}
		p.mu.Unlock()
		for {
			if _, err := s.Recv(r.Context()); err != nil {
				break
			}
		}
		w.WriteHeader(200)
	})
	var err error
	if p.pre, p.preURL, err = serveHTTP(preMux); err != nil {
		return nil, err
	}
	if p.dec, p.dURL, err = serveHTTP(decMux); err != nil {
		p.pre.Close()
		return nil, err
	}
	return p, nil
}

func serveHTTP(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	s := &http.Server{Handler: h}
	go func() { _ = s.Serve(ln) }()
	return s, "http://" + ln.Addr().String() + "/v1/completions", nil
}

// complete is the proxy: the prefill leg, then the decode request with the
// prefill's kv_transfer_params, as toy_proxy_server.py does.
func (p *proxyDesign) complete(ctx context.Context, id string, req *wire.EngineCoreRequest) error {
	body := proxyBody{ID: id, Prompt: req.PromptTokenIDs, Max: 1, KVParams: map[string]any{
		"do_remote_decode": true, "do_remote_prefill": false, "remote_engine_id": nil,
		"remote_block_ids": nil, "remote_host": nil, "remote_port": nil, "transfer_id": id}}
	var pre struct {
		KVParams map[string]any `json:"kv_transfer_params"`
	}
	if err := p.post(ctx, p.preURL, body, &pre); err != nil {
		return err
	}
	body.Max, body.KVParams = req.Sampling.MaxTokens.Value, pre.KVParams
	return p.post(ctx, p.dURL, body, nil)
}

func (p *proxyDesign) post(ctx context.Context, url string, body proxyBody, into any) error {
	b, _ := json.Marshal(body)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	r.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("bench: proxy design: %s: %d %s", url, resp.StatusCode, msg)
	}
	if into != nil {
		return json.NewDecoder(resp.Body).Decode(into)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return nil
}

func (p *proxyDesign) close() {
	p.pre.Close()
	p.dec.Close()
	p.client.CloseIdleConnections()
}

// WritePD prints the P/D mode's table and closing note.
func WritePD(w io.Writer, r *PDReport) {
	c := r.Config
	fmt.Fprintf(w, "P/D disaggregation: %d prefill + %d decode mock engines (step %v), %d in flight, prompt %d, output %d tokens, %v per phase\n\n",
		c.Prefill, c.Decode, c.StepTime, c.Concurrency, c.PromptTokens, c.OutputTokens, c.Duration)
	fmt.Fprintf(w, "%-34s %8s %10s %10s %10s %10s %9s\n", "handoff (µs)", "n", "p50", "p90", "p99", "max", "req/s")
	row := func(name string, q Quantiles, rps float64) {
		fmt.Fprintf(w, "%-34s %8d %10.1f %10.1f %10.1f %10.1f %9.0f\n", name, q.N, q.P50, q.P90, q.P99, q.Max, rps)
	}
	row("switchyard (in-process pairing)", r.Handoff, r.RequestsPerSec)
	row("proxy design (two HTTP hops, Go)", r.ProxyHandoff, r.ProxyReqsPerSec)
	verdict := "met"
	if r.Handoff.P50 > 20 {
		verdict = "MISSED"
	}
	fmt.Fprintf(w, "\nhandoff overhead per request (prefill's final output -> decode ADD written): p50 %.1f µs (goal <= 20 µs: %s, one run); "+
		"the proxy design's two HTTP hops: p50 %.1f µs (%.0fx)\n", r.Handoff.P50, verdict, r.ProxyHandoff.P50, r.ProxyHandoff.P50/max(r.Handoff.P50, 0.001))
}
