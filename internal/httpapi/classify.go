package httpapi

// POST /classify: vLLM's classification API. Each input (a string, a list of
// strings, a list of token ids or a list of token id lists) is one engine request
// with task classify; the engine answers the class probabilities (its activation,
// unless use_activation is false), and the answer names the most likely class by
// the model's id2label.

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/switchyard-llm/switchyard/wire"
)

// classifyRequest is vLLM's ClassificationCompletionRequest.
type classifyRequest struct {
	Model                string
	Input                json.RawMessage
	TruncatePromptTokens *int64
	TruncationSide       *string
	AddSpecialTokens     *bool
	UseActivation        *bool
	Priority             *int64
	RequestID            *string
	Normalize            json.RawMessage
	// ClassificationChatRequest's: a conversation through the chat template.
	Messages             json.RawMessage
	ChatTemplate         *string
	ChatTemplateKwargs   json.RawMessage
	AddGenerationPrompt  *bool
	ContinueFinalMessage *bool
}

func (r *classifyRequest) field(key string) any {
	switch key {
	case "model":
		return &r.Model
	case "input":
		return &r.Input
	case "truncate_prompt_tokens":
		return &r.TruncatePromptTokens
	case "truncation_side":
		return &r.TruncationSide
	case "add_special_tokens":
		return &r.AddSpecialTokens
	case "use_activation":
		return &r.UseActivation
	case "priority":
		return &r.Priority
	case "request_id":
		return &r.RequestID
	case "normalize":
		return &r.Normalize
	case "messages":
		return &r.Messages
	case "chat_template":
		return &r.ChatTemplate
	case "chat_template_kwargs":
		return &r.ChatTemplateKwargs
	case "add_generation_prompt":
		return &r.AddGenerationPrompt
	case "continue_final_message":
		return &r.ContinueFinalMessage
	}
	return nil
}

// classifyData is vLLM's ClassificationData, keys in its order.
type classifyData struct {
	Index      int       `json:"index"`
	Label      *string   `json:"label"`
	Probs      []float64 `json:"probs"`
	NumClasses int       `json:"num_classes"`
}

type classifyResponse struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Data    []classifyData `json:"data"`
	Usage   pooledUsage    `json:"usage"`
}

func (a *API) classifyAPI(w http.ResponseWriter, r *http.Request) {
	release, ok := a.admit(w)
	if !ok {
		return
	}
	defer release()
	tasks, apiErr := a.supportedTasks(r.Context())
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if !slices.Contains(tasks, "classify") {
		writeNotFound(w) // vLLM registers /classify only for models that classify
		return
	}
	var req classifyRequest
	if e := a.decodeSmall(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	job, apiErr := a.classifyJobOf(r, &req)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	answers, ok := a.runPool(w, r, job, nil)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, a.classifyResponseOf(job.VisibleID, answers))
}

func (a *API) classifyJobOf(r *http.Request, req *classifyRequest) (poolJob, *APIError) {
	var job poolJob
	if e := a.checkPoolModel(req.Model); e != nil {
		return job, e
	}
	if req.Normalize != nil {
		return job, badRequest("normalize", "Parameter `normalize` was removed; use `use_activation` instead.")
	}
	tp := &tokParams{maxLen: a.maxModelLen(), truncate: req.TruncatePromptTokens, tokLeft: a.poolModelInfo().truncLeft}
	if req.TruncationSide != nil {
		tp.side = *req.TruncationSide
	}
	if apiErr := tp.validate(); apiErr != nil {
		return job, apiErr
	}
	var prompts [][]int64
	var apiErr *APIError
	if req.Messages != nil && req.Input == nil {
		prompts, apiErr = a.classifyChat(r, req, tp)
	} else {
		prompts, apiErr = a.classifyPrompts(req, tp)
	}
	if apiErr != nil {
		return job, apiErr
	}
	job.Prompts = prompts
	job.Params = wire.PoolingParams{Task: "classify", Activation: wire.OptBool{Value: true, Valid: true}}
	if req.UseActivation != nil {
		job.Params.Activation.Value = *req.UseActivation
	}
	return job, a.jobRouting(r, &job, req.Priority, req.RequestID, "classify-", false)
}

