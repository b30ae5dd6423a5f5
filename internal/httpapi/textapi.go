package httpapi

// The text endpoints: /v1/chat/completions, /v1/models, /tokenize and /detokenize,
// in vLLM's request and response shapes. Without a tokenizer /v1/models still
// answers (SDKs discover the model first) and the others are a 400 saying that
// text needs --tokenizer.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// textPrompts checks a completions body with text fields and returns its prompts,
// tokenized when they are text (add_special_tokens defaults to true, as vLLM's
// completions do).
func (a *API) textPrompts(req *CompletionRequest) ([][]int64, *APIError) {
	if e := a.checkModel(req.Model); e != nil {
		return nil, e
	}
	req.applyDefaults(a.text.DefaultSampling)
	if v, ok := a.text.DefaultSampling["max_tokens"]; ok && req.MaxTokens == nil && int64(v) >= 1 {
		// vLLM's default is the smallest of 16, the room left and max_new_tokens.
		n := min(int64(v), DefaultMaxTokens)
		req.MaxTokens = &n
	}
	if err := req.validateText(); err != nil {
		return nil, err.(*APIError)
	}
	if req.textPrompts == nil {
		p, err := req.Prompts()
		if err != nil {
			return nil, err.(*APIError)
		}
		return p, nil
	}
	for _, s := range req.textPrompts {
		if e := a.checkTextLen("prompt", s); e != nil {
			return nil, e
		}
	}
	add := req.AddSpecialTokens == nil || *req.AddSpecialTokens
	prompts := make([][]int64, len(req.textPrompts))
	for i, s := range req.textPrompts {
		prompts[i] = a.text.Tokenizer.Encode(s, add)
		if len(prompts[i]) == 0 {
			return nil, badRequest("prompt", "prompt is empty after tokenization")
		}
	}
	return prompts, nil
}

// responseModel is the model named in answers: the request's, or the served name.
func (a *API) responseModel(name string) string {
	if name != "" {
		return name
	}
	if a.text != nil {
		return a.text.Name
	}
	return a.servedName // what /v1/models lists, as vLLM answers an unnamed request
}

// body returns the request body bounded by --max-body-bytes and, for reading,
// --http-body-timeout; done lifts the read deadline once the body is read.
func (a *API) body(w http.ResponseWriter, r *http.Request) (io.Reader, func(), *APIError) {
	if r.ContentLength > a.maxBody {
		w.Header().Set("Connection", "close")
		return nil, nil, tooLarge(a.maxBody)
	}
	rc := http.NewResponseController(w)
	if a.bodyTimeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(a.bodyTimeout))
	}
	return http.MaxBytesReader(w, r.Body, a.maxBody), func() {
		if a.bodyTimeout > 0 {
			_ = rc.SetReadDeadline(time.Time{})
		}
	}, nil
}

// rankHeader reads the X-data-parallel-rank pin.
func rankHeader(r *http.Request) (wire.OptInt, *APIError) {
	h := strings.TrimSpace(r.Header.Get(RankHeader))
	if h == "" {
		return wire.OptInt{}, nil
	}
	rank, err := strconv.ParseInt(h, 10, 32)
	if err != nil || rank < 0 {
		return wire.OptInt{}, badRequest(RankHeader, "%s must be a non-negative integer, got %q", RankHeader, h)
	}
	return wire.SomeInt(rank), nil
}

// maxModelLen is the context length answers report: the engines' registered one,
// else config.json's.
func (a *API) maxModelLen() int64 {
	if n := a.contextLen(-1); n > 0 {
		return n
	}
	if a.text != nil {
		return a.text.MaxModelLen
	}
	return 0
}

// pickTemplate chooses the chat template of a request: its own chat_template (a
// named template of the model, or template source), else the model's "tool_use"
// template when tools are given and the model has one, else the default.
func (a *API) pickTemplate(src *string, tools bool) (ChatTemplate, *APIError) {
	if src != nil && *src != "" {
		if t, ok := a.text.Templates[*src]; ok {
			return t, nil
		}
		if a.text.Parse == nil {
			return nil, badRequest("chat_template", "chat_template: this server does not accept templates in requests")
		}
		t, err := a.text.Parse(*src)
		if err != nil {
			return nil, badRequest("chat_template", "chat_template: %v", err)
		}
		return t, nil
	}
	if t, ok := a.text.Templates["tool_use"]; ok && tools {
		return t, nil
	}
	if a.text.Template == nil {
		return nil, badRequest("chat_template", "As of transformers v4.44, default chat template is no longer allowed, "+
			"so you must provide a chat template if the tokenizer does not define one.")
	}
	return a.text.Template, nil
}

// errUntrustedTemplate refuses a request's own chat template without
// --trust-request-chat-template: vLLM's status and message.
func errUntrustedTemplate() *APIError {
	return badRequest("", "Chat template is passed with request, but --trust-request-chat-template is not set. "+
		"Refused request with untrusted chat template.")
}

