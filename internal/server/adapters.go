package server

// The adapters between components that cannot know each other: the frontend's
// events reach the dispatcher, the coordinator and the client protocol; the
// dispatcher sends through the frontend; the coordinator's loads reach the
// dispatcher. Each is set up by Start before the traffic it carries begins.

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/frontend"
	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/coordinator"
	"github.com/switchyard-llm/switchyard/internal/kvroute"
	"github.com/switchyard-llm/switchyard/internal/lora"
	"github.com/switchyard-llm/switchyard/wire"
)

// engineEvents adapts frontend.Handler to the dispatcher, the coordinator and the
// client protocol's batching.
type engineEvents struct {
	d       *dispatcher.Dispatcher
	node    *coordinator.Node
	clients atomic.Pointer[clientapi.ClientServer]
	// closing is set once the dispatcher has ended every request at shutdown: the
	// frontend then reports every engine down, which is no failure.
	closing atomic.Bool
	// contexts are the ready engines' registered max_model_len, for the HTTP
	// API's max_tokens check.
	contexts contextLens
	log      *slog.Logger
	// kv follows the pool's KV events and clears a rank's index when it comes
	// and goes; nil without cache-aware routing.
	kv *kvroute.Edge
	// maxModelLen caps the engines' registered context (--max-model-len); 0 = none.
	maxModelLen int64
	// lora and loraActivity are set with --enable-lora (lora.go).
	lora         *lora.Registry
	loraActivity *lora.Activity
}

func (h *engineEvents) HandleOutputs(rank int, outs *wire.EngineCoreOutputs) {
	h.loraOutputs(rank, outs)
	h.d.HandleOutputs(rank, outs)
	if c := h.clients.Load(); c != nil {
		c.EndBatch(rank)
	}
}

func (h *engineEvents) EngineUp(rank int, info frontend.EngineInfo) {
	lim := dispatcher.EngineLimits{Layout: info.Layout}
	if info.Ready.NumGPUBlocks.Valid {
		lim.NumGPUBlocks = info.Ready.NumGPUBlocks.Value
	}
	if info.Ready.MaxModelLen.Valid {
		lim.MaxModelLen = info.Ready.MaxModelLen.Value
		if lim.MaxModelLen <= 0 {
			// The dispatcher reads 0 as "unknown: anything fits"; an engine that
			// says its context holds nothing is broken, not unlimited. It is kept
			// out of routing, visibly (/v1/engines shows the cause).
			err := fmt.Errorf("engine registered max_model_len %d; it must be positive", lim.MaxModelLen)
			h.log.Error("refusing engine: invalid max_model_len", "rank", rank, "max_model_len", lim.MaxModelLen)
			// Known to the dispatcher (so /v1/engines shows why), but with a context
			// of 1 no prompt fits it between these two calls.
			h.d.EngineUpWith(rank, dispatcher.EngineLimits{MaxModelLen: 1})
			h.d.EngineDown(rank, err)
			h.contexts.set(rank, 0)
			return
		}
	}
	if h.maxModelLen > 0 && (lim.MaxModelLen == 0 || lim.MaxModelLen > h.maxModelLen) {
		lim.MaxModelLen = h.maxModelLen // --max-model-len: requests fit the smaller
	}
	h.contexts.set(rank, lim.MaxModelLen)
	if h.kv != nil {
		// Before the dispatcher routes to it: a rejoined engine's cache is empty.
		h.kv.EngineUp(rank, info)
	}
	h.d.EngineUpWith(rank, lim)
	h.loraEngineUp(rank)
	if h.node != nil {
		h.node.EngineReady(rank)
	}
}

// EngineRefused tells the dispatcher why rank's engine was refused before it
// came up, so a request pinned to that rank is told the reason, not only that
// the rank is not connected.
func (h *engineEvents) EngineRefused(rank int, err error) { h.d.EngineRefused(rank, err) }

var _ frontend.RefusalHandler = (*engineEvents)(nil)

func (h *engineEvents) EngineDown(rank int, err error) {
	if h.closing.Load() {
		return
	}
	h.contexts.set(rank, 0)
	h.d.EngineDown(rank, err)
	h.loraEngineDown(rank)
	if h.kv != nil {
		h.kv.EngineDown(rank)
	}
	if c := h.clients.Load(); c != nil {
		c.SealBatchDown(rank) // never stall: the frontend's control loop is waiting
	}
}

// frontendSender is the dispatcher's Sender, set once the frontend exists (the
// frontend needs the dispatcher's handler first).
type frontendSender struct {
	f atomic.Pointer[frontend.Frontend]
}

func (s *frontendSender) Send(rank int, typ byte, body []byte, aux [][]byte) error {
	f := s.f.Load()
	if f == nil {
		wire.PutBuffer(body)
		return dispatcher.ErrNoEngines
	}
	return f.Send(rank, typ, body, aux)
}

// SendFrom lets an ADD wait for room in a full engine queue, sharing it fairly
// between clients (dispatcher.ClientSender).
func (s *frontendSender) SendFrom(ctx context.Context, client uint64, rank int, typ byte, body []byte, aux [][]byte) error {
	f := s.f.Load()
	if f == nil {
		wire.PutBuffer(body)
		return dispatcher.ErrNoEngines
	}
	return f.SendFrom(ctx, client, rank, typ, body, aux)
}

// loadForward is the coordinator's LoadSink, set once the dispatcher exists.
type loadForward struct {
	d atomic.Pointer[dispatcher.Dispatcher]
}

func (l *loadForward) ObserveLoad(rank int, waiting, running int64, kv float64) {
	if d := l.d.Load(); d != nil {
		d.ObserveLoad(rank, waiting, running, kv)
	}
}