// classifyChat renders a conversation as vLLM's ClassificationChatRequest does:
// no generation prompt and no special tokens unless asked (the template adds them).
func (a *API) classifyChat(r *http.Request, req *classifyRequest, tp *tokParams) ([][]int64, *APIError) {
	if a.text == nil {
		return nil, errNeedsTokenizer("messages")
	}
	cont := req.ContinueFinalMessage != nil && *req.ContinueFinalMessage
	if cont && req.AddGenerationPrompt != nil && *req.AddGenerationPrompt {
		return nil, badRequest("continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	}
	c := &ChatRequest{Messages: req.Messages, ChatTemplate: req.ChatTemplate, ChatTemplateKwargs: req.ChatTemplateKwargs,
		AddGenerationPrompt: req.AddGenerationPrompt, ContinueFinalMessage: cont}
	if c.AddGenerationPrompt == nil {
		c.AddGenerationPrompt = new(bool)
	}
	addSpecial := req.AddSpecialTokens
	if addSpecial == nil {
		addSpecial = new(bool)
	}
	ids, _, apiErr := a.renderChatText(r.Context(), c, addSpecial)
	if apiErr != nil {
		return nil, apiErr
	}
	if ids, _, apiErr = tp.after(ids, nil); apiErr != nil {
		return nil, apiErr
	}
	return [][]int64{ids}, nil
}

// classifyPrompts reads input as vLLM's prompt_to_seq does and tokenizes the texts.
func (a *API) classifyPrompts(req *classifyRequest, tp *tokParams) ([][]int64, *APIError) {
	if req.Input == nil {
		return nil, badRequest("input", "Field required: input")
	}
	addSpecial := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	var one string
	var strs []string
	var lists [][]int64
	var prompts [][]int64
	// A failed Unmarshal may leave a partly filled slice: each form decodes into its own.
	if json.Unmarshal(req.Input, &one) == nil {
		strs = []string{one}
	} else if v := []int64(nil); json.Unmarshal(req.Input, &v) == nil && len(v) > 0 {
		lists = [][]int64{v}
	} else if v := []string(nil); json.Unmarshal(req.Input, &v) == nil && len(v) > 0 {
		strs = v
	} else if v := [][]int64(nil); json.Unmarshal(req.Input, &v) == nil && len(v) > 0 {
		lists = v
	} else if string(req.Input) == "[]" {
		return nil, badRequest("input", "You must pass at least one prompt")
	} else {
		return nil, badRequest("input", "input must be a string, a list of strings, a list of token ids or a list of token id lists")
	}
	if n := len(strs) + len(lists); n > MaxChoices {
		return nil, badRequest("input", "input has %d items, more than the limit of %d", n, MaxChoices)
	}
	for _, s := range strs {
		p, apiErr := a.encodeOne("input", s, addSpecial, tp)
		if apiErr != nil {
			return nil, apiErr
		}
		prompts = append(prompts, p)
	}
	for _, l := range lists {
		if len(l) == 0 || slices.ContainsFunc(l, func(id int64) bool { return id < 0 }) {
			return nil, badRequest("input", "token ids must be a non-empty list of non-negative integers")
		}
		p, _, apiErr := tp.after(l, nil)
		if apiErr != nil {
			return nil, apiErr
		}
		prompts = append(prompts, p)
	}
	return prompts, nil
}

func (a *API) classifyResponseOf(id string, answers []pooled) classifyResponse {
	m := a.poolModelInfo()
	resp := classifyResponse{ID: id, Object: "list", Created: a.now().Unix(), Model: a.poolModelName(),
		Data: make([]classifyData, len(answers))}
	for i, p := range answers {
		best := 0
		for j, v := range p.Data {
			if v > p.Data[best] {
				best = j // np.argmax: the first of equal maxima
			}
		}
		d := classifyData{Index: i, Probs: float64s(p.Data), NumClasses: len(p.Data)}
		if len(p.Data) > 0 {
			d.Label = m.label(best)
		}
		resp.Data[i] = d
		resp.Usage.PromptTokens += p.PromptTokens
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	return resp
}