// renderChat renders and tokenizes a conversation (add_special_tokens defaults to
// false: the template writes the special tokens).
func (a *API) renderChat(ctx context.Context, c *ChatRequest, addSpecial *bool) ([]int64, *APIError) {
	ids, _, err := a.renderChatText(ctx, c, addSpecial)
	return ids, err
}

// renderChatText is renderChat that also returns the rendered prompt (the
// reasoning parsers read whether it already closed reasoning).
func (a *API) renderChatText(ctx context.Context, c *ChatRequest, addSpecial *bool) ([]int64, string, *APIError) {
	if !a.text.TrustRequestChatTemplate && c.requestTemplate() {
		return nil, "", errUntrustedTemplate()
	}
	tmpl, apiErr := a.pickTemplate(c.ChatTemplate, !isNull(c.Tools))
	if apiErr != nil {
		return nil, "", apiErr
	}
	in, err := c.chatInput(tmpl.ContentFormat())
	if err != nil {
		return nil, "", err.(*APIError)
	}
	in.Now = a.now
	in.SpecialTokens = a.text.SpecialTokens
	rendered, err := tmpl.RenderContext(ctx, in)
	if err != nil {
		return nil, "", badRequest("messages", "chat template: %v", err)
	}
	if c.ContinueFinalMessage {
		if rendered, err = continueFinal(rendered, in.Messages); err != nil {
			return nil, "", err.(*APIError)
		}
	}
	if e := a.checkTextLen("messages", rendered); e != nil {
		return nil, "", e
	}
	return a.text.Tokenizer.Encode(rendered, addSpecial != nil && *addSpecial), rendered, nil
}

// chatCompletions serves POST /v1/chat/completions.
func (a *API) chatCompletions(w http.ResponseWriter, r *http.Request) {
	if a.text == nil {
		writeError(w, errNeedsTokenizer("messages"))
		return
	}
	release, ok := a.admit(w)
	if !ok {
		return
	}
	defer release()
	body, done, apiErr := a.body(w, r)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	chat, err := readChat(body)
	if err != nil {
		w.Header().Set("Connection", "close")
		writeError(w, a.bodyError(err))
		return
	}
	done()
	if e := a.checkModel(chat.Model); e != nil {
		writeError(w, e)
		return
	}
	chat.applyDefaults(a.text.DefaultSampling)
	defaultMax := chat.MaxTokens == nil && chat.MaxCompletionTokens == nil
	if defaultMax {
		// vLLM's default is the room the context leaves; set once the prompt is known.
		room := int64(apicore.MaxPromptTokens)
		chat.MaxTokens = &room
	}
	if err := chat.validate(); err != nil {
		writeError(w, err.(*APIError))
		return
	}
	if apiErr := a.planParsing(chat); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	ids, rendered, apiErr := a.renderChatText(r.Context(), chat, chat.AddSpecialTokens)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if p := chat.parse; p != nil && p.reasoner != nil {
		p.promptEnds = p.reasoner.PromptEndsReasoning(rendered)
	}
	if n := a.maxModelLen(); defaultMax && n > int64(len(ids)) {
		room := n - int64(len(ids))
		chat.MaxTokens = &room
	} else if defaultMax {
		chat.MaxTokens = nil // the dispatcher refuses the prompt, or caps the default
	}
	if v, ok := a.text.DefaultSampling["max_tokens"]; ok && defaultMax && int64(v) >= 1 {
		// generation_config.json's max_new_tokens caps the default (vLLM's get_max_tokens).
		n := int64(v)
		if chat.MaxTokens != nil {
			n = min(n, *chat.MaxTokens)
		}
		chat.MaxTokens = &n
	}
	t := Translate{BaseID: randomID("chatcmpl-"), Model: a.model, Text: true}
	if t.LoRA, apiErr = a.loraFor(chat.Model); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if len(a.text.EOSTokenIDs) > 0 {
		t.Model.EOSTokenIDs = a.text.EOSTokenIDs
	}
	if chat.RequestID != "" {
		t.BaseID = chat.RequestID + "-" + t.BaseID[len("chatcmpl-"):]
	}
	if t.ID, apiErr = headerRequestID(r, "chatcmpl-"); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if t.Rank, apiErr = rankHeader(r); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	t.ArrivalTime = float64(a.now().UnixNano()) / 1e9
	a.serve(w, r, &chat.CompletionRequest, [][]int64{ids}, t, chat)
}

