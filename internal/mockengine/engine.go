// Package mockengine is an engine core that speaks vLLM's engine-core protocol like a
// headless `vllm serve --headless` engine: the handshake (HELLO, INIT, registration on
// every input, READY), strict decoding of every request, one EngineCoreOutputs per
// step with scheduler_stats, the common utility calls, ENGINE_CORE_DEAD on a
// duplicate live request id, and faults on demand. Tokens are a deterministic
// function of the sequence so far (TokenAfter, TokensFor) so tests can check exact
// outputs, also of a request that moved between engines.
//
// Every ADD goes through wire.EngineAccepts, vLLM's own decode-time checks (not
// switchyard's stricter Validate): where a real engine's input thread would die
// silently, the mock sends ENGINE_CORE_DEAD and exits with ErrInputThreadDied, so
// a test notices at once. Outputs due for a client_index without an output socket
// kill it the same way (ErrNoOutputSocket), as they kill vLLM's output thread.
// Not modelled: pause_scheduler/resume_scheduler (answered as unknown methods, so
// START_DP_WAVE is never ignored for a pause) and the chunk-by-chunk generation of
// streaming-input (resumable) sessions, whose continuations are only accepted.
package mockengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// Config configures one mock engine.
type Config struct {
	// HandshakeAddress is the frontend's handshake ROUTER. Empty = bootstrapped:
	// connect straight to Inputs/Outputs (a launcher did the handshake).
	HandshakeAddress string
	Inputs, Outputs  []string
	Rank             int
	DataParallelSize int
	StepInterval     time.Duration // --step-ms
	TokensPerStep    int           // --tokens-per-step
	MaxModelLen      int
	MaxNumSeqs       int
	Faults           Faults
	Logger           *slog.Logger
	Network          transport.Network // nil = transport.ZMQ
	// LockstepDir, when set, makes the ranks of DataParallelSize one lockstep
	// group (lockstep.go): a rank steps only while every other rank of the
	// group is alive, as a MoE rank blocks in its collective when a peer dies.
	// Every rank of the group must be given the same directory.
	LockstepDir string
	// FaultNow triggers a fault at run time (the mock-engine command feeds it
	// from signals): it takes effect at the next step. Nil = none.
	FaultNow <-chan Fault
	// Role is the engine's P/D role: "" (none), RolePrefill or RoleDecode (pd.go).
	Role string
	// Layout is the vLLM release whose wire layout the engine speaks: its
	// registration and READY, how it decodes ADDs and encodes outputs, the finish
	// reasons it has and which EngineCore methods it answers. Nil = the native
	// (newest) layout.
	Layout *wire.Layout
	// Reconnect makes the input, output and coordinator sockets redial a
	// peer that went away, as a real engine's libzmq sockets do (redial.go):
	// with several frontends, one frontend restarting must not end the
	// engine. Off, a lost peer is an error, as before.
	Reconnect bool
	// Reregister sends the registration again on every input reconnection.
	// A real vLLM engine registers once; this stands in for the replay a
	// restarted frontend would otherwise need (see cluster/README.md).
	Reregister bool
	// Words, when set, are token ids (whole words of a tokenizer) that requests
	// asking for text (detokenize, as a frontend with a tokenizer sends them) are
	// answered with, ending sentences with Period and then the request's EOS:
	// readable answers for the embedded default. Token-only requests keep the
	// TokensFor sequence.
	Words    []int64
	Capitals []int64 // Words capitalised, index for index, for a sentence's first word
	Period   int64
	// Script, when set, answers the requests whose prompt holds a rule's
	// trigger with the rule's tokens (script.go). DefaultConfig carries the
	// script SetDefaultScript set.
	Script *Script

	// KVCacheBlocks, when positive, gives the engine a prefix cache of that many
	// blocks (prefixcache.go) and serialised prefills (prefill.go): registered
	// as num_gpu_blocks. 0 = none, and the timing of before: no prefill time,
	// no events.
	KVCacheBlocks int
	BlockSize     int // tokens per block; 0 = DefaultBlockSize (vLLM's 16)
	// PrefillPerToken is the prefill time of each prompt token the cache did not
	// hold; a request's first token comes after its prefill.
	PrefillPerToken time.Duration
	// KVEvents publishes the cache's KV events as vLLM's ZmqEventPublisher
	// does (kvpublish.go), in the encoding of Layout's release; it needs
	// KVCacheBlocks. Layouts whose registration has kv_events_config carry it.
	KVEvents KVEventsConfig
	// KVHashBytes publishes 32-byte block hashes instead of ints, as an engine
	// run with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0.
	KVHashBytes bool
	// Cache, when set, is added to as requests are prefilled (the bench reads
	// it in the same process). Several engines may share one.
	Cache *CacheCounters
	// Pooling, when set, makes the engine a pooling model (pooling.go).
	Pooling *PoolingModel
	// MaxLoRAs, when positive, is an engine started with --enable-lora
	// --max-loras N (lora.go); 0 = no LoRA.
	MaxLoRAs int
}

