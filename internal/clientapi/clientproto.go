package clientapi

// The msgpack client protocol on --client-address: a ZeroMQ ROUTER that speaks the
// engine-core vocabulary to clients (README.md, "Client protocol", is the contract).
//
// Each client connection's own reader goroutine (the transport's) decodes and
// dispatches its messages (onMessage), so a client whose ADD waits for queue room
// holds up only itself; one writer at a time writes to each client (clientwrite.go),
// so a client that stops reading holds up no one else. Outputs reach a client through dispatcher.SubmitFunc callbacks that
// append to a per-(client, rank) batch; the adapter calls EndBatch(rank) after each
// engine message, which seals those batches, so a client gets one EngineCoreOutputs
// per engine message that touched its requests (nats' "note each client, wake each
// writer once per batch").

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// Client-protocol error types (the "error" field of an error message), besides the
// dispatcher's InvalidDataParallelRank and DuplicateRequestId.
const (
	ErrTypeInvalidMessage = "InvalidMessage"    // undecodable frame or unknown type byte
	ErrTypeInvalidRequest = "InvalidRequest"    // a field an engine would reject
	ErrTypeShuttingDown   = "ShuttingDown"      // refused or cut short by shutdown
	ErrTypeNoEngines      = "NoEngines"         // no engine connected and ready
	ErrTypeRequestFailed  = "RequestFailed"     // engine died, slow consumer, ...
	ErrTypeUtilityFailed  = "UtilityCallFailed" // a UTILITY call could not be made
	ErrTypeSlowClient     = "SlowClient"        // the client did not read its outputs
)

// DefaultMaxBytes is the default frame and message bound of the client
// protocol: the largest legal ADD, an apicore.MaxPromptTokens prompt, is 5 MiB with ids
// encoded as msgspec encodes them (at most 5 bytes below 2^32), plus its sampling
// parameters. Clients that send prompt embeddings raise it.
const DefaultMaxBytes = 8 << 20

// ClientConfig configures a ClientServer.
type ClientConfig struct {
	Address string // ROUTER endpoint, tcp:// or ipc://
	// Timeout: a client that has live requests and sends nothing for this long is
	// gone, and its requests are aborted. 0 = only a dropped connection counts.
	Timeout time.Duration
	// SendTimeout bounds one write to one client; a client that does not drain in
	// time is disconnected (and so its requests aborted). 0 = 10 s.
	SendTimeout time.Duration
	// MaxQueued outputs waiting for one client before it counts as a slow consumer
	// and its requests are aborted. 0 = 65536. From half of it (at most 4,096) on, the
	// engine output goroutines that feed the client wait for the writer (see
	// EndBatch), so a client that reads is never dropped because the server itself
	// fell behind.
	MaxQueued int
	// Model completes and bounds requests as on the HTTP API: its EOS ids fill a
	// request that has no _eos_token_id (none known: such a request gets
	// ignore_eos unless it has it), its vocabulary and logprobs bounds refuse.
	Model apicore.ModelRules
	// MaxFrameBytes and MaxMessageBytes bound one received frame and one message
	// (all its frames); a client that sends more is disconnected before the excess
	// is read. 0 = DefaultMaxBytes.
	MaxFrameBytes, MaxMessageBytes int
	// MaxConnections caps client connections, handshaking or established; more
	// are closed as they are accepted. 0 = no cap.
	MaxConnections int
	// AllowUtilityMethods extends DefaultUtilityMethods: the UTILITY methods
	// clients may call. Any other method is refused and nothing is sent.
	AllowUtilityMethods []string
	// Token, when set, is the client token (--client-token): a connection is
	// served only after it presented it in an AUTH message (clientproto_auth.go).
	Token string
	// ShutdownReason, when non-nil, names why requests are cut short at shutdown.
	ShutdownReason func() error
	// LogRequests logs one line per request when it ends (accesslog.go), as the
	// HTTP API does: client, request id, status, duration, tokens, rank.
	LogRequests bool
	// Stats counts submitted prompt tokens for the stats line; nil = off.
	Stats apicore.PromptCounter
	// TracerProvider, when set, traces every request as the HTTP API does: the
	// parent is the trace context in the client's own trace_headers.
	TracerProvider trace.TracerProvider
	Logger         *slog.Logger
	Now            func() time.Time
}

