package clientapi

// Client-protocol messages that are not plain outputs: UTILITY calls and replies,
// error messages, and the copy of an engine output under the client's id.

import (
	"context"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"
)

// DefaultUtilityMethods are the engine utility methods msgpack clients may call:
// those vLLM's own frontend calls (engine-protocol.md 3.8). ClientConfig.
// AllowUtilityMethods (--allow-utility-method) adds to them.
var DefaultUtilityMethods = []string{
	"get_supported_tasks", "profile", "reset_prefix_cache", "reset_mm_cache", "reset_encoder_cache",
	"sleep", "wake_up", "is_sleeping", "pause_scheduler", "resume_scheduler", "is_scheduler_paused",
	"add_lora", "remove_lora", "list_loras", "pin_lora", "execute_dummy_batch", "collective_rpc",
	"save_sharded_state", "set_weight_version", "get_weight_version", "get_kv_cache_group_metadata",
}

// utility runs one UTILITY call on its own goroutine (a call waits for every engine's
// reply) and answers with an EngineCoreOutputs carrying utility_output.
func (s *ClientServer) utility(c *client, body []byte) {
	_, callID, method, args, err := wire.DecodeUtility(body)
	if err != nil {
		s.sendError(c, "", ErrTypeInvalidMessage, "UTILITY: "+err.Error(), nil)
		return
	}
	if negativeCallID(body) {
		// vLLM's call ids are unsigned 64-bit; echoing -1 back as 2^64-1 would
		// resolve no call the client made.
		s.sendError(c, "", ErrTypeInvalidMessage, "UTILITY: call_id must be a non-negative integer (vLLM's call ids are unsigned 64-bit)", nil)
		return
	}
	if !s.utilAllowed[method] {
		// Nothing is sent: an engine runs some methods outside its error handling
		// (handle_fault_tolerance kills its input thread on bad arguments) and any
		// method of EngineCore, private ones included, is reachable by name. The
		// failed reply resolves the client's call; the error message says why.
		msg := fmt.Sprintf("method %q is not allowed: switchyard forwards only the utility methods vLLM's frontend calls, and those added with --allow-utility-method", method)
		s.replyUtility(c, callID, 0, fmt.Sprintf("Call to %s method failed: %s", method, msg), nil)
		s.sendError(c, "", ErrTypeUtilityFailed, msg, nil)
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
		rank, result, err := s.callUtility(s.ctx, method, args)
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
	s.queueLocked(c, outMsg{to: c.id, outs: &wire.EngineCoreOutputs{EngineIndex: int64(rank), UtilityOutput: u}})
}

// outBatch is one client's EngineCoreOutputs for one engine message, with the token
// ids of its outputs in one arena. Batches are recycled once the writer has encoded
// them, so a steady stream of engine messages allocates nothing per output (a fresh
// batch per message, its growing Outputs and a token slice per output were most of
// the client path's allocations).
type outBatch struct {
	wire.EngineCoreOutputs
	toks []int64
}

var batchPool = sync.Pool{New: func() any { return &outBatch{toks: make([]int64, 0, 256)} }}

func getBatch(rank int) *outBatch {
	b := batchPool.Get().(*outBatch)
	b.EngineIndex = int64(rank)
	return b
}

// putBatch clears b (dropping its references to ids and engine data) and pools it.
func putBatch(b *outBatch) {
	clear(b.Outputs)
	clear(b.FinishedRequests)
	toks, outs, fin := b.toks[:0], b.Outputs[:0], b.FinishedRequests[:0]
	*b = outBatch{toks: toks}
	b.Outputs, b.FinishedRequests = outs, fin
	batchPool.Put(b)
}

// add copies what a client needs of an engine output into the batch, under the
// client's own request id. The engine's slices are reused after deliver returns, so
// they are copied: token ids into the arena, the rare fields into their own memory.
func (b *outBatch) add(userID string, o *wire.EngineCoreOutput) {
	n := len(b.Outputs)
	if n < cap(b.Outputs) {
		b.Outputs = b.Outputs[:n+1] // zeroed by putBatch
	} else {
		b.Outputs = append(b.Outputs, wire.EngineCoreOutput{})
	}
	// Appending may move the arena; outputs added before keep the old array, which
	// still holds their tokens, so their windows stay valid.
	start := len(b.toks)
	b.toks = append(b.toks, o.NewTokenIDs...)
	c := &b.Outputs[n]
	c.RequestID = userID
	c.NewTokenIDs = b.toks[start:len(b.toks):len(b.toks)]
	c.FinishReason = o.FinishReason
	c.StopReason = o.StopReason
	c.NumNaNsInLogits = o.NumNaNsInLogits
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
func (s *ClientServer) callUtility(ctx context.Context, method string, args wire.Raw) (rank int, result wire.Raw, err error) {
	// The client's bytes go through as they are: decoding them to Go values and
	// encoding again would reorder maps and refuse int keys and ext values.
	res, err := s.d.CallUtilityRaw(ctx, method, args)
	if err != nil {
		return 0, nil, err
	}
	if len(res.Results) == 0 {
		return 0, nil, dispatcher.ErrNoEngines
	}
	first := res.Results[0]
	return first.Rank, first.Raw, nil
}
