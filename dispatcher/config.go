package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/switchyard-llm/switchyard/internal/vllmmetrics"
	"github.com/switchyard-llm/switchyard/wire"
)

// Sender hands frames to an engine. The frontend implements it with one writer
// goroutine per engine. Send does not block for long (an ADD into a full queue
// may wait for room, see ClientSender); ownership of body passes to the Sender
// (it calls wire.PutBuffer(body) after the write), so the dispatcher encodes into
// wire.GetBuffer() and never touches body again. Frames sent to one rank are written
// in Send order. An error means "this engine cannot take it" (dead or stuck): the
// dispatcher fails that request or call and marks nothing else; the frontend reports
// the engine's state through EngineDown.
type Sender interface {
	Send(rank int, typ byte, body []byte, aux [][]byte) error
}

// ClientSender is what a Sender may also offer: an ADD that waits while its
// engine's queue is full (backpressure, bounded by ctx and the sender's own
// limit), sharing the queue fairly between clients, so one client's burst
// queues behind itself instead of failing other clients' requests. The
// dispatcher uses it for ADDs when the Sender has it; the client key comes
// from WithClient, else every request is a client of its own.
type ClientSender interface {
	SendFrom(ctx context.Context, client uint64, rank int, typ byte, body []byte, aux [][]byte) error
}

type clientKey struct{}

// WithClient returns a ctx naming the client that submits with it, for the
// fair share of engine queues (see ClientSender). A server passes one key
// per connection: all of that connection's requests then share one share.
func WithClient(ctx context.Context, client uint64) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

type callerAbortsKey struct{}

// WithCallerAborts returns a ctx for a caller that closes every Stream it
// submits under ctx as soon as ctx ends (an HTTP handler that returns when its
// client leaves and closes its streams in a defer): Submit then does not watch
// ctx itself. The watch is a registration with ctx at the submit and its removal
// at the finish, on the engine's output goroutine, which every request's output
// waits behind; the caller's own Close makes both redundant. ctx still bounds
// the wait for room in a full engine queue.
func WithCallerAborts(ctx context.Context) context.Context {
	return context.WithValue(ctx, callerAbortsKey{}, true)
}

func callerAborts(ctx context.Context) bool {
	v, _ := ctx.Value(callerAbortsKey{}).(bool)
	return v
}

type parentKey struct{}

// WithParent returns a ctx whose submissions are choices of one client request
// the caller fanned out (vllmmetrics.Parent): the vllm:* series record the
// request, not each choice, for its n and its longest choice.
func WithParent(ctx context.Context, p *vllmmetrics.Parent) context.Context {
	return context.WithValue(ctx, parentKey{}, p)
}

func parentOf(ctx context.Context) *vllmmetrics.Parent {
	if ctx == nil {
		return nil
	}
	p, _ := ctx.Value(parentKey{}).(*vllmmetrics.Parent)
	return p
}

func clientOf(ctx context.Context) (uint64, bool) {
	c, ok := ctx.Value(clientKey{}).(uint64)
	return c, ok
}

// WaveHook lets the coordinator stamp current_wave on each ADD (and wake paused
// engines). OnAdd is called once per ADD, just before it is encoded, from the
// submitting goroutine; it must not block.
type WaveHook interface {
	OnAdd(rank int) (currentWave int64)
}

// Rank-choice policies (Config.Policy).
const (
	PolicyLeastLoaded = "least-loaded"
	PolicyPowerOfTwo  = "power-of-two"
	PolicyRoundRobin  = "round-robin"
	// PolicyKV and PolicyPrefix choose by the prefix cache each engine holds
	// (Config.CacheRouter), trading it against load; without a cache hit they
	// choose as PolicyLeastLoaded does.
	PolicyKV     = "kv"
	PolicyPrefix = "prefix"
)

// CacheRouter chooses an engine by the prefix cache it holds for a request's prompt
// (the kv and prefix policies). It is asked for every request that pins no rank,
// from the submitting goroutine, so it must be quick and must not block.
type CacheRouter interface {
	// Route returns the index in loads of the engine for req, or -1 to let the
	// least-loaded policy choose. Only loads[i].Ready entries may be returned;
	// seq is the dispatcher's per-request counter, for spreading ties.
	Route(req *wire.EngineCoreRequest, loads []Load, seq uint64) int
}

