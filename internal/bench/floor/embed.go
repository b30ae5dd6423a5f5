package floor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// EmbedFloor is the baseline of `switchyard bench --workload embed`: the least an
// HTTP frontend in Go can do for POST /v1/embeddings with token-id inputs. It owns
// the engine handshake, decodes the body with encoding/json, sends one pooling ADD
// per input (round-robin over the engines), waits for every pooling output, reads
// each tensor as float32s and answers with encoding/json. No validation beyond the
// tensor read, no tasks check, no rank choice, no metrics.
type EmbedFloor struct {
	lay         *wire.Layout
	hs, in, out transport.Socket
	ln          net.Listener
	srv         *http.Server
	engines     [][]byte
	next        atomic.Uint64
	mu          sync.Mutex
	reqs        map[string]chan *wire.Tensor
	wg          sync.WaitGroup
	closeOnce   sync.Once
}

// StartEmbedFloor binds the floor's sockets; it serves once AwaitEngines is done.
func StartEmbedFloor(ctx context.Context, lay *wire.Layout, a HTTPFloorAddrs) (*EmbedFloor, error) {
	if lay == nil {
		lay = wire.Native()
	}
	f := &EmbedFloor{lay: lay, reqs: map[string]chan *wire.Tensor{}}
	var err error
	open := func(kind transport.Kind, ep string) transport.Socket {
		if err != nil {
			return nil
		}
		var s transport.Socket
		s, err = transport.ZMQ.Listen(ctx, kind, ep, transport.Options{})
		return s
	}
	f.in = open(transport.Router, a.Input)
	f.out = open(transport.Pull, a.Output)
	f.hs = open(transport.Router, a.Handshake)
	if err == nil {
		f.ln, err = net.Listen("tcp", a.HTTP)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("bench embed floor: %w", err)
	}
	return f, nil
}

// HandshakeAddr is where engines connect.
func (f *EmbedFloor) HandshakeAddr() string { return f.hs.Addr() }

// HTTPAddr is the bound HTTP address (host:port).
func (f *EmbedFloor) HTTPAddr() string { return f.ln.Addr().String() }

// AwaitEngines runs the handshake with n engines, then serves.
func (f *EmbedFloor) AwaitEngines(ctx context.Context, n int) error {
	if err := acceptEngines(ctx, f.hs, f.in, n, f.in.Addr(), f.out.Addr()); err != nil {
		return fmt.Errorf("bench embed floor: %w", err)
	}
	for i := range n {
		f.engines = append(f.engines, wire.IdentityOf(i).Bytes())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", f.embeddings)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	f.wg.Add(2)
	go f.receive()
	go func() {
		defer f.wg.Done()
		_ = f.srv.Serve(f.ln)
	}()
	return nil
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
		eng := f.engines[f.next.Add(1)%uint64(len(f.engines))]
		if err := f.in.Send(append([][]byte{eng, {wire.RequestAdd}, msg}, aux...)...); err != nil {
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

func (f *EmbedFloor) receive() {
	defer f.wg.Done()
	dec := wire.OutputsDecoder{Layout: f.lay}
	var outs wire.EngineCoreOutputs
	for {
		msg, err := f.out.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			continue
		}
		if err != nil {
			return
		}
		if err := dec.Decode(msg, &outs); err != nil {
			continue
		}
		for i := range outs.Outputs {
			o := &outs.Outputs[i]
			if !o.Finished() {
				continue
			}
			f.mu.Lock()
			c := f.reqs[o.RequestID]
			f.mu.Unlock()
			if c == nil {
				continue
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
	}
}

// Close stops the HTTP server and closes the sockets.
func (f *EmbedFloor) Close() error {
	f.closeOnce.Do(func() {
		if f.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = f.srv.Shutdown(ctx)
			cancel()
		} else if f.ln != nil {
			f.ln.Close()
		}
		for _, s := range []transport.Socket{f.hs, f.in, f.out} {
			if s != nil {
				s.Close()
			}
		}
		f.wg.Wait()
	})
	return nil
}
