package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// The bench runs its own engine stand-in rather than mockengine: it must note, on the
// engine's side of the socket, when each ADD arrived and when each output left, and it
// must be the same code behind switchyard and behind the relay so that the only
// difference between the two phases is the frontend. It does the real handshake
// (HELLO, INIT, input registration, READY), so switchyard sees a protocol-exact engine.

// PromptMarker is the second prompt token of every bench request: an engine that sees
// it knows the first token is the bench's sequence number.
const PromptMarker = 0x5357_4254 // "SWBT"

// HoldMarker in place of PromptMarker asks the engine to hold the request without
// ever stepping it (until it is aborted or the engine stops): the scale sweep's
// parked streams, which fill the frontend's request table while other requests
// are measured.
const HoldMarker = 0x5357_484c // "SWHL"

// Config configures one bench engine.
type Config struct {
	Rank          int
	Handshake     string        // the frontend's (or relay's) handshake ROUTER
	TokensPerStep int           // tokens per running request per step
	StepTime      time.Duration // 0: step as fast as the loop can go
	// Network opens the sockets; nil means transport.ZMQ.
	Network transport.Network
	// Received, when set, counts the ADDs that reached this engine (the memory
	// scenario waits on it before weighing the heap).
	Received *atomic.Int64
	// Sent, when set, counts the output messages this engine wrote (the scale
	// sweep reports engine messages per request).
	Sent *atomic.Int64
	// Layout is the vLLM wire layout the engine speaks; nil = native.
	Layout *wire.Layout
}

// engineEvent is what the input reader hands the step loop.
type engineEvent struct {
	add   *engineReq
	abort []string
	util  *utilCall
}

type engineReq struct {
	id     string
	client int64
	seq    int64 // -1 when the prompt does not carry a bench sequence number
	max    int
	sent   int
	add    int64 // the ADD came out of the input socket
	first  int64 // the batch with the first output was about to be sent
	last   int64 // the same for the latest output
	index  int   // position in the running slice
	hold   bool  // never stepped (HoldMarker)
}

type utilCall struct {
	client int64
	callID uint64
}

