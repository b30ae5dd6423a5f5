package httpapi

// POST /v1/embeddings (OpenAI's shape, vLLM's extra fields) and POST /pooling
// (vLLM's raw pooler outputs). Inputs are a string, a list of strings, a list of
// token ids or a list of token id lists; each is one engine request; the answers
// are in input order with the prompt tokens counted, as vLLM's serving code
// assembles them.

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// poolRequest is the body of /v1/embeddings and /pooling: the fields vLLM's
// EmbeddingCompletionRequest and PoolingCompletionRequest share, and /pooling's task.
type poolRequest struct {
	Model                string          `json:"model"`
	Input                json.RawMessage `json:"input"`
	EncodingFormat       *string         `json:"encoding_format"`
	Dimensions           *int64          `json:"dimensions"`
	User                 *string         `json:"user"`
	TruncatePromptTokens *int64          `json:"truncate_prompt_tokens"`
	TruncationSide       *string         `json:"truncation_side"`
	RequestID            *string         `json:"request_id"`
	Priority             *int64          `json:"priority"`
	AddSpecialTokens     *bool           `json:"add_special_tokens"`
	EmbedDType           *string         `json:"embed_dtype"`
	Endianness           *string         `json:"endianness"`
	UseActivation        *bool           `json:"use_activation"`
	Normalize            json.RawMessage `json:"normalize"`
	Messages             json.RawMessage `json:"messages"`
	Task                 *string         `json:"task"`
}

func (r *poolRequest) field(key string) any {
	switch key {
	case "model":
		return &r.Model
	case "input":
		return &r.Input
	case "encoding_format":
		return &r.EncodingFormat
	case "dimensions":
		return &r.Dimensions
	case "user":
		return &r.User
	case "truncate_prompt_tokens":
		return &r.TruncatePromptTokens
	case "truncation_side":
		return &r.TruncationSide
	case "request_id":
		return &r.RequestID
	case "priority":
		return &r.Priority
	case "add_special_tokens":
		return &r.AddSpecialTokens
	case "embed_dtype":
		return &r.EmbedDType
	case "endianness":
		return &r.Endianness
	case "use_activation":
		return &r.UseActivation
	case "normalize":
		return &r.Normalize
	case "messages":
		return &r.Messages
	case "task":
		return &r.Task
	}
	return nil
}

// poolEndpoint is what differs between /v1/embeddings and /pooling.
type poolEndpoint struct {
	api      string // vLLM's name of the API in "The model does not support X API"
	idPrefix string // the answer's id
	object   string // each data item's object
	embed    bool   // /v1/embeddings: task embed, one vector per input
}

var (
	embeddingsEndpoint = poolEndpoint{api: "Embeddings", idPrefix: "embd-", object: "embedding", embed: true}
	poolingEndpoint    = poolEndpoint{api: "Pooling", idPrefix: "pool-", object: "pooling"}
)

// embeddings serves POST /v1/embeddings.
func (a *API) embeddings(w http.ResponseWriter, r *http.Request) {
	a.servePooling(w, r, embeddingsEndpoint)
}

// poolingAPI serves POST /pooling.
func (a *API) poolingAPI(w http.ResponseWriter, r *http.Request) {
	a.servePooling(w, r, poolingEndpoint)
}

func (a *API) servePooling(w http.ResponseWriter, r *http.Request, ep poolEndpoint) {
	release, ok := a.admit(w)
	if !ok {
		return
	}
	defer release()
	var req poolRequest
	if e := a.decodeSmall(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	job, enc, apiErr := a.poolJobOf(r, &req, ep)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	answers, ok := a.runPool(w, r, job, nil)
	if !ok {
		return
	}
	if d := job.Params.Dimensions; d.Valid {
		// Never more than the client asked for, whatever the engine sent.
		for _, p := range answers {
			if len(p.Shape) != 1 || p.Shape[0] != d.Value {
				writeError(w, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal,
					Message: "the engine's embedding does not have the " + strconv.FormatInt(d.Value, 10) + " dimensions asked for"})
				return
			}
		}
	}
	a.writePooled(w, ep, enc, answers, job.VisibleID)
}

