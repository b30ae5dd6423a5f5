package floor

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// EmbedFloor is the baseline of `switchyard bench --workload embed`: the least an
// HTTP frontend in Go can do for POST /v1/embeddings with token-id inputs. It owns
// the engine handshake, decodes the body with encoding/json, sends one pooling ADD
// per input (round-robin over the engines), waits for every pooling output, reads
// each tensor as float32s and answers with encoding/json. No validation beyond the
// tensor read, no tasks check, no rank choice, no metrics.
type EmbedFloor struct {
	httpFrontend
	mu   sync.Mutex
	reqs map[string]chan *wire.Tensor
}

// StartEmbedFloor binds the floor's sockets; it serves once AwaitEngines is done.
func StartEmbedFloor(ctx context.Context, lay *wire.Layout, a HTTPFloorAddrs) (*EmbedFloor, error) {
	f := &EmbedFloor{reqs: map[string]chan *wire.Tensor{}}
	if err := f.open(ctx, "bench embed floor", lay, a); err != nil {
		return nil, err
	}
	return f, nil
}

// AwaitEngines runs the handshake with n engines, then serves.
func (f *EmbedFloor) AwaitEngines(ctx context.Context, n int) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", f.embeddings)
	return f.serve(ctx, n, mux, f.deliver)
}

type embedItem struct {
	Index     int       `json:"index"`
	Object    string    `json:"object"`
	Embedding []float64 `json:"embedding"`
}

func (f *EmbedFloor) embeddings(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Input [][]int64 `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Input) == 0 {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	base := "embd-" + strconv.FormatUint(f.next.Add(1), 10)
	chans := make([]chan *wire.Tensor, len(body.Input))
	defer func() {
		f.mu.Lock()
		for i := range chans {
			delete(f.reqs, base+"-"+strconv.Itoa(i))
		}
		f.mu.Unlock()
	}()
	tokens := 0
	for i, ids := range body.Input {
		id := base + "-" + strconv.Itoa(i)
		chans[i] = make(chan *wire.Tensor, 1)
		f.mu.Lock()
		f.reqs[id] = chans[i]
		f.mu.Unlock()
		req := wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: ids, ArrivalTime: float64(time.Now().UnixNano()) / 1e9,
			Pooling: &wire.PoolingParams{Task: "embed", Activation: wire.OptBool{Value: true, Valid: true}}}
		msg, aux, err := f.lay.AppendAdd(nil, &req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := f.in.Send(append([][]byte{f.nextEngine(), {wire.RequestAdd}, msg}, aux...)...); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		tokens += len(ids)
	}
	items := make([]embedItem, len(chans))
	for i, c := range chans {
		var t *wire.Tensor
		select {
		case t = <-c:
		case <-r.Context().Done():
			return
		}
		_, data, err := wire.PoolingFloats(t, 1<<24)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		v := make([]float64, len(data))
		for j, x := range data {
			v[j] = float64(x)
		}
		items[i] = embedItem{Index: i, Object: "embedding", Embedding: v}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": base, "object": "list", "model": "floor", "data": items,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// deliver hands a finished output's tensor to its request.
func (f *EmbedFloor) deliver(o *wire.EngineCoreOutput) {
	if !o.Finished() {
		return
	}
	f.mu.Lock()
	c := f.reqs[o.RequestID]
	f.mu.Unlock()
	if c == nil {
		return
	}
	var t *wire.Tensor
	if p := o.PoolingOutput; p != nil {
		cp := *p
		cp.Data = append([]byte(nil), p.Data...) // the decoder's frames are reused
		t = &cp
	}
	select {
	case c <- t:
	default:
	}
}
