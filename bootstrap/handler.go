package bootstrap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxBody caps a /register body; a real one is about 150 bytes.
const maxBody = 64 << 10

func (s *Server) routes(metricsHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	// The vLLM wire API, at the root: the client builds
	// http://host:port/register and cannot add a prefix.
	mux.HandleFunc("POST /register", s.handleRegister)
	mux.HandleFunc("GET /query", s.handleQuery)
	// A per-engine view: remote_bootstrap_addr = http://host:port/e/<id>
	// gives a decode exactly that engine.
	mux.HandleFunc("GET /e/{engine_id}/query", s.handleQueryEngine)

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("GET /v2/engines", s.adminRead(s.handleEngines))
	mux.Handle("GET /v2/engines/{engine_id}", s.adminRead(s.handleEngine))
	mux.Handle("GET /v2/generations", s.adminRead(s.handleGenerations))
	mux.Handle("DELETE /v2/engines/{engine_id}", s.admin(s.handleDelete))
	mux.Handle("DELETE /v2/engines/{engine_id}/workers/{tp}/{pp}", s.admin(s.handleDeleteWorker))
	mux.Handle("POST /v2/engines/{engine_id}/drain", s.admin(s.handleDrain(true)))
	mux.Handle("POST /v2/engines/{engine_id}/undrain", s.admin(s.handleDrain(false)))
	if metricsHandler != nil {
		mux.Handle("GET /metrics", metricsHandler)
	}
	// FastAPI answers unknown paths and wrong methods with JSON; so do we.
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if m == r.Method {
				continue
			}
			alt := r.Clone(r.Context())
			alt.Method = m
			if _, pat := mux.Handler(alt); pat != "/" {
				writeJSON(w, http.StatusMethodNotAllowed, errorBody{Detail: "Method Not Allowed"})
				return
			}
		}
		writeJSON(w, http.StatusNotFound, errorBody{Detail: "Not Found"})
	})
	return normalizePath(mux)
}

// normalizePath collapses repeated slashes and drops a trailing one, so a
// router that passes "http://host:port/" as base URL ("//query") or a
// client asking for "/query/" is served directly: ServeMux would answer
// with a redirect that httpx does not follow by default.
func normalizePath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if strings.Contains(p, "//") || (len(p) > 1 && strings.HasSuffix(p, "/")) {
			for strings.Contains(p, "//") {
				p = strings.ReplaceAll(p, "//", "/")
			}
			if len(p) > 1 {
				p = strings.TrimSuffix(p, "/")
			}
			r2 := r.Clone(r.Context())
			r2.URL.Path, r2.URL.RawPath = p, ""
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		s.metrics.registrations.WithLabelValues("invalid").Inc()
		writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{Detail: "Request body too large"})
		return
	}
	reg, issues := decodeRegistration(body)
	if len(issues) > 0 {
		s.metrics.registrations.WithLabelValues("invalid").Inc()
		s.log.Warn("malformed /register body", "remote", r.RemoteAddr, "issues", len(issues), "first", issues[0].Msg)
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": issues})
		return
	}
	reg.Source = remoteIP(r)
	// The vLLM client may time out and retry, but a started registration
	// runs to completion, as in vLLM's own server; a cancelled request
	// context must not make a live holder look dead.
	out, err := s.register(context.WithoutCancel(r.Context()), reg)
	var (
		ce  *ConflictError
		te  *TopologyError
		le  *LimitError
		inv *InvalidError
	)
	switch {
	case err == nil:
		s.metrics.registrations.WithLabelValues(out.Result.String()).Inc()
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case errors.As(err, &ce):
		s.metrics.registrations.WithLabelValues(conflictResult(ce.Kind)).Inc()
		msg := "registration refused: holder is alive"
		if ce.Unconfirmed {
			msg = "registration refused: holder changed concurrently and could not be probed in time"
		}
		s.log.Warn(msg, "detail", ce.Detail(), "hint", ce.Hint(),
			"engine_id", reg.EngineID, "dp_rank", reg.DP, "tp_rank", reg.TP, "pp_rank", reg.PP, "addr", reg.Addr, "source", reg.Source)
		writeJSON(w, http.StatusBadRequest, errorBody{Detail: ce.Detail(), Hint: ce.Hint()})
	case errors.As(err, &te):
		s.metrics.registrations.WithLabelValues("topology").Inc()
		s.log.Warn("registration refused: topology", "detail", te.Detail(), "engine_id", reg.EngineID, "dp_rank", reg.DP)
		writeJSON(w, http.StatusBadRequest, errorBody{Detail: te.Detail()})
	case errors.As(err, &le):
		s.metrics.registrations.WithLabelValues("limit").Inc()
		s.log.Warn("registration refused: limit", "detail", le.Detail(), "engine_id", truncate(reg.EngineID), "dp_rank", reg.DP, "source", reg.Source)
		writeJSON(w, http.StatusBadRequest, errorBody{Detail: le.Detail()})
	case errors.As(err, &inv):
		s.metrics.registrations.WithLabelValues("invalid").Inc()
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": []validationIssue{{
			Type: inv.Type, Loc: locOf(inv.Field), Msg: inv.Msg, Input: rawOrNull(body),
		}}})
	default:
		s.log.Error("registration failed", "err", err)
		writeJSON(w, http.StatusInternalServerError, errorBody{Detail: "Internal Server Error"})
	}
}