// Run connects a bench engine to cfg.Handshake, serves requests until ctx ends,
// and returns what it noted about every request it finished.
func Run(ctx context.Context, cfg Config) ([]Record, error) {
	net := cfg.Network
	if net == nil {
		net = transport.ZMQ
	}
	id := wire.IdentityOf(cfg.Rank).Bytes()
	hs, err := net.Dial(ctx, transport.Dealer, cfg.Handshake, transport.Options{Identity: id})
	if err != nil {
		return nil, fmt.Errorf("bench engine %d: handshake dial: %w", cfg.Rank, err)
	}
	defer hs.Close()
	hello := wire.AppendHandshakeStatus(nil, &wire.HandshakeStatus{Status: "HELLO", Headless: true})
	if err := hs.Send(hello); err != nil {
		return nil, fmt.Errorf("bench engine %d: HELLO: %w", cfg.Rank, err)
	}
	msg, err := RecvCtx(ctx, hs)
	if err != nil {
		return nil, fmt.Errorf("bench engine %d: waiting for INIT: %w", cfg.Rank, err)
	}
	init, err := wire.DecodeInit(msg[len(msg)-1])
	if err != nil {
		return nil, fmt.Errorf("bench engine %d: INIT: %w", cfg.Rank, err)
	}
	if len(init.Addresses.Inputs) == 0 || len(init.Addresses.Outputs) == 0 {
		return nil, fmt.Errorf("bench engine %d: INIT without inputs or outputs", cfg.Rank)
	}
	// Engines connect one PUSH per client output and one DEALER per client input; the
	// bench serves client 0's input, which is all a single frontend has.
	outs := make([]transport.Socket, 0, len(init.Addresses.Outputs))
	defer func() {
		for _, s := range outs {
			s.Close()
		}
	}()
	for _, a := range init.Addresses.Outputs {
		s, err := net.Dial(ctx, transport.Push, a, transport.Options{})
		if err != nil {
			return nil, fmt.Errorf("bench engine %d: output dial %s: %w", cfg.Rank, a, err)
		}
		outs = append(outs, s)
	}
	in, err := net.Dial(ctx, transport.Dealer, init.Addresses.Inputs[0], transport.Options{Identity: id})
	if err != nil {
		return nil, fmt.Errorf("bench engine %d: input dial: %w", cfg.Rank, err)
	}
	defer in.Close()
	lay := cfg.Layout
	if lay == nil {
		lay = wire.Native()
	}
	reg := wire.AppendRegistration(nil, lay, &wire.ReadyResponse{
		MaxModelLen:      wire.SomeInt(1 << 20),
		NumGPUBlocks:     wire.SomeInt(1 << 16),
		BlockSize:        wire.SomeInt(16),
		DataParallelRank: wire.SomeInt(int64(cfg.Rank)),
		MaxNumSeqs:       wire.SomeInt(1 << 20),
		VLLMVersion:      wire.SomeString(lay.VLLMVersion),
	})
	if err := in.Send(reg); err != nil {
		return nil, fmt.Errorf("bench engine %d: registration: %w", cfg.Rank, err)
	}
	ready := wire.AppendReady(nil, lay, &wire.HandshakeStatus{Status: "READY", Headless: true, NumGPUBlocks: wire.SomeInt(1 << 16)})
	if err := hs.Send(ready); err != nil {
		return nil, fmt.Errorf("bench engine %d: READY: %w", cfg.Rank, err)
	}

	events := make(chan engineEvent, 4096)
	quit := make(chan struct{})
	readErr := make(chan error, 1)
	go func() { readErr <- readInputs(in, lay, events, quit, cfg.Received) }()
	recs, err := stepLoop(ctx, cfg, outs, events)
	close(quit) // ends readInputs if it is waiting to hand over an event
	in.Close()  // ends readInputs if it is waiting in Recv
	if rerr := <-readErr; err == nil && rerr != nil && !errors.Is(rerr, transport.ErrClosed) {
		err = rerr
	}
	return recs, err
}

// RecvCtx is Recv that gives up when ctx ends (by closing nothing: the caller closes
// the socket on return, which ends the pending Recv).
func RecvCtx(ctx context.Context, s transport.Socket) ([][]byte, error) {
	type res struct {
		m   [][]byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		m, err := s.Recv()
		ch <- res{m, err}
	}()
	select {
	case r := <-ch:
		return r.m, r.err
	case <-ctx.Done():
		s.Close()
		<-ch
		return nil, ctx.Err()
	}
}

// readInputs decodes what the frontend sends and stamps each ADD the moment it comes
// out of the socket: that instant ends the dispatch latency.
func readInputs(in transport.Socket, lay *wire.Layout, events chan<- engineEvent, quit <-chan struct{}, received *atomic.Int64) error {
	defer close(events)
	var req wire.EngineCoreRequest
	for {
		msg, err := in.Recv()
		if err != nil {
			return err
		}
		now := NowNS()
		if len(msg) < 2 {
			continue
		}
		typ, err := wire.ParseRequestType(msg[0])
		if err != nil {
			continue // an engine's input thread would die; the bench just ignores it
		}
		switch typ {
		case wire.RequestAdd:
			req = wire.EngineCoreRequest{}
			if err := lay.DecodeAdd(msg[1:], &req); err != nil {
				return fmt.Errorf("bench engine: ADD: %w", err)
			}
			r := &engineReq{id: req.RequestID, client: req.ClientIndex, seq: -1, max: 16, add: now}
			if p := req.PromptTokenIDs; len(p) >= 2 && p[1] == PromptMarker {
				r.seq = p[0]
			} else if len(p) >= 2 && p[1] == HoldMarker {
				r.hold = true
			}
			if req.Sampling != nil && req.Sampling.MaxTokens.Valid {
				r.max = int(req.Sampling.MaxTokens.Value)
			}
			select {
			case events <- engineEvent{add: r}:
			case <-quit:
				return nil
			}
			if received != nil {
				received.Add(1)
			}
		case wire.RequestAbort:
			ids, err := wire.DecodeAbort(msg[1])
			if err == nil {
				select {
				case events <- engineEvent{abort: ids}:
				case <-quit:
					return nil
				}
			}
		case wire.RequestUtility:
			client, callID, _, _, err := wire.DecodeUtility(msg[1])
			if err == nil {
				select {
				case events <- engineEvent{util: &utilCall{client: client, callID: callID}}:
				case <-quit:
					return nil
				}
			}
		}
	}
}

