package server

// The msgpack client protocol on --client-address: a ZeroMQ ROUTER that speaks the
// engine-core vocabulary to clients (README.md, "Client protocol", is the contract).
//
// One reader goroutine receives and dispatches; one writer goroutine is the only
// caller of Send. Outputs reach a client through dispatcher.SubmitFunc callbacks that
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
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/dispatcher"
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
	// and its requests are aborted. 0 = 65536.
	MaxQueued int
	// EOSTokenID fills _eos_token_id of a request that has none and does not ignore
	// EOS (unset: such a request gets ignore_eos, as on the HTTP API).
	EOSTokenID wire.OptInt
	// ShutdownReason, when non-nil, names why requests are cut short at shutdown.
	ShutdownReason func() error
	Logger         *slog.Logger
	Now            func() time.Time
}

// ClientServer serves msgpack clients over one ROUTER.
type ClientServer struct {
	cfg  ClientConfig
	d    *dispatcher.Dispatcher
	sock transport.Socket
	log  *slog.Logger

	mu      sync.Mutex
	clients map[string]*client // by ROUTER identity
	dirty   map[int][]*client  // rank -> clients with an open batch of that rank
	ready   []outMsg           // sealed messages, in order, for the writer
	closed  bool

	wake    chan struct{} // cap 1: the writer has work
	stop    chan struct{}
	ctx     context.Context // ends utility calls at Close
	cancel  context.CancelFunc
	utilSem chan struct{} // bounds concurrent UTILITY calls
	wg      sync.WaitGroup
}

// client is one connected DEALER. Guarded by ClientServer.mu.
type client struct {
	id       []byte
	idHex    string
	reqs     map[string]string // client request id -> engine request id
	open     map[int]*wire.EngineCoreOutputs
	queued   int
	lastSeen time.Time
	gone     bool
}

// outMsg is one message for the writer: an EngineCoreOutputs or an error map.
type outMsg struct {
	to   []byte
	outs *wire.EngineCoreOutputs
	err  *clientError
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ShutdownReason == nil {
		cfg.ShutdownReason = func() error { return nil }
	}
	sock, err := transport.Listen(ctx, transport.Router, cfg.Address, transport.Options{
		PeerEvents:  true, // a dropped connection is how most clients "disappear"
		SendTimeout: cfg.SendTimeout,
		Logger:      cfg.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("server: client protocol on %s: %w", cfg.Address, err)
	}
	s := &ClientServer{
		cfg: cfg, d: d, sock: sock, log: cfg.Logger,
		clients: make(map[string]*client),
		dirty:   make(map[int][]*client),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		utilSem: make(chan struct{}, 64),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.readLoop()
	go s.writeLoop()
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
	close(s.stop) // the writer flushes what is ready, then exits
	s.wg.Wait()
	for range cap(s.utilSem) { // wait for UTILITY calls in flight
		s.utilSem <- struct{}{}
	}
	return nil
}

// readLoop is the only caller of Recv.
func (s *ClientServer) readLoop() {
	defer s.wg.Done()
	for {
		frames, err := s.sock.Recv()
		if err != nil {
			var left *transport.PeerLeftError
			switch {
			case errors.As(err, &left):
				s.clientGone(left.Identity, "connection closed")
				continue
			case errors.Is(err, transport.ErrClosed):
				return
			}
			s.log.Warn("client protocol: receive failed", "err", err)
			continue
		}
		s.handle(frames)
	}
}

// handle validates the envelope, then dispatches on the type byte.
func (s *ClientServer) handle(frames [][]byte) {
	id := frames[0]
	c := s.touch(id)
	if len(frames) < 3 || len(frames[1]) != 1 {
		s.sendError(c, "", ErrTypeInvalidMessage, "a message is [type (1 byte), msgpack body, aux frames...]", nil)
		return
	}
	body := frames[2:]
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
	default:
		s.sendError(c, "", ErrTypeInvalidMessage, fmt.Sprintf("unknown message type 0x%02x (want 00 ADD, 01 ABORT or 03 UTILITY)", frames[1][0]), nil)
	}
}

// touch finds or creates the client and notes that it is alive.
func (s *ClientServer) touch(id []byte) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[string(id)]
	if c == nil {
		c = &client{
			id: append([]byte(nil), id...), idHex: hex.EncodeToString(id),
			reqs: make(map[string]string), open: make(map[int]*wire.EngineCoreOutputs),
		}
		s.clients[string(id)] = c
	}
	c.lastSeen = s.cfg.Now()
	return c
}