// maxConflictRounds bounds how often one registration re-probes a holder
// that changed under it (concurrent registrations for one dp rank).
const maxConflictRounds = 4

// register applies a registration. A conflict is decided now, because the
// vLLM client treats any 400 as fatal and never retries it: the holder is
// probed (bounded by ConflictProbeBudget, far inside the client's 30 s
// timeout), and the registration retried with what the probe found.
// Concurrent registrations for one dp rank can change the holder between the
// probe and the retry; the new holder is then probed too, within the same
// budget, so a refusal always rests on a probe of the holder it names (or
// says plainly that none could be made in time).
func (s *Server) register(ctx context.Context, reg Registration) (Outcome, error) {
	var out Outcome
	err := s.change(ctx, func(now time.Time) error {
		var err error
		out, err = s.reg.Register(now, reg)
		return err
	})
	var ce *ConflictError
	if !errors.As(err, &ce) {
		return s.registered(reg, out, err)
	}
	bctx, cancel := context.WithTimeout(ctx, s.cfg.ConflictProbeBudget)
	defer cancel()
	alive := make(map[ProbeTarget]bool) // answered a probe made for this request
	for round := 0; round < maxConflictRounds && errors.As(err, &ce); round++ {
		var todo []ProbeTarget
		for _, t := range ce.Probe {
			if _, seen := alive[t]; !seen {
				todo = append(todo, t)
			}
		}
		if len(todo) == 0 || bctx.Err() != nil {
			break
		}
		results := probeConflict(bctx, s.prober, todo, s.cfg.ProbeTimeout, s.cfg.ConflictProbeBudget, s.retryGap, s.cfg.FailureThreshold)
		if bctx.Err() != nil && ctx.Err() == nil {
			// Cut short by the budget: a failure now says nothing about the
			// worker, and must not kill it.
			results = slices.DeleteFunc(results, func(r ProbeResult) bool { return r.Err != nil })
		}
		for _, r := range results {
			alive[r.ProbeTarget] = r.Err == nil
			if r.Err != nil {
				s.metrics.probeFailures.WithLabelValues("conflict").Inc()
				s.log.Info("conflict probe failed", "engine_id", r.EngineID, "dp_rank", r.DP, "tp_rank", r.TP, "pp_rank", r.PP, "addr", r.Addr, "err", r.Err)
			}
		}
		var tr []Transition
		err = s.change(ctx, func(now time.Time) error {
			// A reload between attempts brings the probed workers back with
			// their old liveness: the results apply again.
			tr = s.reg.RecordProbes(now, results)
			var err error
			out, err = s.reg.Register(now, reg)
			return err
		})
		s.logTransitions(tr, "conflict probe")
	}
	if errors.As(err, &ce) {
		for _, t := range ce.Probe {
			if !alive[t] {
				ce.Unconfirmed = true
			}
		}
	}
	return s.registered(reg, out, err)
}

