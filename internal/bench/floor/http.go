package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/internal/httpapi"
	"github.com/switchyard-llm/switchyard/wire"
)

// HTTPFloor is the HTTP baseline of `switchyard bench --http`: the least an HTTP
// frontend in Go can do for POST /v1/completions with token ids. It owns the engine
// handshake like the relay, decodes the body with encoding/json, writes the ADD to an
// engine (round-robin) from the handler's goroutine, and answers with the same JSON or
// SSE bytes switchyard writes. Outputs are decoded (the floor must know whose they
// are) by one receive goroutine and handed to the handler: once at the finish for a
// JSON answer, once per output for SSE. No validation, no request table beyond a map,
// no rank choice, no metrics: what switchyard pays above this is its own cost.
type HTTPFloor struct {
	httpFrontend
	mu      sync.Mutex
	reqs    map[string]*floorReq
	created int64
	typAdd  []byte
	bufs    sync.Pool
}

// floorReq is one request in flight: tokens gathered for a JSON answer, or a channel
// of outputs for SSE.
type floorReq struct {
	stream bool
	tokens []int64
	finish wire.FinishReason
	done   chan struct{}              // JSON: closed at the finish
	outs   chan wire.EngineCoreOutput // SSE: one per output
}

// StartHTTPFloor binds the floor's sockets and serves HTTP once AwaitEngines is done.
func StartHTTPFloor(ctx context.Context, lay *wire.Layout, a HTTPFloorAddrs) (*HTTPFloor, error) {
	f := &HTTPFloor{reqs: map[string]*floorReq{}, created: time.Now().Unix(), typAdd: []byte{wire.RequestAdd}}
	f.bufs.New = func() any { b := make([]byte, 0, 1024); return &b }
	if err := f.open(ctx, "bench http floor", lay, a); err != nil {
		return nil, err
	}
	return f, nil
}

// AwaitEngines runs the handshake with n engines, then starts the output receiver
// and the HTTP server.
func (f *HTTPFloor) AwaitEngines(ctx context.Context, n int) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", f.completions)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return f.serve(ctx, n, mux, f.deliver)
}

// floorBody is the part of the completion body the floor reads.
type floorBody struct {
	Model     string  `json:"model"`
	Prompt    []int64 `json:"prompt"`
	MaxTokens int64   `json:"max_tokens"`
	Stream    bool    `json:"stream"`
	IgnoreEOS bool    `json:"ignore_eos"`
	RequestID string  `json:"request_id"`
}

func (f *HTTPFloor) completions(w http.ResponseWriter, r *http.Request) {
	var body floorBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Prompt) == 0 {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	if body.MaxTokens <= 0 {
		body.MaxTokens = 16
	}
	id := body.RequestID
	if id == "" {
		id = "cmpl-" + strconv.FormatUint(f.next.Load(), 10)
	}
	q := &floorReq{stream: body.Stream}
	if body.Stream {
		q.outs = make(chan wire.EngineCoreOutput, body.MaxTokens+1)
	} else {
		q.done = make(chan struct{})
	}
	f.mu.Lock()
	f.reqs[id] = q
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.reqs, id)
		f.mu.Unlock()
	}()
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(body.MaxTokens)
	sp.IgnoreEOS = body.IgnoreEOS
	sp.Normalize()
	req := wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: body.Prompt, Sampling: &sp,
		ArrivalTime: float64(time.Now().UnixNano()) / 1e9}
	bp := f.bufs.Get().(*[]byte)
	defer f.bufs.Put(bp)
	msg, aux, err := f.lay.AppendAdd((*bp)[:0], &req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	*bp = msg
	if err := f.in.Send(append([][]byte{f.nextEngine(), f.typAdd, msg}, aux...)...); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if body.Stream {
		f.stream(w, r, q, id, body, len(body.Prompt))
		return
	}
	select {
	case <-q.done:
	case <-r.Context().Done():
		return
	}
	resp := httpapi.CompletionResponse{ID: id, Object: "text_completion", Created: f.created, Model: body.Model,
		Choices: []httpapi.Choice{{TokenIDs: q.tokens, FinishReason: finishName(q.finish)}},
		Usage:   &httpapi.Usage{PromptTokens: len(body.Prompt), CompletionTokens: len(q.tokens), TotalTokens: len(body.Prompt) + len(q.tokens)}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// stream writes one SSE chunk per output, then [DONE].
func (f *HTTPFloor) stream(w http.ResponseWriter, r *http.Request, q *floorReq, id string, body floorBody, prompt int) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for {
		var o wire.EngineCoreOutput
		select {
		case o = <-q.outs:
		case <-r.Context().Done():
			return
		}
		ch := httpapi.CompletionResponse{ID: id, Object: "text_completion", Created: f.created, Model: body.Model,
			Choices: []httpapi.Choice{{TokenIDs: o.NewTokenIDs, FinishReason: finishName(o.FinishReason)}}}
		b, _ := json.Marshal(ch)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
		if o.Finished() {
			break
		}
	}
	if _, err := w.Write([]byte("data: [DONE]\n\n")); err == nil && fl != nil {
		fl.Flush()
	}
}

func finishName(r wire.FinishReason) *string {
	if r == wire.FinishNone {
		return nil
	}
	s := r.String()
	return &s
}

// deliver hands an output to its request: its tokens for a JSON answer, the output
// itself for SSE.
func (f *HTTPFloor) deliver(o *wire.EngineCoreOutput) {
	f.mu.Lock()
	q := f.reqs[o.RequestID]
	f.mu.Unlock()
	if q == nil {
		return
	}
	if q.stream {
		c := *o
		c.NewTokenIDs = append([]int64(nil), o.NewTokenIDs...) // the decoder reuses its arrays
		select {
		case q.outs <- c:
		default: // the handler is gone or far behind: the floor drops, it does not block
		}
		return
	}
	q.tokens = append(q.tokens, o.NewTokenIDs...)
	if o.Finished() {
		q.finish = o.FinishReason
		close(q.done)
	}
}