// add submits one ADD. The engine id is the client's id prefixed with the client's
// identity, so two clients that pick the same request id never collide at an engine.
func (s *ClientServer) add(c *client, body [][]byte) {
	var req wire.EngineCoreRequest
	if err := wire.DecodeAdd(body, &req); err != nil {
		s.sendError(c, "", ErrTypeInvalidMessage, "ADD: "+err.Error(), nil)
		return
	}
	userID := req.RequestID
	if userID == "" {
		s.sendError(c, "", ErrTypeInvalidRequest, "ADD: request_id must not be empty", nil)
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
		// Complete the request as vLLM's Python frontend would before sending it;
		// both steps are no-ops on a request that a vLLM client already filled.
		if !sp.EOSTokenID.Valid && !sp.IgnoreEOS {
			if s.cfg.EOSTokenID.Valid {
				sp.SetEOS(s.cfg.EOSTokenID)
			} else {
				sp.IgnoreEOS = true
			}
		}
		sp.Normalize()
	}
	// Reserve the id before submitting: the first output may arrive before
	// SubmitFunc returns.
	s.mu.Lock()
	c.reqs[userID] = engineID
	s.mu.Unlock()
	_, err := s.d.SubmitFunc(&req, func(rank int, out *wire.EngineCoreOutput, err error) {
		s.deliver(c, userID, rank, out, err)
	})
	if err != nil {
		s.mu.Lock()
		delete(c.reqs, userID)
		s.mu.Unlock()
		typ, msg, ranks := s.classify(err)
		s.sendError(c, userID, typ, msg, ranks)
	}
}