// stepper is the step loop's state; owned by stepLoop's goroutine.
type stepper struct {
	cfg     Config
	outs    []transport.Socket
	running []*engineReq
	byID    map[string]*engineReq
	recs    []Record
	step    int64
	batch   []wire.EngineCoreOutputs // one per client output
	owners  [][]*engineReq           // owners[c][i] produced batch[c].Outputs[i]
	tokens  []int64
	buf     []byte
}

func stepLoop(ctx context.Context, cfg Config, outs []transport.Socket, events <-chan engineEvent) ([]Record, error) {
	st := &stepper{cfg: cfg, outs: outs, byID: map[string]*engineReq{},
		batch: make([]wire.EngineCoreOutputs, len(outs)), owners: make([][]*engineReq, len(outs))}
	var timer *time.Timer
	if cfg.StepTime > 0 {
		timer = time.NewTimer(cfg.StepTime)
		defer timer.Stop()
	}
	next := time.Now()
	for {
		// Idle: block until there is work, as an engine's busy loop does.
		if len(st.running) == 0 {
			select {
			case ev, ok := <-events:
				if stop, err := st.take(ev, ok); stop {
					return st.recs, err
				}
				next = time.Now()
			case <-ctx.Done():
				return st.recs, nil
			}
		}
		if timer != nil {
			next = next.Add(cfg.StepTime)
			if d := time.Until(next); d > 0 {
				timer.Reset(d)
				// Keep taking requests while the step is pending: a long step must not
				// leave the input reader blocked on a full channel.
			wait:
				for {
					select {
					case <-timer.C:
						break wait
					case ev, ok := <-events:
						if stop, err := st.take(ev, ok); stop {
							return st.recs, err
						}
					case <-ctx.Done():
						return st.recs, nil
					}
				}
			} else {
				next = time.Now() // fell behind: do not try to catch up with bursts
			}
		}
	drain:
		for {
			select {
			case ev, ok := <-events:
				if stop, err := st.take(ev, ok); stop {
					return st.recs, err
				}
			default:
				break drain
			}
		}
		if ctx.Err() != nil {
			return st.recs, nil
		}
		if err := st.runStep(); err != nil {
			return st.recs, err
		}
	}
}

// take applies ev, received (ok) from the events channel; stop says the step loop
// ends, with err: the channel is closed (nil) or ev failed.
func (st *stepper) take(ev engineEvent, ok bool) (stop bool, err error) {
	if !ok {
		return true, nil
	}
	err = st.apply(ev)
	return err != nil, err
}

func (st *stepper) apply(ev engineEvent) error {
	switch {
	case ev.add != nil:
		r := ev.add
		st.byID[r.id] = r
		if r.hold {
			return nil
		}
		r.index = len(st.running)
		st.running = append(st.running, r)
	case ev.abort != nil:
		for _, id := range ev.abort {
			if r, ok := st.byID[id]; ok {
				st.remove(r)
			}
		}
	case ev.util != nil:
		// Answer every utility call with success and a nil result: enough for a
		// frontend's startup probes, and the bench makes none of its own.
		o := wire.EngineCoreOutputs{EngineIndex: int64(st.cfg.Rank), Timestamp: monoSeconds(),
			UtilityOutput: &wire.UtilityOutput{CallID: ev.util.callID, HasResult: true}}
		body, _, err := st.layout().AppendOutputs(st.buf[:0], &o)
		if err != nil {
			return err
		}
		st.buf = body
		return st.out(ev.util.client).Send(body)
	}
	return nil
}