// poolEncoding is how the vectors are written.
type poolEncoding struct {
	base64    bool
	dtype     string // float32, float16, bfloat16
	bigEndian bool
}

// poolJobOf validates a body and builds its job.
func (a *API) poolJobOf(r *http.Request, req *poolRequest, ep poolEndpoint) (poolJob, poolEncoding, *APIError) {
	var job poolJob
	var enc poolEncoding
	if e := a.checkPoolModel(req.Model); e != nil {
		return job, enc, e
	}
	if req.Normalize != nil {
		return job, enc, badRequest("normalize", "Parameter `normalize` was removed; use `use_activation` instead.")
	}
	if req.Messages != nil {
		return job, enc, badRequest("messages", "messages: embeddings of a conversation are not supported by switchyard; send input")
	}
	var apiErr *APIError
	if enc, apiErr = poolEncodingOf(req); apiErr != nil {
		return job, enc, apiErr
	}
	task := "embed"
	if !ep.embed {
		if req.Dimensions != nil {
			return job, enc, badRequest("dimensions", "dimensions is currently not supported")
		}
		if task, apiErr = a.defaultPoolTask(r, req.Task); apiErr != nil {
			return job, enc, apiErr
		}
	}
	if apiErr = a.requireTask(r.Context(), task, ep.api); apiErr != nil {
		return job, enc, apiErr
	}
	job.Params.Task = task
	job.Params.Activation = wire.OptBool{Value: true, Valid: true} // vLLM's frontend default
	if req.UseActivation != nil {
		job.Params.Activation.Value = *req.UseActivation
	}
	if task == "token_embed" || task == "token_classify" {
		job.Params.SkipReadingPrefixCache = wire.OptBool{Value: true, Valid: true}
	}
	if d := req.Dimensions; d != nil {
		if apiErr = a.checkDimensions(*d); apiErr != nil {
			return job, enc, apiErr
		}
		job.Params.Dimensions = wire.SomeInt(*d)
	}
	if job.Prompts, apiErr = a.poolPrompts(req); apiErr != nil {
		return job, enc, apiErr
	}
	if apiErr = a.truncate(req, &job); apiErr != nil {
		return job, enc, apiErr
	}
	if apiErr = a.jobRouting(r, &job, req.Priority, req.RequestID, ep.idPrefix, true); apiErr != nil {
		return job, enc, apiErr
	}
	return job, enc, nil
}

// defaultPoolTask is /pooling's task: the one asked for, else the model's first.
func (a *API) defaultPoolTask(r *http.Request, asked *string) (string, *APIError) {
	tasks, apiErr := a.supportedTasks(r.Context())
	if apiErr != nil {
		return "", apiErr
	}
	if asked != nil {
		if !isPoolingTask(*asked) || !slices.Contains(tasks, *asked) {
			return "", badRequest("task", "Unsupported task: %s Supported tasks: %s", pyRepr(*asked), pyTuple(tasks))
		}
		return *asked, nil
	}
	for _, t := range tasks {
		if isPoolingTask(t) {
			return t, nil
		}
	}
	return "", badRequest("", "The model does not support Pooling API")
}

func poolEncodingOf(req *poolRequest) (poolEncoding, *APIError) {
	enc := poolEncoding{dtype: "float32"}
	if f := req.EncodingFormat; f != nil {
		switch *f {
		case "float":
		case "base64":
			enc.base64 = true
		default:
			return enc, badRequest("encoding_format", "encoding_format must be \"float\" or \"base64\", got %q", *f)
		}
	}
	if d := req.EmbedDType; d != nil {
		switch *d {
		case "float32", "float16", "bfloat16":
			enc.dtype = *d
		default:
			return enc, badRequest("embed_dtype", "embed_dtype must be float32, float16 or bfloat16, got %q", *d)
		}
	}
	if e := req.Endianness; e != nil {
		switch *e {
		case "native", "little":
		case "big":
			enc.bigEndian = true
		default:
			return enc, badRequest("endianness", "endianness must be native, big or little, got %q", *e)
		}
	}
	return enc, nil
}

