package httpapi

// The HTTP API. Handlers are thin: decode (openai.go), call the dispatcher, encode
// (response.go). The completions handler passes r.Context() to Submit, so a client
// that disconnects has its requests aborted at the engines.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/lora"
	"github.com/switchyard-llm/switchyard/internal/version"
	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
	"github.com/switchyard-llm/switchyard/wire"
)

// RankHeader pins a request to a data-parallel rank, as vLLM's API server does.
const RankHeader = "X-data-parallel-rank"

// API serves the HTTP endpoints. Its fields are set once by NewAPI.
type API struct {
	d        *dispatcher.Dispatcher
	engines  func() []EngineView
	model    apicore.ModelRules
	maxBody  int64
	log      *slog.Logger
	metrics  *httpMetrics
	gatherer prometheus.Gatherer
	now      func() time.Time
	// shutdownReason is non-nil once shutdown began: the reason requests are cut short.
	shutdownReason func() error
	bodyTimeout    time.Duration
	slots          *slots   // choices being served (httpguards.go); nil = no cap
	auth           *apiKeys // nil = no key required
	contextLen     func(rank int) int64
	admin          *adminGuard // who may drain and undrain (admin.go)
	logRequests    bool
	stats          apicore.PromptCounter // nil = no stats line
	tracer         trace.Tracer          // nil = no tracing
	text           *Text                 // nil = token ids only (no --tokenizer)
	servedName     string                // /v1/models' id without a tokenizer
	cors           CORS
	// requestIDHeaders echoes X-Request-Id on every answer (requestid.go).
	requestIDHeaders bool
	poolTasks        taskCache      // the engines' tasks (poolcore.go)
	lora             *lora.Registry // nil: LoRA off (lora.go)
	loraActivity     *lora.Activity
}

// APIConfig configures NewAPI.
type APIConfig struct {
	Dispatcher *dispatcher.Dispatcher
	// Engines lists the engines for /v1/engines and /health.
	Engines func() []EngineView
	// Model is what serve knows of the model (EOS ids, vocabulary, max_logprobs).
	Model apicore.ModelRules
	// MaxBodyBytes caps a request body; 0 = DefaultMaxBodyBytes. A body that
	// declares more (Content-Length) is refused before any of it is read, and so
	// before an "Expect: 100-continue" is answered.
	MaxBodyBytes int64
	// BodyTimeout bounds reading one request body (a chunked body that trickles
	// for ever included); 0 = no bound. A body not read in time is a 408.
	BodyTimeout time.Duration
	// MaxConcurrentRequests caps the choices (engine requests) of the completions
	// requests served at once: a request weighs n times its prompts (each choice
	// holds a stream); beyond it a request is answered 503 with Retry-After at
	// once, and one that weighs more than the cap is a 400. 0 = no cap.
	MaxConcurrentRequests int
	// APIKeys, when non-empty, are the keys a request to /v1/* must present as
	// "Authorization: Bearer KEY" (vLLM's --api-key); /health and /metrics stay open.
	APIKeys []string
	// AdminToken, when set, is the bearer token the admin endpoints
	// (POST /v1/engines/{rank}/drain, .../undrain) require.
	AdminToken string
	// AdminNetworks are the CIDRs or IPs that may call the admin endpoints;
	// empty = loopback only. A non-loopback network requires AdminToken.
	AdminNetworks []string
	// ContextLen returns the registered max_model_len of rank (rank < 0: the
	// largest among ready engines), 0 when unknown. nil = unknown.
	ContextLen func(rank int) int64
	Logger     *slog.Logger
	// LogRequests logs one line per request at info level (accesslog.go): method,
	// path, status, duration and, for completions, request id, tokens and rank.
	LogRequests bool
	// Stats counts submitted prompt tokens for the stats line; nil = off.
	Stats apicore.PromptCounter
	// Text is the model's tokenizer and chat template (serve --tokenizer); nil =
	// token ids only, and text requests are refused with a 400 saying why.
	Text *Text
	// ServedModelName is /v1/models' id without Text (with it, Text.Name).
	ServedModelName string
	// TracerProvider, when set, traces every completions request (tracing.go).
	TracerProvider trace.TracerProvider
	Registerer     prometheus.Registerer
	Gatherer       prometheus.Gatherer // served on /metrics; nil = 404
	// ShutdownReason, when it returns non-nil, is the reason given to requests that
	// are refused or cut short because switchyard is shutting down.
	ShutdownReason func() error
	Now            func() time.Time
	// CORS is answered on every path (cors.go); the zero value is vLLM's default.
	CORS CORS
	// RequestIDHeaders sets X-Request-Id on every answer: the client's, else a
	// random one (vLLM's --enable-request-id-headers).
	RequestIDHeaders bool
	// LoRA, when set, serves its adapters as models and the load and unload
	// endpoints (serve --enable-lora); LoRAActivity learns where requests for
	// each adapter went, for the router.
	LoRA         *lora.Registry
	LoRAActivity *lora.Activity
}

