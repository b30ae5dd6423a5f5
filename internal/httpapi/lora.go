package httpapi

// LoRA adapters (serve --enable-lora): a request whose model is an adapter's
// name goes to the engines with that adapter's LoRARequest; /v1/models lists the
// adapters; POST /v1/load_lora_adapter and /v1/unload_lora_adapter change them.
//
// vLLM registers the two endpoints only with VLLM_ALLOW_RUNTIME_LORA_UPDATING
// and warns that they are for local development: they change what every client
// of the model gets, and load files named by the caller onto the GPUs. Here they
// exist with --enable-lora and are admin endpoints: the admin guard (admin.go:
// the --admin-allow networks, loopback by default, and --admin-token) decides
// who may call them, not --api-key.

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/lora"
	"github.com/switchyard-llm/switchyard/wire"
)

// maxLoRABody bounds the load and unload bodies: two names and a path.
const maxLoRABody = 64 << 10

// loraPaths are the admin guard's LoRA endpoints (isAdminPath).
var loraPaths = map[string]bool{"/v1/load_lora_adapter": true, "/v1/unload_lora_adapter": true}

// handleLoRA registers the LoRA endpoints on mux when LoRA is on.
func (a *API) handleLoRA(mux *http.ServeMux) {
	if a.lora == nil {
		return
	}
	for p, h := range map[string]http.HandlerFunc{"/v1/load_lora_adapter": a.loadLoRA, "/v1/unload_lora_adapter": a.unloadLoRA} {
		mux.Handle("POST "+p, a.metrics.wrap("admin", a.admin.wrap(h)))
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, &APIError{Status: http.StatusMethodNotAllowed, Type: TypeMethodNotAllowed,
				Message: "method " + r.Method + " is not allowed on " + p + "; use POST"})
		})
	}
}

// loraBody is the union of vLLM's LoadLoRAAdapterRequest and
// UnloadLoRAAdapterRequest (lora_int_id is accepted and, as by vLLM, not used).
type loraBody struct {
	Name           string `json:"lora_name"`
	Path           string `json:"lora_path"`
	LoadInplace    bool   `json:"load_inplace"`
	Is3DLoRAWeight bool   `json:"is_3d_lora_weight"`
	IntID          *int64 `json:"lora_int_id"`
}

func (a *API) readLoRABody(w http.ResponseWriter, r *http.Request) (*loraBody, bool) {
	var b loraBody
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLoRABody))
	if err == nil {
		err = json.Unmarshal(data, &b)
	}
	if err != nil {
		writeError(w, a.bodyError(err))
		return nil, false
	}
	return &b, true
}

func (a *API) loadLoRA(w http.ResponseWriter, r *http.Request) {
	b, ok := a.readLoRABody(w, r)
	if !ok {
		return
	}
	msg, e := a.lora.Load(r.Context(), lora.LoadRequest{Name: b.Name, Path: b.Path, LoadInplace: b.LoadInplace})
	a.loraAnswer(w, r, "load", b.Name, msg, e)
}

func (a *API) unloadLoRA(w http.ResponseWriter, r *http.Request) {
	b, ok := a.readLoRABody(w, r)
	if !ok {
		return
	}
	msg, e := a.lora.Unload(r.Context(), lora.UnloadRequest{Name: b.Name})
	a.loraAnswer(w, r, "unload", b.Name, msg, e)
}

// loraAnswer writes vLLM's answers: the success text as a plain body, or its
// error object.
func (a *API) loraAnswer(w http.ResponseWriter, r *http.Request, op, name, msg string, e *lora.Error) {
	if e != nil {
		a.log.Warn("admin: LoRA adapter "+op+" failed", "name", name, "status", e.Status, "err", e.Message, "remote", r.RemoteAddr)
		writeError(w, &APIError{Status: e.Status, Type: e.Type, Message: e.Message})
		return
	}
	a.log.Info("admin: LoRA adapter "+op, "name", name, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, msg)
}

// checkModel answers a model name serve does not serve (neither the model nor
// an adapter) with vLLM's 404.
func (a *API) checkModel(name string) *APIError {
	if _, ok := a.lora.Lookup(name); ok {
		return nil
	}
	return a.text.checkModel(name)
}

// loraFor returns the LoRARequest of the adapter a request's model names; nil
// for the served model. With LoRA on, an unknown name is vLLM's 404 on the
// token-id path too (without LoRA that path takes any name, as before): a
// mistyped adapter must not be answered by the base model.
func (a *API) loraFor(model string) (*wire.LoRARequest, *APIError) {
	if a.lora == nil || model == "" || model == a.baseModelName() {
		return nil, nil
	}
	if lr, ok := a.lora.Lookup(model); ok {
		return lr, nil
	}
	return nil, modelNotFound(model)
}

func modelNotFound(name string) *APIError {
	return &APIError{Status: http.StatusNotFound, Type: TypeNotFound, Param: "model", Message: "The model `" + name + "` does not exist."}
}

// baseModelName is the served model's name (/v1/models' first id).
func (a *API) baseModelName() string {
	if a.text != nil {
		return a.text.Name
	}
	if a.servedName == "" {
		return apicore.DefaultServedModelName
	}
	return a.servedName
}

// loraSent tells the router which rank got a request for the adapter.
func (a *API) loraSent(rank int, lr *wire.LoRARequest) {
	if lr != nil && a.loraActivity != nil {
		a.loraActivity.Sent(rank, lr.Name)
	}
}

// loraCards are /v1/models' entries of the adapters: root is the path, parent
// the base model (vLLM's show_available_models).
func (a *API) loraCards(created int64) []modelCard {
	var cards []modelCard
	for _, ad := range a.lora.List() {
		parent := ad.BaseModelName
		if parent == "" {
			parent = a.baseModelName()
		}
		cards = append(cards, modelCard{ID: ad.Name, Object: "model", Created: created, OwnedBy: "vllm", Root: ad.Path,
			Parent: &parent, Permission: []modelPermission{{ID: randomID("modelperm-"), Object: "model_permission", Created: created,
				AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}}})
	}
	return cards
}