// ClientServer serves msgpack clients over one ROUTER.
type ClientServer struct {
	cfg    ClientConfig
	d      *dispatcher.Dispatcher
	sock   transport.Socket
	log    *slog.Logger
	tracer trace.Tracer // nil: no tracing
	// accessLog: LogRequests, and its level enabled (a discarded line still cost
	// a map update per output).
	accessLog bool

	mu      sync.Mutex
	clients map[string]*client // by ROUTER identity
	dirty   map[int][]*client  // rank -> clients with an open batch of that rank
	closed  bool
	keys    uint64                // last client key handed out
	auth    map[string]*authState // by ROUTER identity, with a Token: until the connection closes
	authLog authLog

	stop    chan struct{}
	started chan struct{}   // closed once sock is set: handlers wait for it
	ctx     context.Context // ends utility calls at Close
	cancel  context.CancelFunc
	utilSem chan struct{} // bounds concurrent UTILITY calls
	// utilAllowed: the UTILITY methods forwarded to engines.
	utilAllowed map[string]bool
	wg          sync.WaitGroup // the sweeper
	writers     sync.WaitGroup // per-client writers (Add only under mu, before closed)
	// bg joins the goroutines started to get out from under a lock (an abort at
	// the engines, a gone client's cleanup); goBG starts them until Close.
	bgMu   sync.Mutex
	bgDone bool
	bg     sync.WaitGroup
}

// client is one connected DEALER. Guarded by ClientServer.mu.
type client struct {
	key      uint64          // for the fair share of engine queues (dispatcher.WithClient)
	ctx      context.Context // the server's context naming key, made once, not per ADD
	id       []byte
	idHex    string
	reqs     map[string]liveReq // by client request id
	open     map[int]*outBatch
	queued   int // outputs waiting for the writer
	lastSeen time.Time
	gone     bool
	// ready holds the sealed messages for the client, in order; writing is set
	// while its writer goroutine runs.
	ready   []outMsg
	writing bool
	// drained is closed (and replaced) by the writer when it takes the queue while
	// drainWait is set: EndBatch callers stalled on this client wait on it.
	drained   chan struct{}
	drainWait bool
	// blocked: a stall on this client timed out without its writer taking the
	// queue (it is stuck writing to a client that does not read). Cleared when a
	// write completes; until then EndBatch does not wait for the client.
	blocked bool
}

// liveReq is one of a client's live requests.
type liveReq struct {
	engineID string
	rank     int // -1 until SubmitFunc has returned
	// For the access log (ClientConfig.LogRequests): when the ADD arrived, its
	// prompt length and the tokens delivered so far.
	start              time.Time
	prompt, completion int
	span               *apicore.Span // nil: tracing off
}

// outMsg is one message for the writer: an EngineCoreOutputs or an error map.
type outMsg struct {
	to    []byte
	outs  *wire.EngineCoreOutputs
	batch *outBatch // outs belongs to it: recycled once written
	err   *clientError
}

// clientError is the error message map (see README.md).
type clientError struct {
	RequestID      string
	Type           string
	Message        string
	ConnectedRanks []int
	HasRanks       bool
}