// NewAPI builds the handlers.
func NewAPI(cfg APIConfig) *API {
	a := &API{
		d: cfg.Dispatcher, engines: cfg.Engines, model: cfg.Model, maxBody: cfg.MaxBodyBytes,
		log: cfg.Logger, gatherer: cfg.Gatherer, now: cfg.Now, shutdownReason: cfg.ShutdownReason,
	}
	if a.maxBody <= 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	a.bodyTimeout = cfg.BodyTimeout
	if cfg.MaxConcurrentRequests > 0 {
		a.slots = newSlots(cfg.MaxConcurrentRequests)
	}
	if len(cfg.APIKeys) > 0 {
		a.auth = newAPIKeys(cfg.APIKeys)
	}
	a.contextLen = cfg.ContextLen
	a.text = cfg.Text
	a.servedName = cfg.ServedModelName
	a.cors = cfg.CORS
	a.requestIDHeaders = cfg.RequestIDHeaders
	a.lora, a.loraActivity = cfg.LoRA, cfg.LoRAActivity
	a.stats = cfg.Stats
	if cfg.TracerProvider != nil {
		a.tracer = cfg.TracerProvider.Tracer(apicore.TracerName)
	}
	var err error
	if a.admin, err = newAdminGuard(cfg.AdminToken, cfg.AdminNetworks); err != nil && a.log != nil {
		// Config.Validate refuses this before; a guard that parsed nothing admits nobody.
		a.log.Error("admin endpoints closed", "err", err)
	}
	if a.contextLen == nil {
		a.contextLen = func(int) int64 { return 0 }
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	// A line its logger discards would still cost the record and the request's
	// copy for its context, on every request.
	a.logRequests = cfg.LogRequests && a.log.Enabled(context.Background(), slog.LevelInfo)
	if a.now == nil {
		a.now = time.Now
	}
	if a.shutdownReason == nil {
		a.shutdownReason = func() error { return nil }
	}
	a.metrics = newHTTPMetrics(cfg.Registerer, a.slots)
	return a
}

// routes are the API's paths and the one method each answers; another method is a
// 405 naming it (Go's mux would answer the catch-all's 404).
var routes = map[string]string{
	"/v1/completions":      http.MethodPost,
	"/v1/chat/completions": http.MethodPost,
	"/v1/models":           http.MethodGet,
	"/tokenize":            http.MethodPost,
	"/detokenize":          http.MethodPost,
	"/v1/engines":          http.MethodGet,
	"/health":              http.MethodGet,
	"/ping":                pingRoute,
	"/version":             http.MethodGet,
	"/metrics":             http.MethodGet,
	"/v1/embeddings":       http.MethodPost,
	"/pooling":             http.MethodPost,
	"/classify":            http.MethodPost,
	"/score":               http.MethodPost,
	"/v1/score":            http.MethodPost,
	"/rerank":              http.MethodPost,
	"/v1/rerank":           http.MethodPost,
	"/v2/rerank":           http.MethodPost,
}

// Handler returns the mux: /v1/completions, /v1/engines, /health, /metrics, with
// the API key (if any) required on /v1/*.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/completions", a.metrics.wrap("completions", http.HandlerFunc(a.completions)))
	mux.Handle("POST /v1/chat/completions", a.metrics.wrap("chat_completions", http.HandlerFunc(a.chatCompletions)))
	mux.Handle("GET /v1/models", a.metrics.wrap("models", http.HandlerFunc(a.listModels)))
	mux.Handle("POST /tokenize", a.metrics.wrap("tokenize", http.HandlerFunc(a.tokenize)))
	mux.Handle("POST /detokenize", a.metrics.wrap("detokenize", http.HandlerFunc(a.detokenize)))
	mux.Handle("POST /v1/embeddings", a.metrics.wrap("embeddings", http.HandlerFunc(a.embeddings)))
	mux.Handle("POST /pooling", a.metrics.wrap("pooling", http.HandlerFunc(a.poolingAPI)))
	mux.Handle("POST /classify", a.metrics.wrap("classify", http.HandlerFunc(a.classifyAPI)))
	for _, p := range []string{"/score", "/v1/score"} {
		mux.Handle("POST "+p, a.metrics.wrap("score", http.HandlerFunc(a.scoreAPI)))
	}
	for _, p := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		mux.Handle("POST "+p, a.metrics.wrap("rerank", http.HandlerFunc(a.rerankAPI)))
	}
	mux.Handle("GET /v1/engines", a.metrics.wrap("engines", http.HandlerFunc(a.listEngines)))
	mux.Handle("GET /health", a.metrics.wrap("health", http.HandlerFunc(a.health)))
	mux.Handle("GET /ping", a.metrics.wrap("ping", http.HandlerFunc(a.ping)))
	mux.Handle("POST /ping", a.metrics.wrap("ping", http.HandlerFunc(a.ping)))
	mux.Handle("GET /version", a.metrics.wrap("version", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, version.Get())
	})))
	mux.Handle("POST /v1/engines/{rank}/drain", a.metrics.wrap("admin", a.admin.wrap(a.drain(true))))
	mux.Handle("POST /v1/engines/{rank}/undrain", a.metrics.wrap("admin", a.admin.wrap(a.drain(false))))
	a.handleLoRA(mux)
	if a.gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(a.gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if m, ok := routes[r.URL.Path]; ok && (r.URL.Path != "/metrics" || a.gatherer != nil) {
			w.Header().Set("Allow", m)
			writeError(w, &APIError{Status: http.StatusMethodNotAllowed, Type: TypeMethodNotAllowed,
				Message: fmt.Sprintf("method %s is not allowed on %s; use %s", r.Method, r.URL.Path, m)})
			return
		}
		writeError(w, &APIError{Status: http.StatusNotFound, Type: TypeNotFound, Message: fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)})
	})
	var h http.Handler = mux
	if a.auth != nil {
		h = a.auth.wrap(mux)
	}
	h = newCORS(a.cors, h) // outside the key check: a browser's preflight carries no key
	if a.requestIDHeaders {
		h = echoRequestID(h)
	}
	if a.logRequests {
		h = accessLog(a.log, h)
	}
	return h
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // vLLM's messages say "50 > 8192 - 8190", not "\u003e"
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *APIError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, e.body())
}