func (st *stepper) remove(r *engineReq) {
	delete(st.byID, r.id)
	if r.hold {
		return
	}
	last := st.running[len(st.running)-1]
	st.running[r.index] = last
	last.index = r.index
	st.running = st.running[:len(st.running)-1]
}

func (st *stepper) out(client int64) transport.Socket {
	if client >= 0 && int(client) < len(st.outs) {
		return st.outs[client]
	}
	return st.outs[0]
}

// runStep emits TokensPerStep tokens for every running request, one EngineCoreOutputs
// per client, and notes send times just before the write.
func (st *stepper) runStep() error {
	st.step++
	n := len(st.running) * st.cfg.TokensPerStep
	if cap(st.tokens) < n {
		st.tokens = make([]int64, n)
	}
	toks := st.tokens[:n]
	for i := range st.batch {
		st.batch[i].Outputs = st.batch[i].Outputs[:0]
		st.owners[i] = st.owners[i][:0]
	}
	var finished []*engineReq
	for i, r := range st.running {
		k := min(st.cfg.TokensPerStep, r.max-r.sent)
		t := toks[i*st.cfg.TokensPerStep : i*st.cfg.TokensPerStep+k : i*st.cfg.TokensPerStep+k]
		for j := range t {
			t[j] = int64(1000 + (r.sent+j)%30000) // deterministic, vocabulary-sized tokens
		}
		r.sent += k
		fin := wire.FinishNone
		if r.sent >= r.max {
			fin = wire.FinishLength
			finished = append(finished, r)
		}
		c := 0
		if r.client >= 0 && int(r.client) < len(st.batch) {
			c = int(r.client)
		}
		st.batch[c].Outputs = append(st.batch[c].Outputs, wire.EngineCoreOutput{
			RequestID: r.id, NewTokenIDs: t, FinishReason: fin,
		})
		st.owners[c] = append(st.owners[c], r)
	}
	for c := range st.batch {
		b := &st.batch[c]
		if len(b.Outputs) == 0 {
			continue
		}
		b.EngineIndex = int64(st.cfg.Rank)
		b.SchedulerStats = &wire.SchedulerStats{NumRunningReqs: int64(len(st.running) - len(finished)), StepCounter: st.step}
		b.Timestamp = monoSeconds()
		body, _, err := st.layout().AppendOutputs(st.buf[:0], b)
		if err != nil {
			return fmt.Errorf("bench engine %d: encode outputs: %w", st.cfg.Rank, err)
		}
		st.buf = body
		now := NowNS()
		for _, r := range st.owners[c] {
			if r.first == 0 {
				r.first = now
			}
			r.last = now
		}
		if err := st.outs[c].Send(body); err != nil {
			return fmt.Errorf("bench engine %d: send outputs: %w", st.cfg.Rank, err)
		}
		if st.cfg.Sent != nil {
			st.cfg.Sent.Add(1)
		}
	}
	for _, r := range finished {
		if r.seq >= 0 {
			st.recs = append(st.recs, Record{Seq: r.seq, Rank: int32(st.cfg.Rank), Add: r.add, FirstSend: r.first, LastSend: r.last})
		}
		st.remove(r)
	}
	return nil
}

// layout is the wire layout the engine speaks.
func (st *stepper) layout() *wire.Layout {
	if st.cfg.Layout != nil {
		return st.cfg.Layout
	}
	return wire.Native()
}

// Record is what a bench engine notes about one request it served.
type Record struct {
	Seq       int64 // from the first prompt token
	Rank      int32
	Add       int64 // the ADD frame came out of the engine's socket
	FirstSend int64 // just before the output batch holding the first output was sent
	LastSend  int64 // just before the batch holding the final output was sent
}
