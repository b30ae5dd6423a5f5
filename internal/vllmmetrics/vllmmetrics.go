// Package vllmmetrics exports the vllm:* Prometheus series a vLLM API server exports
// (vllm/v1/metrics/loggers.py), computed from what engines report the way vLLM's
// frontend computes them (vllm/v1/metrics/stats.py), so vLLM's dashboards and alerts
// work unchanged against switchyard. Series carry vLLM's labels: model_name and
// engine (the data-parallel rank).
//
// The dispatcher keeps one Request per live request (a plain value inside its own
// request state) and calls Engine's methods under that request's lock; nothing here
// allocates on the output path.
package vllmmetrics

import (
	"github.com/switchyard-llm/switchyard/internal/fasthist"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/wire"
)

// Bucket boundaries as vLLM's PrometheusStatLogger uses them.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	requestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0,
		20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// Buckets125 is vLLM's build_1_2_5_buckets: 1, 2, 5, 10, 20, 50, ... up to max.
func Buckets125(max int64) []float64 {
	var b []float64
	for e := int64(1); ; e *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*e > max {
				return b
			}
			b = append(b, float64(m*e))
		}
	}
}

// Finish reasons as vLLM's FinishReason.__str__ spells them (finished_reason label).
var finishNames = [...]string{wire.FinishStop: "stop", wire.FinishLength: "length",
	wire.FinishAbort: "abort", wire.FinishError: "error", wire.FinishRepetition: "repetition"}

// Metrics holds the vllm:* collectors of one model. Nil is valid and exports nothing.
type Metrics struct {
	model string

	running, waiting, kvUsage, gpuUsage, cacheInfo *prometheus.GaugeVec
	promptTokens, genTokens, preemptions           *prometheus.CounterVec
	prefixQueries, prefixHits, success             *prometheus.CounterVec
	ttft, itl, tpotReq                             *histVec
	e2e, queue, prefill, decode, inference         *histVec
	promptLen, genLen, maxTokens, maxGen           *histVec
	paramsN                                        *histVec
}