// ListenClients binds the ROUTER and starts the reader and writer.
func ListenClients(ctx context.Context, cfg ClientConfig, d *dispatcher.Dispatcher) (*ClientServer, error) {
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	if cfg.MaxQueued <= 0 {
		cfg.MaxQueued = 1 << 16
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxFrameBytes <= 0 {
		cfg.MaxFrameBytes = DefaultMaxBytes
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = max(DefaultMaxBytes, cfg.MaxFrameBytes)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ShutdownReason == nil {
		cfg.ShutdownReason = func() error { return nil }
	}
	s := &ClientServer{
		cfg: cfg, d: d, log: cfg.Logger, tracer: apicore.TracerOf(cfg.TracerProvider),
		clients:     make(map[string]*client),
		dirty:       make(map[int][]*client),
		auth:        make(map[string]*authState),
		stop:        make(chan struct{}),
		started:     make(chan struct{}),
		utilSem:     make(chan struct{}, 64),
		utilAllowed: make(map[string]bool),
	}
	for _, m := range append(slices.Clone(DefaultUtilityMethods), cfg.AllowUtilityMethods...) {
		s.utilAllowed[m] = true
	}
	s.accessLog = cfg.LogRequests && cfg.Logger.Enabled(context.Background(), slog.LevelInfo)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	sock, err := transport.Listen(ctx, transport.Router, cfg.Address, transport.Options{
		// Each connection's reader handles its messages itself (onMessage): no
		// hand-off to a reader of ours, and a client whose ADD waits for queue
		// room holds up only its own connection.
		Handler:     s.onMessage,
		PeerEvents:  true, // a dropped connection is how most clients "disappear"
		SendTimeout: cfg.SendTimeout,
		// The transport's defaults (256 MiB frames, 1 GiB messages) let three
		// clients take 3 GB; nothing legal needs more than these.
		MaxFrameSize:   cfg.MaxFrameBytes,
		MaxMessageSize: cfg.MaxMessageBytes,
		MaxConns:       cfg.MaxConnections,
		Logger:         cfg.Logger,
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("server: client protocol on %s: %w", cfg.Address, err)
	}
	s.sock = sock
	close(s.started)
	s.wg.Add(1)
	go s.sweepLoop()
	return s, nil
}

// Addr is the bound endpoint (the real port after binding port 0).
func (s *ClientServer) Addr() string { return s.sock.Addr() }

// Close stops reading, sends what is queued (bounded by the send timeout), closes the
// socket and waits for both goroutines. Call it after the dispatcher has ended every
// request, so clients receive their final outputs.
func (s *ClientServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	close(s.stop)    // the sweeper exits; stalled EndBatch callers return
	s.writers.Wait() // each writer sends what is queued (bounded by the send timeout)
	s.sock.Close()   // the connections' readers exit, after any handler in flight
	s.wg.Wait()
	for range cap(s.utilSem) { // wait for UTILITY calls in flight
		s.utilSem <- struct{}{}
	}
	s.bgMu.Lock()
	s.bgDone = true
	s.bgMu.Unlock()
	s.bg.Wait()
	return nil
}

// goBG runs f on its own goroutine, joined by Close; once Close has joined them
// it runs nothing (the dispatcher's own Close then ends what is left).
func (s *ClientServer) goBG(f func()) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if !s.bgDone {
		s.bg.Go(f)
	}
}

// onMessage is the socket's Handler: it runs on the client connection's own reader
// goroutine, in order per client, concurrently across clients (ClientServer.mu
// guards what they share).
func (s *ClientServer) onMessage(frames [][]byte, err error) {
	<-s.started // a client may speak before Listen has returned
	if err != nil {
		var left *transport.PeerLeftError
		if errors.As(err, &left) {
			s.clientGone(left.Identity, "connection closed")
			s.forgetAuth(left.Identity)
			return
		}
		s.log.Warn("client protocol: receive failed", "err", err)
		return
	}
	s.handle(frames)
}

// handle validates the envelope, then dispatches on the type byte.
func (s *ClientServer) handle(frames [][]byte) {
	id := frames[0]
	c := s.touch(id)
	if !s.admit(c, frames) {
		return
	}
	if len(frames) < 3 || len(frames[1]) != 1 {
		s.sendError(c, "", ErrTypeInvalidMessage, "a message is [type (1 byte), msgpack body, aux frames...]", nil)
		return
	}
	body := frames[2:]
	if err := checkMsgpackDepth(body[0], maxMsgpackDepth); err != nil {
		// Before any decoder walks it: see msgpackdepth.go. A UTILITY's call is
		// still resolved, so the client's pending call does not wait for ever.
		if id, neg, ok := utilityCallID(body[0]); ok && !neg && frames[1][0] == wire.RequestUtility {
			s.replyUtility(c, id, 0, "Call failed: args "+err.Error(), nil)
		}
		s.sendError(c, "", ErrTypeInvalidMessage, "message body: "+err.Error(), nil)
		return
	}
	switch frames[1][0] {
	case wire.RequestAdd:
		s.add(c, body)
	case wire.RequestAbort:
		ids, err := wire.DecodeAbort(body[0])
		if err != nil {
			s.sendError(c, "", ErrTypeInvalidMessage, "ABORT: "+err.Error(), nil)
			return
		}
		s.abort(c, ids)
	case wire.RequestUtility:
		s.utility(c, body[0])
	case RequestAuth:
		// No --client-token: every client is served, and one that
		// authenticates anyway works here as everywhere.
	default:
		s.sendError(c, "", ErrTypeInvalidMessage, fmt.Sprintf("unknown message type 0x%02x (want 00 ADD, 01 ABORT, 03 UTILITY or 10 AUTH)", frames[1][0]), nil)
	}
}

// touch finds or creates the client and notes that it is alive.
func (s *ClientServer) touch(id []byte) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[string(id)]
	if c == nil {
		s.keys++
		c = &client{
			key: s.keys,
			id:  append([]byte(nil), id...), idHex: hex.EncodeToString(id),
			reqs: make(map[string]liveReq), open: make(map[int]*outBatch),
			drained: make(chan struct{}),
		}
		c.ctx = dispatcher.WithClient(s.ctx, c.key)
		s.clients[string(id)] = c
	}
	c.lastSeen = s.cfg.Now()
	return c
}

// addReq holds an ADD's request and its sampling params, allocated together.
type addReq struct {
	req wire.EngineCoreRequest
	sp  wire.SamplingParams
}

// add submits one ADD. The engine id is the client's id prefixed with the client's
// identity, so two clients that pick the same request id never collide at an engine.
func (s *ClientServer) add(c *client, body [][]byte) {
	if n, ok := addPromptLen(body[0]); ok && n > apicore.MaxPromptTokens {
		// Refused before decoding: see addPromptLen.
		s.sendError(c, "", ErrTypeInvalidRequest, fmt.Sprintf("ADD: prompt_token_ids has %d tokens, more than the limit of %d", n, apicore.MaxPromptTokens), nil)
		return
	}
	a := new(addReq) // the request and its sampling params in one allocation
	req := &a.req
	if err := wire.DecodeAddWith(body, req, &a.sp); err != nil {
		s.sendError(c, "", ErrTypeInvalidMessage, "ADD: "+err.Error(), nil)
		return
	}
	userID := req.RequestID
	if userID == "" {
		s.sendError(c, "", ErrTypeInvalidRequest, "ADD: request_id must not be empty", nil)
		return
	}
	if len(userID) > apicore.MaxRequestIDLen {
		// Not echoed: the id is repeated in every output, which is the harm.
		s.sendError(c, "", ErrTypeInvalidRequest, fmt.Sprintf("ADD: request_id is %d bytes, more than the limit of %d", len(userID), apicore.MaxRequestIDLen), nil)
		return
	}
	if req.ExternalReqID.Valid && len(req.ExternalReqID.Value) > apicore.MaxRequestIDLen {
		s.sendError(c, userID, ErrTypeInvalidRequest, fmt.Sprintf("ADD: external_req_id is %d bytes, more than the limit of %d", len(req.ExternalReqID.Value), apicore.MaxRequestIDLen), nil)
		return
	}
	s.mu.Lock()
	_, dup := c.reqs[userID]
	s.mu.Unlock()
	if dup {
		e := &dispatcher.DuplicateRequestId{ID: userID}
		s.sendError(c, userID, "DuplicateRequestId", e.Error(), nil)
		return
	}
	engineID := "c" + c.idHex + "-" + userID
	req.RequestID = engineID
	if !req.ExternalReqID.Valid {
		req.ExternalReqID = wire.SomeString(userID)
	}
	if req.ArrivalTime == 0 {
		req.ArrivalTime = float64(s.cfg.Now().UnixNano()) / 1e9
	}
	if sp := req.Sampling; sp != nil {
		// Complete the request as vLLM's Python frontend would before sending it
		// (update_from_generation_config, then SamplingParams' post-init in its
		// order: the range checks see the client's own values before the greedy
		// reset, so temperature 0 with top_p 0 is refused, not silently fixed).
		// Both steps leave a request a vLLM client already filled as it is.
		if !sp.EOSTokenID.Valid {
			if len(s.cfg.Model.EOSTokenIDs) > 0 {
				s.cfg.Model.SetEOS(sp)
			} else if !sp.IgnoreEOS {
				sp.IgnoreEOS = true
			}
		}
		if err := sp.Prepare(); err != nil {
			s.sendError(c, userID, ErrTypeInvalidRequest, "ADD: "+samplingField(err).Error(), nil)
			return
		}
	}
	if err := s.cfg.Model.Check(req); err != nil {
		s.sendError(c, userID, ErrTypeInvalidRequest, "ADD: "+err.Error(), nil)
		return
	}
	// Reserve the id before submitting: the first output may arrive before
	// SubmitFunc returns.
	start := s.cfg.Now()
	span := s.startSpan(req, userID)
	s.mu.Lock()
	c.reqs[userID] = liveReq{engineID: engineID, rank: -1, start: start, prompt: len(req.PromptTokenIDs), span: span}
	s.mu.Unlock()
	// The connection is the client of the fair share: its burst waits for room in
	// a full engine queue behind itself, not in front of other clients.
	rank, err := s.d.SubmitFuncContext(c.ctx, req, func(rank int, out *wire.EngineCoreOutput, err error) {
		s.deliver(c, userID, rank, out, err)
	})
	if err == nil {
		span.Dispatched(rank)
		if s.cfg.Stats != nil {
			s.cfg.Stats.AddPrompt(rank, len(req.PromptTokenIDs))
		}
		s.mu.Lock()
		if lr, ok := c.reqs[userID]; ok && lr.engineID == engineID {
			lr.rank = rank
			c.reqs[userID] = lr
		}
		s.mu.Unlock()
	} else {
		s.mu.Lock()
		delete(c.reqs, userID)
		s.mu.Unlock()
		typ, msg, ranks := s.classify(err)
		s.sendError(c, userID, typ, msg, ranks)
		span.End(0, nil, 0, err)
		if s.accessLog {
			s.logRequest(c, userID, liveReq{rank: -1, start: start, prompt: len(req.PromptTokenIDs)}, typ)
		}
	}
}

// samplingField names a SamplingParams error by its place in the request, as
// Validate does ("sampling_params.top_p").
func samplingField(err error) error {
	var inv *wire.ValidationError
	if errors.As(err, &inv) {
		return &wire.ValidationError{Field: "sampling_params." + inv.Field, Msg: inv.Msg}
	}
	return err
}

// classify names a refused or failed request for the error message.
func (s *ClientServer) classify(err error) (typ, msg string, ranks []int) {
	var bad *dispatcher.InvalidDataParallelRank
	var dup *dispatcher.DuplicateRequestId
	var inv *wire.ValidationError
	var long *dispatcher.PromptTooLongError
	if typ := busyType(err); typ != "" {
		return typ, err.Error(), nil
	}
	switch {
	case errors.As(err, &long):
		return ErrTypeInvalidRequest, long.Error(), nil
	case errors.As(err, &bad):
		r := bad.ConnectedRanks
		if r == nil {
			r = []int{}
		}
		return apicore.TypeInvalidDataParallelRank, bad.Error(), r
	case errors.As(err, &dup):
		return apicore.TypeDuplicateRequestID, dup.Error(), nil
	case errors.As(err, &inv):
		return ErrTypeInvalidRequest, inv.Error(), nil
	case errors.Is(err, dispatcher.ErrDraining), errors.Is(err, dispatcher.ErrClosed):
		msg := "switchyard is shutting down"
		if r := s.cfg.ShutdownReason(); r != nil {
			msg = r.Error()
		}
		return ErrTypeShuttingDown, msg, nil
	case errors.Is(err, dispatcher.ErrNoEngines):
		return ErrTypeNoEngines, err.Error(), nil
	}
	return ErrTypeRequestFailed, err.Error(), nil
}