// checkPoolModel is the model check of the text endpoints, also without a tokenizer.
func (a *API) checkPoolModel(name string) *APIError {
	if a.text != nil {
		return a.text.checkModel(name)
	}
	return nil
}

// poolPrompts reads input: a string, a list of strings, a list of ids or a list of
// id lists; every prompt non-empty.
func (a *API) poolPrompts(req *poolRequest) ([][]int64, *APIError) {
	if req.Input == nil {
		return nil, badRequest("input", "input is required")
	}
	addSpecial := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	encode := func(s string) ([]int64, *APIError) {
		if a.text == nil {
			return nil, errNeedsTokenizer("input")
		}
		if e := a.checkTextLen("input", s); e != nil {
			return nil, e
		}
		return a.text.Tokenizer.Encode(s, addSpecial), nil
	}
	var prompts [][]int64
	var one string
	var strs []string
	var ids []int64
	var lists [][]int64
	switch {
	case json.Unmarshal(req.Input, &one) == nil:
		p, e := encode(one)
		if e != nil {
			return nil, e
		}
		prompts = [][]int64{p}
	case json.Unmarshal(req.Input, &ids) == nil && len(ids) > 0:
		prompts = [][]int64{ids}
	case json.Unmarshal(req.Input, &strs) == nil && len(strs) > 0:
		if len(strs) > MaxChoices {
			return nil, badRequest("input", "input has %d items, more than the limit of %d", len(strs), MaxChoices)
		}
		for _, s := range strs {
			p, e := encode(s)
			if e != nil {
				return nil, e
			}
			prompts = append(prompts, p)
		}
	case json.Unmarshal(req.Input, &lists) == nil && len(lists) > 0:
		prompts = lists
	case string(req.Input) == "[]":
		return nil, badRequest("input", "input must not be empty")
	default:
		return nil, badRequest("input", "input must be a string, a list of strings, a list of token ids or a list of token id lists")
	}
	if len(prompts) > MaxChoices {
		return nil, badRequest("input", "input has %d items, more than the limit of %d", len(prompts), MaxChoices)
	}
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, badRequest("input", "input %d is empty", i)
		}
		if slices.ContainsFunc(p, func(id int64) bool { return id < 0 }) {
			return nil, badRequest("input", "token ids must be non-negative")
		}
	}
	return prompts, nil
}

// truncate applies truncate_prompt_tokens as vLLM's renderer does: -1 is the
// model's context length, k keeps the last k tokens (truncation_side "left", the
// default) or the first k ("right").
func (a *API) truncate(req *poolRequest, job *poolJob) *APIError {
	k := req.TruncatePromptTokens
	if k == nil {
		return nil
	}
	maxLen := a.maxModelLen()
	n := *k
	switch {
	case n < -1:
		return badRequest("truncate_prompt_tokens", "truncate_prompt_tokens must be greater than or equal to -1")
	case n == -1:
		if maxLen <= 0 {
			return nil
		}
		n = maxLen
	case n == 0:
		return badRequest("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 or a positive number")
	case maxLen > 0 && n > maxLen:
		return badRequest("truncate_prompt_tokens", "truncate_prompt_tokens value (%d) is greater than max_model_len (%d). Please, select a smaller truncation size.", n, maxLen)
	}
	right := req.TruncationSide != nil && *req.TruncationSide == "right"
	if s := req.TruncationSide; s != nil && *s != "left" && *s != "right" {
		return badRequest("truncation_side", "truncation_side must be \"left\" or \"right\", got %q", *s)
	}
	for i, p := range job.Prompts {
		if int64(len(p)) > n {
			if right {
				job.Prompts[i] = p[:n]
			} else {
				job.Prompts[i] = p[int64(len(p))-n:]
			}
		}
	}
	job.Params.TruncatePromptTokens = wire.SomeInt(*k)
	return nil
}