// registered logs and persists the result of register.
func (s *Server) registered(reg Registration, out Outcome, err error) (Outcome, error) {
	if err != nil {
		return out, err
	}
	attrs := []any{"engine_id", reg.EngineID, "dp_rank", reg.DP, "tp_rank", reg.TP, "pp_rank", reg.PP,
		"addr", reg.Addr, "source", reg.Source, "generation", out.Generation}
	switch out.Result {
	case EngineTakeover:
		s.metrics.takeovers.WithLabelValues("engine").Inc()
		s.log.Warn("dead engine replaced on its dp rank; routers caching the old engine id must refresh",
			append(attrs, "replaced_engine_id", out.Replaced, "replaced_generation", out.ReplacedGeneration)...)
	case WorkerTakeover:
		s.metrics.takeovers.WithLabelValues("worker").Inc()
		s.log.Warn("dead worker address replaced under the same engine id; decodes that cached this engine id keep the old address (do not pin prefill engine ids)",
			append(attrs, "replaced_addr", out.Replaced, "replaced_generation", out.ReplacedGeneration)...)
	case Idempotent:
		s.log.Debug("identical re-registration", attrs...)
	default:
		s.log.Info("worker registered", attrs...)
	}
	if host, _, err := net.SplitHostPort(strings.TrimPrefix(reg.Addr, "tcp://")); err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() && reg.Source != "" && !isLoopback(reg.Source) {
			s.log.Warn("worker registered a loopback address from another host; decodes elsewhere cannot reach it (set VLLM_HOST_IP)", attrs...)
		}
	}
	if out.Result != Idempotent {
		s.persist()
	}
	return out, nil
}

func conflictResult(k ConflictKind) string {
	switch k {
	case EngineMismatch:
		return "engine_mismatch"
	case WorkerConflict:
		return "worker_conflict"
	}
	return "engine_elsewhere"
}

func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request) {
	s.freshen(r.Context())
	s.metrics.queries.WithLabelValues("root").Inc()
	s.mu.Lock()
	q := s.reg.Query(s.now())
	s.mu.Unlock()
	writeCachable(w, r, q)
}

func (s *Server) handleQueryEngine(w http.ResponseWriter, r *http.Request) {
	s.freshen(r.Context())
	s.metrics.queries.WithLabelValues("engine").Inc()
	s.mu.Lock()
	q := s.reg.QueryEngine(s.now(), r.PathValue("engine_id"))
	s.mu.Unlock()
	writeCachable(w, r, q)
}

// handleEngines answers one page of /v2/engines: engines from ?offset= (0)
// on, at most ?limit= of them, and at most MaxResponseBytes in all; when
// more remain, "next_offset" says where the next page starts.
func (s *Server) handleEngines(w http.ResponseWriter, r *http.Request) {
	s.freshen(r.Context())
	offset, err1 := queryInt(r, "offset", 0)
	limit, err2 := queryInt(r, "limit", 1<<30)
	if err1 != nil || err2 != nil || offset < 0 || limit < 1 {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Detail: "offset must be >= 0 and limit >= 1"})
		return
	}
	s.mu.Lock()
	es := s.reg.Engines(s.now())
	s.mu.Unlock()
	var buf bytes.Buffer
	buf.WriteString(`{"engines":[`)
	n, next := 0, -1
	for i := min(offset, len(es)); i < len(es); i++ {
		b, err := json.Marshal(es[i])
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, errorBody{Detail: "Internal Server Error"})
			return
		}
		// Room is kept for the closing fields; a page always holds at least
		// one engine, which MaxWorkersPerEngine keeps small.
		if n == limit || (n > 0 && buf.Len()+len(b)+64 > s.cfg.MaxResponseBytes) {
			next = i
			break
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		buf.Write(b)
		n++
	}
	fmt.Fprintf(&buf, `],"total":%d`, len(es))
	if next >= 0 {
		fmt.Fprintf(&buf, `,"next_offset":%d`, next)
	}
	buf.WriteString("}")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(buf.Bytes())
}