// New registers the vllm:* series for model on reg. maxModelLen bounds the token-count
// histograms' buckets as vLLM's max_model_len does (0: 1e6).
func New(reg prometheus.Registerer, model string, maxModelLen int64) (*Metrics, error) {
	if maxModelLen <= 0 {
		maxModelLen = 1_000_000
	}
	l := []string{"model_name", "engine"}
	g := func(name, help string, extra ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "vllm:" + name, Help: help}, append(l[:2:2], extra...))
	}
	c := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:" + name, Help: help}, append(l[:2:2], extra...))
	}
	h := func(name, help string, b []float64) *histVec { return newHistVec("vllm:"+name, help, b) }
	tok := Buckets125(maxModelLen)
	m := &Metrics{
		model:         model,
		running:       g("num_requests_running", "Number of requests in model execution batches."),
		waiting:       g("num_requests_waiting", "Number of requests waiting to be processed."),
		kvUsage:       g("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
		gpuUsage:      g("gpu_cache_usage_perc", "GPU KV-cache usage. 1 means 100 percent usage. (Deprecated name of kv_cache_usage_perc, kept for dashboards.)"),
		cacheInfo:     g("cache_config_info", "Information of the LLMEngine CacheConfig.", "num_gpu_blocks"),
		promptTokens:  c("prompt_tokens_total", "Number of prefill tokens processed."),
		genTokens:     c("generation_tokens_total", "Number of generation tokens processed."),
		preemptions:   c("num_preemptions_total", "Cumulative number of preemption from the engine."),
		prefixQueries: c("prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."),
		prefixHits:    c("prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."),
		success:       c("request_success_total", "Count of successfully processed requests.", "finished_reason"),
		ttft:          h("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets),
		// vLLM's deprecated time_per_output_token_seconds is this by its old name,
		// which its dashboard still queries: observed once, exported twice.
		itl: h("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets).
			alsoAs("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds. (Deprecated name of inter_token_latency_seconds, kept for dashboards.)"),
		tpotReq:   h("request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets),
		e2e:       h("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets),
		queue:     h("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets),
		prefill:   h("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets),
		decode:    h("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets),
		inference: h("request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets),
		promptLen: h("request_prompt_tokens", "Number of prefill tokens processed.", tok),
		genLen:    h("request_generation_tokens", "Number of generation tokens processed.", tok),
		maxTokens: h("request_params_max_tokens", "Histogram of the max_tokens request parameter.", tok),
		maxGen:    h("request_max_num_generation_tokens", "Histogram of maximum number of requested generation tokens.", tok),
		paramsN:   h("request_params_n", "Histogram of the n request parameter.", []float64{1, 2, 5, 10, 20}),
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.running, m.waiting, m.kvUsage, m.gpuUsage, m.cacheInfo,
			m.promptTokens, m.genTokens, m.preemptions, m.prefixQueries, m.prefixHits, m.success,
			m.ttft, m.itl, m.tpotReq, m.e2e, m.queue, m.prefill, m.decode, m.inference,
			m.promptLen, m.genLen, m.maxTokens, m.maxGen, m.paramsN} {
			if err := reg.Register(col); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Engine is one rank's resolved children: looked up once, when the rank comes up.
// A nil *Engine is valid and records nothing.
type Engine struct {
	running, waiting, kvUsage, gpuUsage    prometheus.Gauge
	promptTokens, genTokens, preemptions   prometheus.Counter
	prefixQueries, prefixHits              prometheus.Counter
	success                                [len(finishNames)]prometheus.Counter
	ttft, itl, tpotReq                     *fasthist.Hist
	e2e, queue, prefill, decode, inference *fasthist.Hist
	promptLen, genLen, maxTokens, maxGen   *fasthist.Hist
	paramsN                                *fasthist.Hist
}

// Engine returns rank's children; numGPUBlocks (0: unknown) labels cache_config_info.
func (m *Metrics) Engine(rank int, numGPUBlocks int64) *Engine {
	if m == nil {
		return nil
	}
	r := strconv.Itoa(rank)
	lv := []string{m.model, r}
	e := &Engine{
		running: m.running.WithLabelValues(lv...), waiting: m.waiting.WithLabelValues(lv...),
		kvUsage: m.kvUsage.WithLabelValues(lv...), gpuUsage: m.gpuUsage.WithLabelValues(lv...),
		promptTokens: m.promptTokens.WithLabelValues(lv...), genTokens: m.genTokens.WithLabelValues(lv...),
		preemptions: m.preemptions.WithLabelValues(lv...), prefixQueries: m.prefixQueries.WithLabelValues(lv...),
		prefixHits: m.prefixHits.WithLabelValues(lv...),
		ttft:       m.ttft.with(m.model, r), itl: m.itl.with(m.model, r), tpotReq: m.tpotReq.with(m.model, r),
		e2e: m.e2e.with(m.model, r), queue: m.queue.with(m.model, r), prefill: m.prefill.with(m.model, r),
		decode: m.decode.with(m.model, r), inference: m.inference.with(m.model, r),
		promptLen: m.promptLen.with(m.model, r), genLen: m.genLen.with(m.model, r),
		maxTokens: m.maxTokens.with(m.model, r), maxGen: m.maxGen.with(m.model, r),
		paramsN: m.paramsN.with(m.model, r),
	}
	for i, n := range finishNames {
		e.success[i] = m.success.WithLabelValues(m.model, r, n)
	}
	blocks := ""
	if numGPUBlocks > 0 {
		blocks = strconv.FormatInt(numGPUBlocks, 10)
	}
	m.cacheInfo.WithLabelValues(m.model, r, blocks).Set(1)
	return e
}

// Scheduler records one SchedulerStats of the engine (the gauges).
func (e *Engine) Scheduler(st *wire.SchedulerStats) {
	if e == nil || st == nil {
		return
	}
	e.running.Set(float64(st.NumRunningReqs))
	e.waiting.Set(float64(st.NumWaitingReqs))
	e.kvUsage.Set(st.KVCacheUsage)
	e.gpuUsage.Set(st.KVCacheUsage)
}

// Request is one request's timing state, as vLLM's RequestStateStats: frontend times
// for TTFT, ITL and e2e; engine timestamps (the engine's monotonic clock) for the
// queue, prefill, decode and inference intervals.
type Request struct {
	arrival, lastTok      time.Time
	promptLen, maxTokens  int32 // int32 (Start clamps): the dispatcher's request must stay in its size class
	numGen                int64
	queuedTS, scheduledTS float64
	firstTokTS, lastTokTS float64
	moved                 bool    // engine timestamps came from two engines' clocks
	pooled                bool    // a pooling request: its one output ends the prefill
	parent                *Parent // the client request r is one choice of; nil = its own
}

// Parent is a client request the frontend fanned out into n engine requests
// (vLLM's ParentRequest): vllm:request_max_num_generation_tokens and
// vllm:request_params_n are recorded once for it, when its last choice
// finishes, with the most tokens any choice generated and its n. Its choices
// may finish on several engines at once.
type Parent struct {
	n      int64
	left   atomic.Int64
	maxGen atomic.Int64
}

// NewParent is a client request of n choices.
func NewParent(n int) *Parent {
	p := &Parent{n: int64(n)}
	p.left.Store(int64(n))
	return p
}

// clamp32 bounds a token count to int32: prompts are far shorter, and a larger
// max_tokens lands in the same (+Inf) bucket.
func clamp32(v int64) int32 { return int32(min(max(v, 0), math.MaxInt32)) }

// SetParent makes r one choice of p (nil: a request of its own).
func (r *Request) SetParent(p *Parent) { r.parent = p }

// finishChoice records one finished choice of p with numGen tokens; the last
// one records p.
func (e *Engine) finishChoice(p *Parent, numGen int64) {
	for cur := p.maxGen.Load(); numGen > cur && !p.maxGen.CompareAndSwap(cur, numGen); cur = p.maxGen.Load() {
	}
	if p.left.Add(-1) == 0 {
		e.maxGen.Observe(float64(p.maxGen.Load()))
		e.paramsN.Observe(float64(p.n))
	}
}

// Start begins r's state at its arrival with its prompt length and max_tokens.
func (r *Request) Start(arrival time.Time, promptLen, maxTokens int64) {
	*r = Request{arrival: arrival, promptLen: clamp32(promptLen), maxTokens: clamp32(maxTokens)}
}

// Moved notes that r moved to another engine (the dispatcher's migration): its
// engine timestamps are from two clocks, so the queue, prefill, decode and inference
// intervals are not recorded for it; the frontend-clock series still are.
func (r *Request) Moved() { r.moved = true }

// Output records one output of r from e at frontend time now; engineTS is the
// EngineCoreOutputs timestamp of the step.
func (e *Engine) Output(r *Request, o *wire.EngineCoreOutput, now time.Time, engineTS float64) {
	if e == nil {
		return
	}
	for _, ev := range o.Events {
		switch ev.Type {
		case wire.EventQueued:
			r.queuedTS = ev.Timestamp
		case wire.EventScheduled:
			if r.scheduledTS == 0 { // the first scheduling, as vLLM
				r.scheduledTS = ev.Timestamp
			}
		case wire.EventPreempted:
			e.preemptions.Inc()
		}
	}
	n := int64(len(o.NewTokenIDs))
	// A pooling request's output carries no token but ends its prefill: vLLM
	// counts its prompt tokens and TTFT from it as from a first token.
	first := r.numGen == 0 && !r.pooled
	if n == 0 && (o.PoolingOutput == nil || !first) {
		return
	}
	r.pooled = r.pooled || o.PoolingOutput != nil
	if first {
		// The first tokens: the prompt was prefilled in this step.
		ttft := now.Sub(r.arrival).Seconds()
		e.ttft.Observe(ttft)
		e.promptTokens.Add(float64(r.promptLen))
		cached := o.NumCachedTokens
		if o.PrefillStats != nil {
			cached = o.PrefillStats.NumCachedTokens
		}
		e.prefixQueries.Add(float64(r.promptLen))
		if cached > 0 {
			e.prefixHits.Add(float64(cached))
		}
		r.firstTokTS = engineTS
	} else {
		itl := now.Sub(r.lastTok).Seconds()
		e.itl.Observe(itl) // exported as time_per_output_token_seconds too (alias)
	}
	r.numGen += n
	r.lastTok = now
	r.lastTokTS = engineTS
}

// Generated counts n generated tokens (vllm:generation_tokens_total): the
// dispatcher adds a whole engine step's at once, which is cheaper than per output.
func (e *Engine) Generated(n int) {
	if e != nil && n > 0 {
		e.genTokens.Add(float64(n))
	}
}

// Finish records r's end with finish reason f (a normal end: an output carried it).
func (e *Engine) Finish(r *Request, f wire.FinishReason, now time.Time) {
	if e == nil {
		return
	}
	if int(f) >= 0 && int(f) < len(e.success) {
		e.success[f].Inc()
	}
	e.e2e.Observe(now.Sub(r.arrival).Seconds())
	e.promptLen.Observe(float64(r.promptLen))
	e.genLen.Observe(float64(r.numGen))
	if r.maxTokens > 0 {
		e.maxTokens.Observe(float64(r.maxTokens))
	}
	if r.parent != nil {
		e.finishChoice(r.parent, r.numGen)
	} else {
		// A request of its own (the client protocol's: clients fan out
		// themselves): one sequence, n = 1, as vLLM records a request without a
		// parent.
		e.maxGen.Observe(float64(r.numGen))
		e.paramsN.Observe(1)
	}
	if r.moved {
		return
	}
	if r.queuedTS > 0 && r.scheduledTS >= r.queuedTS {
		e.queue.Observe(r.scheduledTS - r.queuedTS)
	}
	if r.scheduledTS > 0 && r.firstTokTS >= r.scheduledTS {
		e.prefill.Observe(r.firstTokTS - r.scheduledTS)
		e.inference.Observe(r.lastTokTS - r.scheduledTS)
	}
	if r.numGen > 0 || r.pooled {
		decode := r.lastTokTS - r.firstTokTS
		e.decode.Observe(decode)
		if r.numGen > 1 {
			e.tpotReq.Observe(decode / float64(r.numGen-1))
		}
	}
}
