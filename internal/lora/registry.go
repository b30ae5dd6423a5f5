package lora

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"
)

// Caller sends a utility call to engines, each with its own arguments
// (*dispatcher.Dispatcher).
type Caller interface {
	CallUtilityEach(ctx context.Context, method string, ranks []int, args dispatcher.UtilityArgs) (dispatcher.UtilityResults, error)
}

// Limits on what the load endpoint accepts: an adapter's name becomes a model
// name (and a metric label), its path goes to every engine.
const (
	MaxNameLen = 256
	MaxPathLen = 4096
	// MaxAdapters bounds the registry: every engine gets every adapter.
	MaxAdapters = 1024
)

// undoTimeout bounds the calls no client waits for: undoing a failed load, and
// sending the adapters to a joining engine.
const undoTimeout = 60 * time.Second

// Adapter is one adapter the frontend serves.
type Adapter struct {
	Name          string
	IntID         int64
	Path          string
	BaseModelName string // "" = the served model
	LoadInplace   bool
	// pending: add_lora is under way; not served until every engine agreed.
	pending bool
}

// Request is the LoRARequest sent with a request for the adapter.
func (a *Adapter) Request() *wire.LoRARequest {
	lr := &wire.LoRARequest{Name: a.Name, IntID: a.IntID, Path: a.Path, LoadInplace: a.LoadInplace}
	if a.BaseModelName != "" {
		lr.BaseModelName = wire.SomeString(a.BaseModelName)
	}
	return lr
}