func queryInt(r *http.Request, name string, def int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	return strconv.Atoi(v)
}

func (s *Server) handleEngine(w http.ResponseWriter, r *http.Request) {
	s.freshen(r.Context())
	s.mu.Lock()
	e, err := s.reg.Engine(s.now(), r.PathValue("engine_id"))
	s.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusNotFound, errorBody{Detail: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func (s *Server) handleGenerations(w http.ResponseWriter, r *http.Request) {
	s.freshen(r.Context())
	s.mu.Lock()
	g := s.reg.Generations()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, g)
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("engine_id")
	err := s.change(r.Context(), func(now time.Time) error { return s.reg.Delete(now, id) })
	s.adminDone(w, err, "deleted", "engine_id", id)
}

func (s *Server) handleDeleteWorker(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("engine_id")
	tp, err1 := strconv.Atoi(r.PathValue("tp"))
	pp, err2 := strconv.Atoi(r.PathValue("pp"))
	if err1 != nil || err2 != nil {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{Detail: "tp and pp must be integers"})
		return
	}
	err := s.change(r.Context(), func(now time.Time) error { return s.reg.DeleteWorker(now, id, tp, pp) })
	s.adminDone(w, err, "deleted", "engine_id", id, "tp_rank", tp, "pp_rank", pp)
}

func (s *Server) handleDrain(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("engine_id")
		err := s.change(r.Context(), func(time.Time) error { return s.reg.SetDraining(id, on) })
		s.adminDone(w, err, "", "engine_id", id, "draining", on)
	}
}

func (s *Server) adminDone(w http.ResponseWriter, err error, eviction string, attrs ...any) {
	if errors.Is(err, ErrNotFound) {
		writeJSON(w, http.StatusNotFound, errorBody{Detail: err.Error()})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{Detail: err.Error()})
		return
	}
	if eviction != "" {
		s.metrics.evictions.WithLabelValues(eviction).Inc()
	}
	s.log.Info("admin change", attrs...)
	s.persist()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// admin requires the bearer token, when one is configured, on endpoints
// that change state. /register is left open: vLLM cannot send a token.
func (s *Server) admin(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.fromAdminNetwork(w, r) {
			return
		}
		if s.cfg.Token != "" {
			if !BearerMatches(r.Header.Get("Authorization"), s.cfg.Token) {
				s.log.Warn("unauthorized admin request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
				w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard-registry"`)
				writeJSON(w, http.StatusUnauthorized, errorBody{Detail: "Unauthorized"})
				return
			}
		}
		h(w, r)
	})
}

// writeCachable writes a /query answer with an ETag, so pollers can send
// If-None-Match and get a 304 when nothing changed.
func writeCachable(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, errorBody{Detail: "Internal Server Error"})
		return
	}
	h := fnv.New64a()
	h.Write(body)
	etag := fmt.Sprintf(`"%016x"`, h.Sum64())
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		code, body = http.StatusInternalServerError, []byte(`{"detail":"Internal Server Error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(body)
}

func locOf(field string) []any {
	if field == "" {
		return []any{"body"}
	}
	return []any{"body", field}
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func isLoopback(ip string) bool {
	p := net.ParseIP(ip)
	return p != nil && p.IsLoopback()
}

// adminRead restricts a /v2 read to AdminNetworks: it shows source
// addresses and the whole topology.
func (s *Server) adminRead(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.fromAdminNetwork(w, r) {
			return
		}
		h(w, r)
	})
}

// fromAdminNetwork answers 403 and returns false unless the request comes
// from one of AdminNetworks (loopback by default).
func (s *Server) fromAdminNetwork(w http.ResponseWriter, r *http.Request) bool {
	if FromNetworks(r, s.adminNets) {
		return true
	}
	s.log.Warn("admin request from outside the admin networks", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusForbidden, errorBody{Detail: "Forbidden", Hint: "the /v2 admin API answers only the networks in --admin-allow (loopback by default)"})
	return false
}

// truncate shortens a client-supplied string for a log line.
func truncate(v string) string {
	if len(v) > 64 {
		return v[:64] + "..."
	}
	return v
}