// health is 200 when at least one engine is ready, else 503; a broken lockstep
// group is a 503 naming the dead rank whatever else is connected, and so is a
// switchyard shutting down.
func (a *API) health(w http.ResponseWriter, _ *http.Request) {
	if a.shuttingDown(w) {
		return
	}
	if g, ok := a.d.Group(); ok && g.Broken {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "ready_engines": 0,
			"reason": g.Cause, "group_broken": true, "dead_rank": g.DeadRank})
		return
	}
	ready := 0
	for _, e := range a.engines() {
		if e.Ready {
			ready++
		}
	}
	if ready == 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "ready_engines": 0})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "ready_engines": ready})
}

func (a *API) listEngines(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"engines": a.engines()})
}

// newID returns "cmpl-" and 32 random hex digits: the user-visible id, and the stem
// of the engine request ids, which must be unique among live requests.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "cmpl-" + hex.EncodeToString(b[:])
}

// parseCompletion reads, decodes and validates one body; the result is ready to send.
// The body is decoded as it is read (readCompletion), within MaxBodyBytes and
// BodyTimeout; a body refused before its end closes the connection, so its rest is
// never read.
func (a *API) parseCompletion(w http.ResponseWriter, r *http.Request) (*CompletionRequest, [][]int64, Translate, *APIError) {
	var t Translate
	if r.ContentLength > a.maxBody {
		// Refused before reading: net/http sends "100 Continue" only once the body
		// is read, so an absurd Content-Length with Expect: 100-continue gets this.
		w.Header().Set("Connection", "close")
		return nil, nil, t, tooLarge(a.maxBody)
	}
	rc := http.NewResponseController(w)
	if a.bodyTimeout > 0 {
		// The wall clock, not a.now: a deadline is for the kernel, and tests pin now.
		_ = rc.SetReadDeadline(time.Now().Add(a.bodyTimeout))
	}
	// A prompt longer than every engine's context cannot be served: the read stops
	// there (one exactly as long is read, for the dispatcher's precise refusal).
	limit := apicore.MaxPromptTokens
	if n := a.contextLen(-1); n > 0 && n < int64(limit) {
		limit = int(n)
	}
	req, err := readCompletion(http.MaxBytesReader(w, r.Body, a.maxBody), limit)
	if err != nil {
		w.Header().Set("Connection", "close") // the rest of the body is not read
		return nil, nil, t, a.bodyError(err)
	}
	if a.bodyTimeout > 0 {
		_ = rc.SetReadDeadline(time.Time{}) // a stream lasts as long as its request
	}
	var prompts [][]int64
	text := a.textFor(req)
	if !text {
		if err := req.Validate(); err != nil {
			return nil, nil, t, err.(*APIError)
		}
		if prompts, err = req.Prompts(); err != nil {
			return nil, nil, t, err.(*APIError)
		}
	} else {
		var apiErr *APIError
		if prompts, apiErr = a.textPrompts(req); apiErr != nil {
			return nil, nil, t, apiErr
		}
	}
	if len(prompts)*int(req.Choices()) > MaxChoices {
		return nil, nil, t, badRequest("n", "n times the number of prompts is %d, more than the limit of %d", len(prompts)*int(req.Choices()), MaxChoices)
	}
	if h := strings.TrimSpace(r.Header.Get(RankHeader)); h != "" {
		rank, err := strconv.ParseInt(h, 10, 32)
		if err != nil || rank < 0 {
			return nil, nil, t, badRequest(RankHeader, "%s must be a non-negative integer, got %q", RankHeader, h)
		}
		t.Rank = wire.SomeInt(rank)
	}
	t.BaseID = newID()
	if req.RequestID != "" {
		// vLLM lets the client choose the visible id; the engine ids stay ours, so
		// two clients choosing the same id cannot collide at an engine.
		t.BaseID = req.RequestID + "-" + t.BaseID[len("cmpl-"):]
	}
	var apiErr *APIError
	if t.ID, apiErr = headerRequestID(r, "cmpl-"); apiErr != nil {
		return nil, nil, t, apiErr
	}
	t.Model = a.model
	t.Text = text
	if t.LoRA, apiErr = a.loraFor(req.Model); apiErr != nil {
		return nil, nil, t, apiErr
	}
	if text && len(a.text.EOSTokenIDs) > 0 {
		t.Model.EOSTokenIDs = a.text.EOSTokenIDs
	}
	now := a.now()
	t.ArrivalTime = float64(now.UnixNano()) / 1e9
	return req, prompts, t, nil
}