// modelCard is one entry of /v1/models (vLLM's ModelCard).
type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen *int64            `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

// listModels serves GET /v1/models: the served model, vLLM's shape.
func (a *API) listModels(w http.ResponseWriter, _ *http.Request) {
	name, root := a.servedName, a.servedName
	if name == "" {
		name, root = apicore.DefaultServedModelName, apicore.DefaultServedModelName
	}
	if a.text != nil {
		name, root = a.text.Name, a.text.Root
	}
	created := a.now().Unix()
	card := modelCard{ID: name, Object: "model", Created: created, OwnedBy: "vllm", Root: root,
		Permission: []modelPermission{{ID: randomID("modelperm-"), Object: "model_permission", Created: created,
			AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}}}
	if n := a.maxModelLen(); n > 0 {
		card.MaxModelLen = &n
	}
	writeJSON(w, http.StatusOK, struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{"list", append([]modelCard{card}, a.loraCards(created)...)})
}

// decodeSmall decodes a tokenizer endpoint's body with the completions decoder:
// fields matched by their exact names (pydantic's; encoding/json would take
// "PROMPT" for "prompt"), unknown fields skipped, each known one at most
// maxFieldBytes of JSON.
func (a *API) decodeSmall(w http.ResponseWriter, r *http.Request, dst bodyFields) *APIError {
	body, done, apiErr := a.body(w, r)
	if apiErr != nil {
		return apiErr
	}
	if err := readObject(body, apicore.MaxPromptTokens, dst, nil); err != nil {
		w.Header().Set("Connection", "close")
		return a.bodyError(err)
	}
	done()
	return nil
}

// tokenizeRequest is the body of POST /tokenize: a prompt, or a conversation
// with the chat fields.
type tokenizeRequest struct {
	Model                string          `json:"model"`
	Prompt               *string         `json:"prompt"`
	Messages             json.RawMessage `json:"messages"`
	AddSpecialTokens     *bool           `json:"add_special_tokens"`
	AddGenerationPrompt  *bool           `json:"add_generation_prompt"`
	ContinueFinalMessage bool            `json:"continue_final_message"`
	ChatTemplate         *string         `json:"chat_template"`
	ChatTemplateKwargs   json.RawMessage `json:"chat_template_kwargs"`
	Tools                json.RawMessage `json:"tools"`
	ReturnTokenStrs      bool            `json:"return_token_strs"`
}

func (r *tokenizeRequest) field(key string) any {
	switch key {
	case "model":
		return &r.Model
	case "prompt":
		return &r.Prompt
	case "messages":
		return &r.Messages
	case "add_special_tokens":
		return &r.AddSpecialTokens
	case "add_generation_prompt":
		return &r.AddGenerationPrompt
	case "continue_final_message":
		return &r.ContinueFinalMessage
	case "chat_template":
		return &r.ChatTemplate
	case "chat_template_kwargs":
		return &r.ChatTemplateKwargs
	case "tools":
		return &r.Tools
	case "return_token_strs":
		return &r.ReturnTokenStrs
	}
	return nil
}

// detokenizeRequest is the body of POST /detokenize.
type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

func (r *detokenizeRequest) field(key string) any {
	switch key {
	case "model":
		return &r.Model
	case "tokens":
		return &r.Tokens
	}
	return nil
}

// tokenize serves POST /tokenize.
func (a *API) tokenize(w http.ResponseWriter, r *http.Request) {
	if a.text == nil {
		writeError(w, errNeedsTokenizer("prompt"))
		return
	}
	// Tokenizing is generation's costly part: it takes a slot as generation does.
	release, ok := a.admit(w)
	if !ok {
		return
	}
	defer release()
	var req tokenizeRequest
	if e := a.decodeSmall(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := a.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	var ids []int64
	switch {
	case req.Messages != nil:
		c := &ChatRequest{Messages: req.Messages, AddGenerationPrompt: req.AddGenerationPrompt, ContinueFinalMessage: req.ContinueFinalMessage,
			ChatTemplate: req.ChatTemplate, ChatTemplateKwargs: req.ChatTemplateKwargs, Tools: req.Tools}
		var apiErr *APIError
		if ids, apiErr = a.renderChat(r.Context(), c, req.AddSpecialTokens); apiErr != nil {
			writeError(w, apiErr)
			return
		}
	case req.Prompt != nil:
		if e := a.checkTextLen("prompt", *req.Prompt); e != nil {
			writeError(w, e)
			return
		}
		ids = a.text.Tokenizer.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	default:
		writeError(w, badRequest("prompt", "prompt or messages is required"))
		return
	}
	resp := map[string]any{"count": len(ids), "max_model_len": a.maxModelLen(), "tokens": idsOrEmpty(ids), "token_strs": nil}
	if req.ReturnTokenStrs {
		strs := make([]string, len(ids))
		for i, id := range ids {
			strs[i] = a.text.Tokenizer.IDToToken(id)
		}
		resp["token_strs"] = strs
	}
	writeJSON(w, http.StatusOK, resp)
}

// detokenize serves POST /detokenize.
func (a *API) detokenize(w http.ResponseWriter, r *http.Request) {
	if a.text == nil {
		writeError(w, errNeedsTokenizer("tokens"))
		return
	}
	release, ok := a.admit(w)
	if !ok {
		return
	}
	defer release()
	var req detokenizeRequest
	if e := a.decodeSmall(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if req.Tokens == nil {
		writeError(w, badRequest("tokens", "tokens is required: a list of token ids"))
		return
	}
	if e := a.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	if a.model.VocabSize > 0 {
		for _, id := range req.Tokens {
			if id < 0 || id >= a.model.VocabSize {
				writeError(w, badRequest("tokens", "token id %d is out of vocabulary (vocab size %d)", id, a.model.VocabSize))
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": a.text.detokenizeText(req.Tokens)})
}