// Config configures a Dispatcher. Zero values mean the default where one is noted.
type Config struct {
	// Policy chooses the rank of a request that does not pin one: PolicyLeastLoaded
	// (default), PolicyPowerOfTwo, PolicyRoundRobin, or PolicyKV / PolicyPrefix,
	// which need CacheRouter. See README.md for the scores.
	Policy string
	// CacheRouter is consulted first, for requests that pin no rank, under the kv
	// and prefix policies; nil for the others, whose dispatch path it leaves as is.
	CacheRouter CacheRouter
	// LoRARouter, when set, is asked first for a request that carries a LoRA
	// adapter and pins no rank, under every policy: it may prefer the engines
	// that have the adapter loaded (-1 leaves the choice to the others).
	LoRARouter CacheRouter
	// StreamBuffer is how many unread outputs a Stream may hold before its request is
	// aborted as a slow consumer. 0 means 256.
	StreamBuffer int
	// UtilityTimeout bounds CallUtility when its context has no earlier deadline.
	// 0 means 60s.
	UtilityTimeout time.Duration
	// ClientIndex is stamped on every ADD and UTILITY; engines send replies to the
	// output socket with that index.
	ClientIndex int64
	// AbortOrphans aborts, at the engine, requests whose outputs arrive but
	// that this dispatcher does not know: with several frontends sharing
	// the engines, a restarted frontend gets the outputs of requests its
	// previous run sent, and nobody else would stop them.
	AbortOrphans bool
	// Waves stamps current_wave on ADDs; nil means no waves (current_wave 0).
	Waves WaveHook
	// LockstepRanks, when > 0, makes ranks 0..LockstepRanks-1 one lockstep group
	// (MoE data parallelism with waves): when one of them dies the whole group's
	// in-flight requests fail with *GroupBrokenError and new ones are refused
	// until every rank is up again. 0 = ranks are independent.
	LockstepRanks int
	// Logger receives cold-path events (engine up/down, dropped unknown ids); nil discards.
	Logger *slog.Logger
	// Registerer receives the switchyard_ metrics; nil means they are not registered.
	Registerer prometheus.Registerer
	// VLLM receives the vllm:* series (vLLM's own metrics, for its dashboards); nil
	// means they are not recorded.
	VLLM *vllmmetrics.Metrics
	// Now is the clock (ArrivalTime, latencies, LastOutput); nil means time.Now.
	Now func() time.Time
	// Seed pins the power-of-two policy's random choices (tests replay exactly).
	Seed uint64
	// StatsMaxAge: an engine's scheduler stats older than this no longer count in its
	// score (only our in-flight count does). A busy engine reports every step; an
	// idle one reports nothing, so its last report would otherwise stand forever.
	// 0 means 1s.
	StatsMaxAge time.Duration
	// StallTimeout: an engine with requests in flight that sends no output
	// and no scheduler stats for this long is stalled (stall.go): no new
	// work, its requests fail with *EngineStalledError, routable again when
	// it speaks. 0 = off (CheckStalls may still be called by hand).
	StallTimeout time.Duration
	// MaxMigrations is how many times one request may move to another rank when
	// its engine is lost (migrate.go). 0 means 3; negative turns migration off.
	MaxMigrations int
	// MigratePinned lets a request pinned with data_parallel_rank move too (to any
	// rank); by default it fails with its engine.
	MigratePinned bool
}

// DefaultConfig returns the configuration New uses for zero fields.
func DefaultConfig() Config {
	return Config{
		Policy:         PolicyLeastLoaded,
		StreamBuffer:   256,
		UtilityTimeout: 60 * time.Second,
		StatsMaxAge:    time.Second,
		MaxMigrations:  3,
	}
}

// Validate reports the first field that is out of range.
func (c Config) Validate() error {
	if _, err := parsePolicy(c.Policy); err != nil {
		return err
	}
	if (c.Policy == PolicyKV || c.Policy == PolicyPrefix) != (c.CacheRouter != nil) {
		return fmt.Errorf("dispatcher: config: Policy %q and a CacheRouter go together (kv and prefix need one; the others take none)", c.Policy)
	}
	if c.StreamBuffer < 0 {
		return fmt.Errorf("dispatcher: config: StreamBuffer %d must be >= 0", c.StreamBuffer)
	}
	if c.UtilityTimeout < 0 {
		return fmt.Errorf("dispatcher: config: UtilityTimeout %v must be >= 0", c.UtilityTimeout)
	}
	if c.StatsMaxAge < 0 {
		return fmt.Errorf("dispatcher: config: StatsMaxAge %v must be >= 0", c.StatsMaxAge)
	}
	if c.StallTimeout < 0 {
		return fmt.Errorf("dispatcher: config: StallTimeout %v must be >= 0", c.StallTimeout)
	}
	if c.LockstepRanks < 0 {
		return fmt.Errorf("dispatcher: config: LockstepRanks %d must be >= 0", c.LockstepRanks)
	}
	if c.ClientIndex < 0 {
		return fmt.Errorf("dispatcher: config: ClientIndex %d must be >= 0", c.ClientIndex)
	}
	return nil
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	def := DefaultConfig()
	if c.Policy == "" {
		c.Policy = def.Policy
	}
	if c.StreamBuffer == 0 {
		c.StreamBuffer = def.StreamBuffer
	}
	if c.UtilityTimeout == 0 {
		c.UtilityTimeout = def.UtilityTimeout
	}
	if c.StatsMaxAge == 0 {
		c.StatsMaxAge = def.StatsMaxAge
	}
	if c.MaxMigrations == 0 {
		c.MaxMigrations = def.MaxMigrations
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