// Faults make the engine misbehave for fault tests. Step counts are 1-based: N means
// "after N steps have produced output".
type Faults struct {
	DieAfterSteps     int  // send ENGINE_CORE_DEAD and exit with an error
	StallAfterSteps   int  // stop reading input and stepping, keep the connections open
	GarbageAfterSteps int  // send an undecodable output message instead of the step's
	ExitAfterSteps    int  // close every socket without a sentinel (a killed process)
	SkipRegistration  bool // never register on the input sockets
	SkipReady         bool // never send READY
	EmptyRegistration bool // register with an empty frame whatever the layout (a registration shape its layout does not have)
}

// Fault is a fault triggered at run time through Config.FaultNow.
type Fault int

// Faults that can be triggered at run time: the step after the trigger behaves as
// the matching Faults field says.
const (
	FaultDie     Fault = iota + 1 // ENGINE_CORE_DEAD, then exit (DieAfterSteps)
	FaultGarbage                  // undecodable outputs (GarbageAfterSteps)
	FaultStall                    // stop reading and stepping (StallAfterSteps)
)

// DefaultHandshakeAddress is where a mock engine looks for its frontend by
// default: vLLM's default --data-parallel-rpc-port on the loopback, so it joins
// `switchyard serve --handshake-address tcp://127.0.0.1:29550`. It is not serve's
// client port (5570), which speaks the msgpack client protocol, not the handshake.
const DefaultHandshakeAddress = "tcp://127.0.0.1:29550"

// DefaultConfig: rank 0 of 1, a step every 10 ms, one token per step.
func DefaultConfig() Config {
	return Config{
		HandshakeAddress: DefaultHandshakeAddress,
		DataParallelSize: 1,
		StepInterval:     10 * time.Millisecond,
		TokensPerStep:    1,
		MaxModelLen:      8192,
		MaxNumSeqs:       256,
		Script:           defaultScript.Load(),
	}
}

// Validate names the field at fault.
func (c Config) Validate() error {
	switch {
	case c.Rank < 0 || c.Rank > 65535:
		return fmt.Errorf("mockengine: config Rank %d out of range [0, 65535]", c.Rank)
	case c.DataParallelSize < 1 || c.Rank >= c.DataParallelSize:
		return fmt.Errorf("mockengine: config DataParallelSize %d must exceed Rank %d", c.DataParallelSize, c.Rank)
	case c.StepInterval <= 0:
		return errors.New("mockengine: config StepInterval must be positive")
	case c.TokensPerStep < 1:
		return errors.New("mockengine: config TokensPerStep must be at least 1")
	case c.LockstepDir != "" && c.DataParallelSize < 2:
		return errLockstepDir
	case c.HandshakeAddress == "" && (len(c.Inputs) == 0 || len(c.Outputs) == 0):
		return errors.New("mockengine: config needs HandshakeAddress, or Inputs and Outputs")
	case c.KVCacheBlocks < 0 || c.BlockSize < 0 || c.PrefillPerToken < 0:
		return fmt.Errorf("mockengine: config KVCacheBlocks %d, BlockSize %d, PrefillPerToken %v: none may be negative", c.KVCacheBlocks, c.BlockSize, c.PrefillPerToken)
	case c.KVEvents.Enabled() && c.KVCacheBlocks == 0:
		return errors.New("mockengine: config KVEvents needs a prefix cache (KVCacheBlocks > 0)")
	case c.KVEvents.Enabled():
		return c.KVEvents.validate(c.Rank, c.DataParallelSize)
	}
	return nil
}