// Error is a refused load or unload: vLLM's status, error type and text.
type Error struct {
	Status  int
	Type    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// Registry holds the adapters and pushes them to the engines. Its methods are
// safe for concurrent use.
type Registry struct {
	caller Caller
	base   string
	log    *slog.Logger

	ops    sync.Mutex // one load or unload at a time, as vLLM's per-name lock (simpler)
	mu     sync.Mutex // guards the fields below
	byN    map[string]*Adapter
	next   int64
	closed bool // no more pushes to joining engines

	// pushes are EngineUp's goroutines; Close cancels stop and joins them.
	pushes sync.WaitGroup
	stop   context.Context
	cancel context.CancelFunc
}

// Config configures New.
type Config struct {
	Caller Caller
	// BaseModel is the served model's name: an adapter's parent, and the only
	// base_model_name an adapter may carry to the engines.
	BaseModel string
	// Static are --lora-modules: served from the start, sent to each engine as it
	// comes up.
	Static []Module
	Logger *slog.Logger
}

// New builds the registry with the static adapters (ids 1..N in flag order).
func New(cfg Config) (*Registry, error) {
	r := &Registry{caller: cfg.Caller, base: cfg.BaseModel, log: cfg.Logger, byN: map[string]*Adapter{}}
	r.stop, r.cancel = context.WithCancel(context.Background())
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	for _, m := range cfg.Static {
		if _, dup := r.byN[m.Name]; dup {
			return nil, fmt.Errorf("--lora-modules: adapter %q given twice", m.Name)
		}
		if m.Name == r.base {
			return nil, fmt.Errorf("--lora-modules: adapter %q has the served model's name", m.Name)
		}
		r.next++
		a := &Adapter{Name: m.Name, IntID: r.next, Path: m.Path}
		if m.BaseModelName == r.base { // vLLM keeps it only when it names a base model
			a.BaseModelName = m.BaseModelName
		}
		r.byN[m.Name] = a
	}
	return r, nil
}

// Lookup returns the LoRARequest of the adapter named name, if it is served.
func (r *Registry) Lookup(name string) (*wire.LoRARequest, bool) {
	if r == nil || name == "" {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.byN[name]
	if !ok || a.pending {
		return nil, false
	}
	return a.Request(), true
}

// List returns the served adapters in lora_int_id order.
func (r *Registry) List() []Adapter {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	out := make([]Adapter, 0, len(r.byN))
	for _, a := range r.byN {
		if !a.pending {
			out = append(out, *a)
		}
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Adapter) int { return int(a.IntID - b.IntID) })
	return out
}

// BaseModel is the served model's name (an adapter's parent in /v1/models).
func (r *Registry) BaseModel() string { return r.base }

// LoadRequest is vLLM's LoadLoRAAdapterRequest.
type LoadRequest struct {
	Name, Path  string
	LoadInplace bool
}

// Load adds an adapter and sends add_lora to every ready engine; it is served
// once all of them agreed. A failure of any engine undoes it (remove_lora on the
// engines that took it) and names the engines.
func (r *Registry) Load(ctx context.Context, req LoadRequest) (string, *Error) {
	if req.Name == "" || req.Path == "" {
		return "", &Error{http.StatusBadRequest, "InvalidUserInput", "Both 'lora_name' and 'lora_path' must be provided."}
	}
	if len(req.Name) > MaxNameLen || len(req.Path) > MaxPathLen {
		return "", &Error{http.StatusBadRequest, "InvalidUserInput",
			fmt.Sprintf("lora_name is limited to %d bytes and lora_path to %d", MaxNameLen, MaxPathLen)}
	}
	if req.Name == r.base {
		return "", &Error{http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("'%s' is the served model's name", req.Name)}
	}
	r.ops.Lock()
	defer r.ops.Unlock()
	r.mu.Lock()
	old, exists := r.byN[req.Name]
	if exists && !req.LoadInplace {
		r.mu.Unlock()
		return "", &Error{http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("The lora adapter '%s' has already been loaded. "+
			"If you want to load the adapter in place, set 'load_inplace' to True.", req.Name)}
	}
	if !exists && len(r.byN) >= MaxAdapters {
		r.mu.Unlock()
		return "", &Error{http.StatusBadRequest, "InvalidUserInput", fmt.Sprintf("%d adapters are loaded, the limit", MaxAdapters)}
	}
	a := &Adapter{Name: req.Name, Path: req.Path, LoadInplace: req.LoadInplace, pending: true}
	if exists {
		a.IntID = old.IntID
	} else {
		r.next++
		a.IntID = r.next
		// Pending, so that an engine joining during the call gets it too (EngineUp).
		r.byN[a.Name] = a
	}
	r.mu.Unlock()

	res, err := partakers(r.caller.CallUtilityEach(ctx, "add_lora", nil, argsOf(a.Request())))
	if err != nil {
		r.mu.Lock()
		if !exists {
			delete(r.byN, a.Name)
		}
		r.mu.Unlock()
		r.undo(a, res)
		return "", loadError(a, err)
	}
	r.mu.Lock()
	a.pending = false
	r.byN[a.Name] = a
	r.mu.Unlock()
	r.log.Info("Loaded new LoRA adapter", "name", a.Name, "path", a.Path, "lora_int_id", a.IntID, "engines", len(res.Results))
	return fmt.Sprintf("Success: LoRA adapter '%s' added successfully.", a.Name), nil
}

// undo removes a new adapter from the engines that took it.
func (r *Registry) undo(a *Adapter, res dispatcher.UtilityResults) {
	var took []int
	for _, x := range res.Results {
		if x.Err == nil {
			took = append(took, x.Rank)
		}
	}
	if len(took) == 0 || a.LoadInplace {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	if _, err := partakers(r.caller.CallUtilityEach(ctx, "remove_lora", took, intArg(a.IntID))); err != nil {
		r.log.Warn("LoRA adapter: undoing a failed load", "name", a.Name, "err", err)
	}
}

// loadError is the answer to a failed add_lora: vLLM's 404 when an engine found
// no adapter at the path, else a 500 with the engines' failures.
func loadError(a *Adapter, err error) *Error {
	if errors.Is(err, dispatcher.ErrNoEngines) {
		return &Error{http.StatusServiceUnavailable, "ServiceUnavailableError", "no engine is connected and ready to load the adapter"}
	}
	notFound := fmt.Sprintf("Loading lora %s failed: No adapter found for %s", a.Name, a.Path)
	if strings.Contains(err.Error(), notFound) {
		return &Error{http.StatusNotFound, "NotFoundError", notFound}
	}
	return &Error{http.StatusInternalServerError, "InternalServerError", err.Error()}
}

// UnloadRequest is vLLM's UnloadLoRAAdapterRequest (lora_int_id, which vLLM
// ignores, is not kept).
type UnloadRequest struct{ Name string }

// Unload sends remove_lora to every ready engine. It fails when any engine
// refused (naming which); the adapter stays served only when none removed it.
func (r *Registry) Unload(ctx context.Context, req UnloadRequest) (string, *Error) {
	if req.Name == "" {
		return "", &Error{http.StatusBadRequest, "InvalidUserInput", "'lora_name' needs to be provided to unload a LoRA adapter."}
	}
	r.ops.Lock()
	defer r.ops.Unlock()
	r.mu.Lock()
	a, ok := r.byN[req.Name]
	r.mu.Unlock()
	if !ok || a.pending {
		return "", &Error{http.StatusNotFound, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", req.Name)}
	}
	res, err := partakers(r.caller.CallUtilityEach(ctx, "remove_lora", nil, intArg(a.IntID)))
	if errors.Is(err, dispatcher.ErrNoEngines) || errors.Is(err, errNoLoRAEngine) {
		err = nil // nothing holds it: engines that come later are not sent it
	}
	var failed []string
	removed := 0
	for _, x := range res.Results {
		switch {
		case x.Err != nil:
			failed = append(failed, x.Err.Error())
		case x.Value != true:
			failed = append(failed, fmt.Sprintf("engine rank %d: remove_lora returned %v", x.Rank, x.Value))
		default:
			removed++
		}
	}
	if err != nil && len(failed) == 0 {
		failed = append(failed, err.Error())
	}
	if len(failed) > 0 && removed == 0 && len(res.Results) > 0 {
		return "", &Error{http.StatusInternalServerError, "InternalServerError",
			fmt.Sprintf("Failed to remove lora adapter '%s' from the engine. (%s)", req.Name, strings.Join(failed, "; "))}
	}
	r.mu.Lock()
	delete(r.byN, req.Name)
	r.mu.Unlock()
	if len(failed) > 0 {
		return "", &Error{http.StatusInternalServerError, "InternalServerError",
			fmt.Sprintf("Failed to remove lora adapter '%s' from every engine; it is no longer served. (%s)", req.Name, strings.Join(failed, "; "))}
	}
	r.log.Info("Removed LoRA adapter", "name", req.Name)
	return fmt.Sprintf("Success: LoRA adapter '%s' removed successfully.", req.Name), nil
}

// EngineUp sends every adapter (static, loaded, and one being loaded) to rank,
// in the background: an engine that joins or restarts holds none. A request
// for an adapter the engine has not taken yet still works: vLLM's engine loads
// it from the request's lora_path. Close ends and joins these pushes.
func (r *Registry) EngineUp(rank int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	all := make([]Adapter, 0, len(r.byN))
	for _, a := range r.byN {
		all = append(all, *a)
	}
	closed := r.closed
	if !closed && len(all) > 0 {
		r.pushes.Add(1) // under mu, so Close cannot have begun its Wait
	}
	r.mu.Unlock()
	if closed || len(all) == 0 {
		return
	}
	slices.SortFunc(all, func(a, b Adapter) int { return int(a.IntID - b.IntID) })
	go func() {
		defer r.pushes.Done()
		for i := range all {
			ctx, cancel := context.WithTimeout(r.stop, undoTimeout)
			_, err := partakers(r.caller.CallUtilityEach(ctx, "add_lora", []int{rank}, argsOf(all[i].Request())))
			cancel()
			if r.stop.Err() != nil {
				return // closing: the engines are going too
			}
			if errors.Is(err, errNoLoRAEngine) {
				r.log.Info("engine takes no LoRA adapters: its release's LoRARequest fields are unknown", "rank", rank)
				return
			}
			if err != nil {
				r.log.Warn("LoRA adapter not sent to a joining engine (its requests still load it from lora_path)",
					"rank", rank, "name", all[i].Name, "err", err)
			}
		}
	}()
}

// Close ends the pushes to joining engines that are still running and waits for
// them; an EngineUp after it sends nothing. Safe on a nil registry and more than
// once.
func (r *Registry) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.pushes.Wait()
}

// argsOf encodes add_lora's argument in each engine's layout. An engine whose
// layout lacks LoRARequest's fields is not called (a *wire.LayoutError in its
// slot): it is never sent a LoRA request either (the dispatcher skips it).
func argsOf(lr *wire.LoRARequest) dispatcher.UtilityArgs {
	return func(_ int, l *wire.Layout) (wire.Raw, error) {
		return l.AppendLoRAArgs(nil, lr)
	}
}

// intArg is the argument array [id] of remove_lora, for the engines that can
// hold an adapter.
func intArg(id int64) dispatcher.UtilityArgs {
	raw := wire.Raw(appendIntArg(nil, id))
	return func(_ int, l *wire.Layout) (wire.Raw, error) {
		if !l.HasLoRA() {
			return nil, &wire.LayoutError{Layout: l.Name, Field: "lora_request", Msg: "LoRARequest's fields are not known for this vLLM release"}
		}
		return raw, nil
	}
}

// skipped reports whether an engine's slot failed only because its layout
// cannot carry LoRA: such engines take no part.
func skipped(x dispatcher.UtilityResult) bool {
	var le *wire.LayoutError
	return x.Err != nil && errors.As(x.Err, &le)
}

// errNoLoRAEngine: every ready engine's release has unknown LoRARequest fields.
var errNoLoRAEngine = errors.New("no ready engine can take LoRA adapters: their vLLM releases' LoRARequest fields are unknown; " +
	"load a layout file generated from their classes (switchyard vllm-layout-script)")

// partakers drops the skipped engines' slots from res; the error is then that of
// the others (a missing answer stays one), or errNoLoRAEngine when none is left.
func partakers(res dispatcher.UtilityResults, err error) (dispatcher.UtilityResults, error) {
	if err == nil || errors.Is(err, dispatcher.ErrNoEngines) {
		return res, err
	}
	kept := make([]dispatcher.UtilityResult, 0, len(res.Results))
	for _, x := range res.Results {
		if !skipped(x) {
			kept = append(kept, x)
		}
	}
	res.Results = kept
	var timeout *dispatcher.UtilityTimeoutError
	switch {
	case errors.As(err, &timeout), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return res, err
	case len(kept) == 0:
		return res, errNoLoRAEngine
	}
	return res, res.Err()
}

// appendIntArg writes the one-element array [id] (id >= 1, as ours are).
func appendIntArg(b []byte, id int64) []byte {
	b = append(b, 0x91)
	switch {
	case id < 128:
		return append(b, byte(id))
	case id <= 0xffff:
		return append(b, 0xcd, byte(id>>8), byte(id))
	}
	return append(b, 0xd3, byte(id>>56), byte(id>>48), byte(id>>40), byte(id>>32), byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}