// checkDimensions is vLLM's matryoshka check when the model's config.json says
// (is_matryoshka, matryoshka_dimensions); without one the engine's own limits apply.
func (a *API) checkDimensions(d int64) *APIError {
	if d < 1 {
		return badRequest("dimensions", "Dimensions must be greater than 0")
	}
	if d > poolMaxElems {
		// No answer that long is read (poolMaxElems): refused before the engines
		// work on it, also when the model's config is unknown.
		return badRequest("dimensions", "dimensions is %d, more than the limit of %d", d, poolMaxElems)
	}
	m := a.matryoshka()
	if !m.known {
		return nil
	}
	name := a.poolModelName()
	if !m.is {
		return badRequest("dimensions", "Model %q does not support matryoshka representation, changing output dimensions will lead to poor results.", name)
	}
	if m.dims != nil && !slices.Contains(m.dims, d) {
		return badRequest("dimensions", "Model %q only supports %v matryoshka dimensions, use other output dimensions will lead to poor results.", name, m.dims)
	}
	return nil
}

type matryoshkaInfo struct {
	known, is bool
	dims      []int64
}

var matryoshkaCache sync.Map // model dir -> matryoshkaInfo

// matryoshka reads is_matryoshka / matryoshka_dimensions from the model's config.json.
func (a *API) matryoshka() matryoshkaInfo {
	if a.text == nil || a.text.Root == "" {
		return matryoshkaInfo{}
	}
	if v, ok := matryoshkaCache.Load(a.text.Root); ok {
		return v.(matryoshkaInfo)
	}
	var info matryoshkaInfo
	if b, err := os.ReadFile(filepath.Join(a.text.Root, "config.json")); err == nil && len(b) < 1<<22 {
		var cfg struct {
			IsMatryoshka bool    `json:"is_matryoshka"`
			Dims         []int64 `json:"matryoshka_dimensions"`
		}
		if json.Unmarshal(b, &cfg) == nil {
			info = matryoshkaInfo{known: true, is: cfg.IsMatryoshka || len(cfg.Dims) > 0, dims: cfg.Dims}
		}
	}
	matryoshkaCache.Store(a.text.Root, info)
	return info
}

// pooledItem is one data item, keys in vLLM's order (index, object, vector).
type pooledItem struct {
	Index     int    `json:"index"`
	Object    string `json:"object"`
	Embedding any    `json:"embedding,omitempty"`
	Data      any    `json:"data,omitempty"`
}

// pooledUsage is vLLM's UsageInfo of a pooling answer.
type pooledUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails any `json:"prompt_tokens_details"`
}

// pooledResponse is vLLM's EmbeddingResponse / PoolingResponse.
type pooledResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Data    []pooledItem `json:"data"`
	Usage   pooledUsage  `json:"usage"`
}

// writePooled writes the answer: vLLM's EmbeddingResponse or PoolingResponse.
func (a *API) writePooled(w http.ResponseWriter, ep poolEndpoint, enc poolEncoding, answers []pooled, id string) {
	resp := pooledResponse{ID: id, Object: "list", Created: a.now().Unix(), Model: a.poolModelName(),
		Data: make([]pooledItem, len(answers))}
	for i, p := range answers {
		var v any
		switch {
		case enc.base64:
			v = base64.StdEncoding.EncodeToString(encodeVector(p.Data, enc))
		case len(p.Shape) <= 1:
			v = float64s(p.Data)
		default:
			v = rows(p.Shape, p.Data)
		}
		resp.Data[i] = pooledItem{Index: i, Object: ep.object}
		if ep.embed {
			resp.Data[i].Embedding = v
		} else {
			resp.Data[i].Data = v
		}
		resp.Usage.PromptTokens += p.PromptTokens
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	writeJSON(w, http.StatusOK, resp)
}

// poolModelName is the answers' model: the served name.
func (a *API) poolModelName() string {
	switch {
	case a.text != nil:
		return a.text.Name
	case a.servedName != "":
		return a.servedName
	}
	return apicore.DefaultServedModelName
}

// float64s widens for JSON: Python's tolist() of a float32 tensor gives the
// float32's exact value, which Go writes shortest as a float64.
func float64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// rows is a [n, m] tensor as nested lists (tolist()).
func rows(shape []int64, data []float32) [][]float64 {
	n, m := int(shape[0]), int(shape[1])
	out := make([][]float64, n)
	for i := range out {
		out[i] = float64s(data[i*m : (i+1)*m])
	}
	return out
}