// completions serves POST /v1/completions.
func (a *API) completions(w http.ResponseWriter, r *http.Request) {
	release, ok := a.admit(w)
	if !ok {
		return
	}
	defer release()
	req, prompts, t, apiErr := a.parseCompletion(w, r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	a.serve(w, r, req, prompts, t, nil)
}

// serve sends a parsed request's engine requests and answers with their outputs:
// tokens as they are without a tokenizer, text (completions or, with chat set, chat
// completions) with one.
func (a *API) serve(w http.ResponseWriter, r *http.Request, req *CompletionRequest, prompts [][]int64, t Translate, chat *ChatRequest) {
	// The span's parent is the client's traceparent; its context goes to the
	// engines in trace_headers (tracing.go).
	traceCtx, span := apicore.StartRequestSpan(a.tracer, r, t.visibleID())
	var c *completion
	if span != nil {
		defer func() {
			status := http.StatusOK
			if sw, ok := w.(*statusWriter); ok {
				status = sw.code
			}
			var tokens int
			var finish []string
			if c != nil {
				tokens = c.usage.CompletionTokens
				for _, ch := range c.choices {
					if ch.FinishReason != nil {
						finish = append(finish, *ch.FinishReason)
					}
				}
			}
			var err error
			if status >= 400 {
				err = fmt.Errorf("HTTP %d", status)
			}
			span.End(tokens, finish, status, err)
		}()
	}
	// The request holds one slot since admission; its other choices take theirs.
	more, ok := a.admitChoices(w, httpClientKey(r), len(prompts)*int(req.Choices()), 1)
	if !ok {
		return
	}
	defer more()
	ereqs, err := req.EngineRequests(prompts, t)
	if err != nil {
		writeError(w, err.(*APIError))
		return
	}
	if span != nil {
		headers := apicore.TraceHeaders(traceCtx)
		for _, er := range ereqs {
			er.TraceHeaders = headers
		}
		span.Request(ereqs)
	}
	if apiErr := a.checkContext(req, ereqs); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	for _, er := range ereqs {
		// Our own checks should have caught everything; this is the engine's rule
		// book, and a value it rejects would kill its input thread. Then the
		// model's: vocabulary and logprobs bounds.
		if err := er.Validate(); err != nil {
			writeError(w, a.submitError(err))
			return
		}
		if err := a.model.Check(er); err != nil {
			writeError(w, a.submitError(err))
			return
		}
	}
	// The streams' context is the client's: a client that disconnects aborts them.
	// It names the client (its remote host) for the fair share of a full engine
	// queue, so one host's burst waits behind itself.
	// Every wait below returns when ctx ends, and the deferred Close then aborts
	// what is live: the dispatcher need not watch ctx too (WithCallerAborts).
	ctx := dispatcher.WithCallerAborts(dispatcher.WithClient(r.Context(), httpClientKey(r)))
	streams := make([]*dispatcher.Stream, 0, len(ereqs))
	defer func() {
		for _, s := range streams {
			s.Close() // no-op for finished requests; aborts the rest on early return
		}
	}()
	// Each prompt's n choices are one client request for the vllm:* series
	// (its n, its longest choice), recorded when its last choice finishes.
	n := int(req.Choices())
	var parent *vllmmetrics.Parent
	for i, er := range ereqs {
		if i%n == 0 {
			parent = vllmmetrics.NewParent(n)
		}
		s, err := a.d.Submit(dispatcher.WithParent(ctx, parent), er)
		if err != nil {
			writeError(w, a.submitError(err))
			return
		}
		streams = append(streams, s)
		a.loraSent(s.Rank(), er.LoRA)
		if a.stats != nil {
			a.stats.AddPrompt(s.Rank(), len(er.PromptTokenIDs))
		}
	}
	if len(streams) > 0 {
		w.Header().Set(RankHeader, strconv.Itoa(streams[0].Rank()))
		span.Dispatched(streams[0].Rank())
	}
	c = newCompletion(t.visibleID(), a.responseModel(req.Model), a.now().Unix(), prompts, int(req.Choices()))
	if ai := accessOf(r.Context()); ai != nil {
		ai.id = t.visibleID()
		if len(streams) > 0 {
			ai.rank = streams[0].Rank()
		}
		defer func() { ai.promptTokens, ai.completionTokens = c.usage.PromptTokens, c.usage.CompletionTokens }()
	}
	events := newFanIn(ctx, streams)
	if t.Text {
		run := newTextRun(a.text, req, chat, t.visibleID(), a.responseModel(req.Model), c.created, prompts)
		a.serveText(ctx, w, r, run, streams, events, span)
		run.into(c)
		return
	}
	if req.Stream {
		a.stream(w, r, c, events, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, span)
		return
	}
	for _, s := range streams {
		// The answer is written once, at the finish: the handler is woken by the
		// final output, not per step (unread outputs merge in the stream).
		s.Collect()
	}
	for !c.done() {
		ev, err := events.next(ctx)
		if err != nil {
			return // the client left; the deferred Close aborts what is live
		}
		switch {
		case ev.err != nil:
			writeError(w, a.failure(ev.err))
			return
		case ev.out.Finished() || len(ev.out.TokenIDs) > 0:
			if len(ev.out.TokenIDs) > 0 {
				span.FirstToken()
			}
			c.add(ev.choice, toWire(&ev.out))
		}
	}
	writeCompletion(w, c)
}