// ErrFault is the cause of an exit requested through Faults.
var ErrFault = errors.New("mockengine: injected fault")

// Run runs the handshake, then the engine loop until ctx is done (a clean exit
// without sentinel, like SIGTERM: returns nil) or the engine dies (a fault, a
// duplicate request id, a message a real engine's input thread dies on, or an
// output without a socket: the sentinel is sent and the error returned).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Layout == nil {
		cfg.Layout = wire.Native()
	}
	e := &engine{cfg: cfg, start: time.Now(), id: wire.IdentityOf(cfg.Rank)}
	e.log = cfg.Logger
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.log = e.log.With("rank", cfg.Rank)
	e.net = cfg.Network
	if e.net == nil {
		e.net = transport.ZMQ
	}
	e.sched = NewScheduler(cfg.TokensPerStep, cfg.MaxModelLen, cfg.MaxNumSeqs)
	e.sched.Words, e.sched.Capitals, e.sched.Period = cfg.Words, cfg.Capitals, cfg.Period
	e.sched.Script = cfg.Script
	e.sched.Pooling = cfg.Pooling
	e.sched.Clock = e.timestamp
	if err := e.sched.SetRole(cfg.Role, fmt.Sprintf("mock-%s-%d", cfg.Role, cfg.Rank)); err != nil {
		return err
	}
	e.sched.EnableCache(CacheConfig{Blocks: cfg.KVCacheBlocks, BlockSize: cfg.BlockSize, PrefillPerToken: cfg.PrefillPerToken,
		Events: cfg.KVEvents.Enabled(), Counters: cfg.Cache})
	if cfg.KVEvents.Enabled() {
		// As vLLM's scheduler does, before the handshake: a subscriber may
		// connect as soon as the engine registers.
		kv, err := startKVPublisher(ctx, e.net, cfg.KVEvents, cfg.Rank, e.kvEncoding(), cfg.KVHashBytes, e.log)
		if err != nil {
			return err
		}
		defer kv.close()
		e.kv = kv
	}
	defer e.closeAll()
	if cfg.LockstepDir != "" {
		ls, err := startLockstep(ctx, cfg.LockstepDir, cfg.Rank, cfg.DataParallelSize, e.log)
		if err != nil {
			return err
		}
		defer ls.close()
		e.lock = ls
	}
	if err := e.connect(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return e.loop(ctx)
}

// engine is the edge around the Scheduler: sockets, the handshake and the loop
// state. Coordinator support (waves) plugs in here: coordinatorInput/Output come
// from INIT, and START_DP_WAVE reaches handleStartDPWave.
type engine struct {
	cfg   Config
	log   *slog.Logger
	net   transport.Network
	id    wire.Identity
	start time.Time

	hs   transport.Socket
	ins  []transport.Socket
	outs []transport.Socket

	coordinatorInput, coordinatorOutput wire.OptString
	wave                                waveState // wave.go
	lock                                *lockstep // lockstep.go; nil = independent rank

	sched    *Scheduler
	kv       *kvPublisher // nil = no KV events
	kvEvents []CacheEvent // reused between steps
	steps    int          // steps that produced output
	sleeping bool
	buf      []byte
	pending  []Output
	loras    map[int64]string // lora_int_id -> name of the adapters add_lora loaded (lora.go)
}

// opts: a small receive queue, so an engine that stops reading (the stall fault)
// pushes back on the frontend after a few messages instead of buffering hundreds.
func (e *engine) opts() transport.Options {
	return transport.Options{Identity: e.id.Bytes(), DialTimeout: 30 * time.Second, RecvQueue: 8, Logger: e.log}
}