// classify names a refused or failed request for the error message.
func (s *ClientServer) classify(err error) (typ, msg string, ranks []int) {
	var bad *dispatcher.InvalidDataParallelRank
	var dup *dispatcher.DuplicateRequestId
	var inv *wire.ValidationError
	switch {
	case errors.As(err, &bad):
		r := bad.ConnectedRanks
		if r == nil {
			r = []int{}
		}
		return TypeInvalidDataParallelRank, bad.Error(), r
	case errors.As(err, &dup):
		return TypeDuplicateRequestID, dup.Error(), nil
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

// deliver runs on the dispatcher's goroutines under the request's lock: it copies the
// output into the client's open batch for rank and never blocks. A normal output waits
// for EndBatch; an ending without a final output is sealed at once.
func (s *ClientServer) deliver(c *client, userID string, rank int, out *wire.EngineCoreOutput, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gone {
		return
	}
	b := c.open[rank]
	if b == nil {
		b = &wire.EngineCoreOutputs{EngineIndex: int64(rank)}
		c.open[rank] = b
		s.dirty[rank] = append(s.dirty[rank], c)
	}
	if err == nil {
		b.Outputs = append(b.Outputs, copyOutput(userID, out))
		c.queued++
		if out.Finished() {
			delete(c.reqs, userID)
			b.FinishedRequests = append(b.FinishedRequests, userID)
		}
		if c.queued > s.cfg.MaxQueued {
			s.slowClientLocked(c)
		}
		return
	}
	// The request ended without a final output: synthesise one so a client that
	// only understands outputs sees it end, then say why.
	delete(c.reqs, userID)
	reason := wire.FinishError
	if errors.Is(err, dispatcher.ErrAborted) || errors.Is(err, dispatcher.ErrClosed) {
		reason = wire.FinishAbort
	}
	b.Outputs = append(b.Outputs, wire.EngineCoreOutput{RequestID: userID, NewTokenIDs: []int64{}, FinishReason: reason})
	b.FinishedRequests = append(b.FinishedRequests, userID)
	c.queued++
	s.sealLocked(c, rank)
	if !errors.Is(err, dispatcher.ErrAborted) { // a client's own abort needs no explanation
		typ, msg, ranks := s.classify(err)
		s.queueLocked(outMsg{to: c.id, err: &clientError{RequestID: userID, Type: typ, Message: msg, ConnectedRanks: ranks, HasRanks: ranks != nil}})
	}
	s.kickLocked()
}

// EndBatch seals every client batch that rank's last engine message filled. The
// adapter calls it after dispatcher.HandleOutputs returns.
func (s *ClientServer) EndBatch(rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.dirty[rank]) == 0 {
		return
	}
	for _, c := range s.dirty[rank] {
		s.sealLocked(c, rank)
	}
	s.kickLocked()
}

// sealLocked moves c's open batch of rank to the writer queue. Caller holds s.mu.
func (s *ClientServer) sealLocked(c *client, rank int) {
	b := c.open[rank]
	if b == nil {
		return
	}
	delete(c.open, rank)
	d := s.dirty[rank]
	for i, x := range d {
		if x == c {
			d[i] = d[len(d)-1]
			s.dirty[rank] = d[:len(d)-1]
			break
		}
	}
	if len(b.Outputs) > 0 && !c.gone {
		s.queueLocked(outMsg{to: c.id, outs: b})
	}
}

func (s *ClientServer) queueLocked(m outMsg) { s.ready = append(s.ready, m) }

func (s *ClientServer) kickLocked() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// slowClientLocked drops a client that stopped reading: its queue is discarded and
// its requests aborted (their callbacks then find it gone). Caller holds s.mu.
func (s *ClientServer) slowClientLocked(c *client) {
	s.log.Warn("client protocol: client does not read its outputs; aborting its requests", "client", c.idHex, "queued", c.queued)
	ids := s.forgetLocked(c)
	go s.d.Abort(ids...) // not under the request lock that deliver runs in
}

// forgetLocked marks c gone, drops its queued messages and returns its engine ids.
func (s *ClientServer) forgetLocked(c *client) []string {
	c.gone = true
	delete(s.clients, string(c.id))
	ids := make([]string, 0, len(c.reqs))
	for _, eid := range c.reqs {
		ids = append(ids, eid)
	}
	clear(c.reqs)
	for rank := range c.open {
		s.sealLocked(c, rank)
	}
	kept := s.ready[:0]
	for _, m := range s.ready {
		if string(m.to) != string(c.id) {
			kept = append(kept, m)
		}
	}
	clear(s.ready[len(kept):])
	s.ready = kept
	return ids
}

// clientGone aborts every live request of a client that disappeared.
func (s *ClientServer) clientGone(id []byte, why string) {
	s.mu.Lock()
	c := s.clients[string(id)]
	if c == nil {
		s.mu.Unlock()
		return
	}
	ids := s.forgetLocked(c)
	s.mu.Unlock()
	if len(ids) > 0 {
		s.log.Info("client protocol: client gone; aborting its requests", "client", c.idHex, "reason", why, "requests", len(ids))
		s.d.Abort(ids...)
	}
}

// abort handles ABORT: unknown ids are ignored, as an engine does. An empty list is
// the keepalive.
func (s *ClientServer) abort(c *client, ids []string) {
	if len(ids) == 0 {
		return
	}
	s.mu.Lock()
	eids := make([]string, 0, len(ids))
	for _, id := range ids {
		if eid, ok := c.reqs[id]; ok {
			eids = append(eids, eid)
		}
	}
	s.mu.Unlock()
	if len(eids) > 0 {
		s.d.Abort(eids...)
	}
}

// sendError queues an error message for c.
func (s *ClientServer) sendError(c *client, reqID, typ, msg string, ranks []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gone {
		return
	}
	s.queueLocked(outMsg{to: c.id, err: &clientError{RequestID: reqID, Type: typ, Message: msg, ConnectedRanks: ranks, HasRanks: ranks != nil}})
	s.kickLocked()
}

// writeLoop is the only caller of Send. It also runs the idle-client sweep, so the
// liveness rule needs no goroutine of its own.
func (s *ClientServer) writeLoop() {
	defer s.wg.Done()
	var tick <-chan time.Time
	if s.cfg.Timeout > 0 {
		t := time.NewTicker(max(s.cfg.Timeout/4, 10*time.Millisecond))
		defer t.Stop()
		tick = t.C
	}
	var batch []outMsg
	buf := make([]byte, 0, 4096)
	for {
		select {
		case <-s.wake:
		case now := <-tick:
			s.sweep(now)
			continue
		case <-s.stop:
			s.mu.Lock()
			batch, s.ready = s.ready, nil
			s.mu.Unlock()
			s.send(batch, buf)
			s.sock.Close()
			return
		}
		s.mu.Lock()
		batch, s.ready = s.ready, batch[:0]
		for _, m := range batch {
			if m.outs != nil {
				if c := s.clients[string(m.to)]; c != nil {
					c.queued -= len(m.outs.Outputs)
				}
			}
		}
		s.mu.Unlock()
		buf = s.send(batch, buf)
		clear(batch)
	}
}

// send encodes and writes each message. A client that cannot be written to is gone.
func (s *ClientServer) send(batch []outMsg, buf []byte) []byte {
	for _, m := range batch {
		var aux [][]byte
		var err error
		if m.outs != nil {
			buf, aux, err = wire.AppendOutputs(buf[:0], m.outs)
		} else {
			buf = appendClientError(buf[:0], m.err)
		}
		if err != nil {
			s.log.Error("client protocol: encoding outputs", "err", err)
			continue
		}
		frames := make([][]byte, 0, 2+len(aux))
		frames = append(append(frames, m.to, buf), aux...)
		if err := s.sock.Send(frames...); err != nil {
			s.clientGone(m.to, "send failed: "+err.Error())
		}
	}
	return buf
}

// sweep applies the liveness rule: a client with live requests that has been silent
// for longer than Timeout is gone.
func (s *ClientServer) sweep(now time.Time) {
	var gone [][]byte
	s.mu.Lock()
	for _, c := range s.clients {
		if len(c.reqs) > 0 && now.Sub(c.lastSeen) > s.cfg.Timeout {
			gone = append(gone, c.id)
		}
	}
	s.mu.Unlock()
	for _, id := range gone {
		s.clientGone(id, "silent for more than "+s.cfg.Timeout.String())
	}
}

// utility runs one UTILITY call on its own goroutine (a call waits for every engine's
// reply) and answers with an EngineCoreOutputs carrying utility_output.
func (s *ClientServer) utility(c *client, body []byte) {
	_, callID, method, args, err := wire.DecodeUtility(body)
	if err != nil {
		s.sendError(c, "", ErrTypeInvalidMessage, "UTILITY: "+err.Error(), nil)
		return
	}
	select {
	case s.utilSem <- struct{}{}:
	default:
		s.replyUtility(c, callID, 0, "too many utility calls in flight", nil)
		return
	}
	go func() {
		defer func() { <-s.utilSem }()
		rank, result, err := s.callUtility(method, args)
		if err != nil {
			s.replyUtility(c, callID, rank, fmt.Sprintf("Call to %s method failed: %v", method, err), nil)
			return
		}
		s.replyUtility(c, callID, rank, "", result)
	}()
}

func (s *ClientServer) replyUtility(c *client, callID uint64, rank int, failure string, result wire.Raw) {
	u := &wire.UtilityOutput{CallID: callID, HasResult: result != nil, Result: result}
	if failure != "" {
		u.Failure = wire.SomeString(failure)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.gone {
		return
	}
	s.queueLocked(outMsg{to: c.id, outs: &wire.EngineCoreOutputs{EngineIndex: int64(rank), UtilityOutput: u}})
	s.kickLocked()
}

// copyOutput keeps what a client needs of an engine output under the client's own
// request id. The engine's slices are reused after deliver returns, so they are copied.
func copyOutput(userID string, o *wire.EngineCoreOutput) wire.EngineCoreOutput {
	c := wire.EngineCoreOutput{
		RequestID:       userID,
		NewTokenIDs:     append([]int64{}, o.NewTokenIDs...),
		FinishReason:    o.FinishReason,
		StopReason:      o.StopReason,
		NumNaNsInLogits: o.NumNaNsInLogits,
	}
	if o.StopReason.Kind == wire.StopReasonText {
		c.StopReason.Text = string(append([]byte(nil), o.StopReason.Text...))
	}
	if o.KVTransferParams != nil {
		c.KVTransferParams = append(wire.Raw(nil), o.KVTransferParams...)
	}
	if o.PrefillStats != nil {
		ps := *o.PrefillStats
		c.PrefillStats = &ps
	}
	if o.Events != nil {
		c.Events = append([]wire.EngineCoreEvent(nil), o.Events...)
	}
	return c
}

// errorMessage is the wire form of clientError: a msgpack map, so a client tells it
// from an EngineCoreOutputs (a msgpack array) by the first byte.
type errorMessage struct {
	RequestID      *string `msgpack:"request_id"`
	Type           string  `msgpack:"type"`
	Message        string  `msgpack:"message"`
	ConnectedRanks []int   `msgpack:"connected_ranks,omitempty"`
}

func appendClientError(dst []byte, e *clientError) []byte {
	m := errorMessage{Type: e.Type, Message: e.Message}
	if e.RequestID != "" {
		m.RequestID = &e.RequestID
	}
	if e.HasRanks {
		m.ConnectedRanks = e.ConnectedRanks
	}
	b, err := msgpack.Marshal(&m)
	if err != nil { // a struct of strings and ints always encodes
		panic(err)
	}
	return append(dst, b...)
}

// callUtility runs a client's UTILITY on every ready engine and returns the first
// engine's result, as vLLM's data-parallel client does.
func (s *ClientServer) callUtility(method string, args wire.Raw) (rank int, result wire.Raw, err error) {
	var list []any
	if len(args) > 0 {
		if err := msgpack.Unmarshal(args, &list); err != nil {
			return 0, nil, fmt.Errorf("decoding args: %w", err)
		}
	}
	res, err := s.d.CallUtility(s.ctx, method, list...)
	if err != nil {
		return 0, nil, err
	}
	if len(res.Results) == 0 {
		return 0, nil, dispatcher.ErrNoEngines
	}
	first := res.Results[0]
	return first.Rank, first.Raw, nil
}