// dialHandshake connects to the handshake address, retrying a connection the
// frontend refuses during the ZMTP handshake (its identity still held by
// another connection) every 100 ms for up to 30 s, as libzmq reconnects a
// vLLM engine's handshake socket with its HELLO still queued.
func (e *engine) dialHandshake(ctx context.Context) (transport.Socket, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		hs, err := e.net.Dial(ctx, transport.Dealer, e.cfg.HandshakeAddress, e.opts())
		if err == nil || ctx.Err() != nil {
			return hs, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// notHandshake explains an undecodable answer to HELLO: the usual cause is an
// engine pointed at a frontend's msgpack client port (serve --client-address),
// which answers a HELLO with an InvalidMessage error rather than an INIT.
func notHandshake(addr string, frames [][]byte, err error) error {
	for _, f := range frames {
		if bytes.Contains(f, []byte("InvalidMessage")) {
			return fmt.Errorf("mockengine: %s is a msgpack client port (switchyard serve --client-address), not a handshake address: "+
				"point --handshake-address at serve's --handshake-address (default %s)", addr, DefaultHandshakeAddress)
		}
	}
	return fmt.Errorf("mockengine: %s answered HELLO with no handshake INIT (is it a frontend's handshake address, serve --handshake-address?): %w", addr, err)
}

// connect does what EngineCoreProc does at startup: HELLO, INIT, DEALER to every
// input and PUSH to every output, one registration per input, READY.
func (e *engine) connect(ctx context.Context) error {
	inputs, outputs := e.cfg.Inputs, e.cfg.Outputs
	if e.cfg.HandshakeAddress != "" {
		hs, err := e.dialHandshake(ctx)
		if err != nil {
			return fmt.Errorf("mockengine: handshake: %w", err)
		}
		e.hs = hs
		hello := wire.HandshakeStatus{Status: "HELLO", Headless: true}
		if err := hs.Send(wire.AppendHandshakeStatus(nil, &hello)); err != nil {
			return fmt.Errorf("mockengine: HELLO: %w", err)
		}
		frames, err := recvCtx(ctx, hs)
		if err != nil {
			return fmt.Errorf("mockengine: waiting for INIT: %w", err)
		}
		init, err := wire.DecodeInit(frames[0])
		if err != nil {
			return notHandshake(e.cfg.HandshakeAddress, frames, err)
		}
		inputs, outputs = init.Addresses.Inputs, init.Addresses.Outputs
		e.coordinatorInput, e.coordinatorOutput = init.Addresses.CoordinatorInput, init.Addresses.CoordinatorOutput
	}
	for _, addr := range outputs {
		s, err := e.dialPeer(ctx, transport.Push, addr, nil)
		if err != nil {
			return fmt.Errorf("mockengine: output %s: %w", addr, err)
		}
		e.outs = append(e.outs, s)
	}
	reg := e.readyResponse()
	for _, addr := range inputs {
		s, err := e.dialPeer(ctx, transport.Dealer, addr, func(s transport.Socket) error {
			if e.cfg.Reregister && !e.cfg.Faults.SkipRegistration {
				return s.Send(e.registration(&reg))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("mockengine: input %s: %w", addr, err)
		}
		e.ins = append(e.ins, s)
		if e.cfg.Faults.SkipRegistration {
			continue
		}
		if err := s.Send(e.registration(&reg)); err != nil {
			return fmt.Errorf("mockengine: registration on %s: %w", addr, err)
		}
	}
	if err := e.joinCoordinator(ctx); err != nil {
		return err
	}
	if e.hs != nil && !e.cfg.Faults.SkipReady {
		// As core.py builds it: older releases add num_gpu_blocks and
		// dp_stats_address; with DP > 1, the parallel config's hash.
		ready := wire.HandshakeStatus{Status: "READY", Headless: true, NumGPUBlocks: wire.SomeInt(e.numGPUBlocks())}
		if e.cfg.DataParallelSize > 1 {
			ready.ParallelConfigHash = wire.SomeString("mock-parallel-config")
		}
		if err := e.hs.Send(wire.AppendReady(nil, e.cfg.Layout, &ready)); err != nil {
			return fmt.Errorf("mockengine: READY: %w", err)
		}
		// Like the engine, close the handshake socket once READY is out.
		e.hs.Close()
		e.hs = nil
	}
	e.log.Info("mockengine: ready", "inputs", inputs, "outputs", outputs, "layout", e.cfg.Layout.String())
	return nil
}

// registration is the input-socket registration frame of the engine's layout.
func (e *engine) registration(r *wire.ReadyResponse) []byte {
	if e.cfg.Faults.EmptyRegistration {
		return nil
	}
	return wire.AppendRegistration(nil, e.cfg.Layout, r)
}

func (e *engine) readyResponse() wire.ReadyResponse {
	r := wire.ReadyResponse{
		MaxModelLen:          wire.SomeInt(int64(e.cfg.MaxModelLen)),
		NumGPUBlocks:         wire.SomeInt(e.numGPUBlocks()),
		BlockSize:            wire.SomeInt(int64(e.blockSize())),
		DType:                wire.SomeString("bfloat16"),
		VLLMVersion:          optVersion(e.cfg.Layout.VLLMVersion),
		WorldSize:            wire.SomeInt(1),
		DataParallelSize:     wire.SomeInt(int64(e.cfg.DataParallelSize)),
		TensorParallelSize:   wire.SomeInt(1),
		PipelineParallelSize: wire.SomeInt(1),
		DataParallelRank:     wire.SomeInt(int64(e.cfg.Rank)),
		MaxNumSeqs:           wire.SomeInt(int64(e.cfg.MaxNumSeqs)),
		MaxNumBatchedTokens:  wire.SomeInt(8192),
		SupportsLoRA:         wire.OptBool{Value: e.cfg.MaxLoRAs > 0, Valid: true},
		EnableSleepMode:      wire.OptBool{Value: true, Valid: true},
	}
	if e.cfg.MaxLoRAs > 0 {
		r.MaxLoRAs = wire.SomeInt(int64(e.cfg.MaxLoRAs))
	}
	if e.cfg.KVEvents != (KVEventsConfig{}) {
		// Written only by layouts whose registration has the key (newest).
		if raw, err := e.cfg.KVEvents.registration(); err == nil {
			r.KVEventsConfig = raw
		}
	}
	return r
}

// numGPUBlocks is the cache's capacity, or the 4096 the mock always reported.
func (e *engine) numGPUBlocks() int64 {
	if e.cfg.KVCacheBlocks > 0 {
		return int64(e.cfg.KVCacheBlocks)
	}
	return 4096
}

func (e *engine) blockSize() int {
	if e.cfg.BlockSize > 0 {
		return e.cfg.BlockSize
	}
	return DefaultBlockSize
}

// kvEncoding is how the engine's release encodes KV events; a layout file not
// named after a built-in release gets the newest encoding.
func (e *engine) kvEncoding() wire.KVEncoding {
	if enc, ok := wire.KVEncodingForLayout(e.cfg.Layout.Name); ok {
		return enc
	}
	e.log.Warn("mockengine: no KV event encoding known for the layout; publishing the newest", "layout", e.cfg.Layout.String())
	return wire.KVEncodingMap
}

// now is the engine's scheduler time: the time since it started.
func (e *engine) now() time.Duration { return time.Since(e.start) }

func recvCtx(ctx context.Context, s transport.Socket) ([][]byte, error) {
	type res struct {
		f   [][]byte
		err error
	}
	ch := make(chan res, 1)
	go func() { f, err := s.Recv(); ch <- res{f, err} }()
	select {
	case r := <-ch:
		return r.f, r.err
	case <-ctx.Done():
		s.Close() // unblocks the Recv above
		<-ch
		return nil, ctx.Err()
	}
}

func (e *engine) closeAll() {
	if e.hs != nil {
		e.hs.Close()
	}
	for _, s := range e.ins {
		s.Close()
	}
	for _, s := range e.outs {
		s.Close()
	}
	e.closeCoordinator()
}

// die sends ENGINE_CORE_DEAD to every output, as the engine's output thread does,
// and returns cause.
func (e *engine) die(cause error) error {
	e.log.Warn("mockengine: dying", "cause", cause)
	for _, s := range e.outs {
		s.Send(wire.EngineCoreDead)
	}
	return cause
}

func (e *engine) timestamp() float64 { return 1000 + time.Since(e.start).Seconds() }

func optVersion(v string) wire.OptString {
	if v == "" {
		return wire.OptString{}
	}
	return wire.SomeString(v)
}
