package httpapi

// POST /score, /v1/score (sentence-pair scores) and /rerank, /v1/rerank,
// /v2/rerank (Jina's and Cohere's rerank shape), as vLLM serves them. What a score
// is depends on the model the engines serve: a cross-encoder (the engines' task is
// classify, or score on older releases, with one label) reads each (query,
// document) pair as one prompt joined by the tokenizer's pair template, one ADD per
// pair, and the score is its one output; an embedding model (task embed) embeds
// every query and document on its own, one ADD each, and the score is the cosine
// of the two vectors. Models that serve neither have no such routes: 404, as vLLM.

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/switchyard-llm/switchyard/internal/chattemplate"
	"github.com/switchyard-llm/switchyard/internal/tokenizer"
	"github.com/switchyard-llm/switchyard/wire"
)

// maxScoreInputs bounds the queries and the documents of one request: each pair
// (or text) is an engine request. Cohere's own rerank takes up to 1,000 documents.
const maxScoreInputs = 1000

// maxPairTextBytes bounds the text a cross-encoder request tokenizes, its query
// counted once per document: four default bodies.
const maxPairTextBytes = 4 * DefaultMaxBodyBytes

// scoreRequest is the body of /score and /rerank: vLLM's ScoreRequest variants
// (queries+documents, queries+items, data_1+data_2, text_1+text_2) and RerankRequest
// (query, documents, top_n), with the scoring fields they share.
type scoreRequest struct {
	Model                string
	Queries, Documents   json.RawMessage
	Items, Query         json.RawMessage
	Data1, Data2         json.RawMessage
	Text1, Text2         json.RawMessage
	TopN                 *int64
	TruncatePromptTokens *int64
	TruncationSide       *string
	UseActivation        *bool
	MaxTokensPerQuery    *int64
	MaxTokensPerDoc      *int64
	Priority             *int64
	RequestID            *string
	Normalize            json.RawMessage
	Instruction          *string
	ChatTemplateKwargs   json.RawMessage
}

func (r *scoreRequest) field(key string) any {
	switch key {
	case "model":
		return &r.Model
	case "queries":
		return &r.Queries
	case "documents":
		return &r.Documents
	case "items":
		return &r.Items
	case "query":
		return &r.Query
	case "data_1":
		return &r.Data1
	case "data_2":
		return &r.Data2
	case "text_1":
		return &r.Text1
	case "text_2":
		return &r.Text2
	case "top_n":
		return &r.TopN
	case "truncate_prompt_tokens":
		return &r.TruncatePromptTokens
	case "truncation_side":
		return &r.TruncationSide
	case "use_activation":
		return &r.UseActivation
	case "max_tokens_per_query":
		return &r.MaxTokensPerQuery
	case "max_tokens_per_doc":
		return &r.MaxTokensPerDoc
	case "priority":
		return &r.Priority
	case "request_id":
		return &r.RequestID
	case "normalize":
		return &r.Normalize
	case "instruction":
		return &r.Instruction
	case "chat_template_kwargs":
		return &r.ChatTemplateKwargs
	}
	return nil // vLLM ignores unknown fields (return_documents, user, ...)
}

// scoreKind is how the served model scores.
type scoreKind struct {
	cross bool   // cross-encoder; else bi-encoder (cosine of embeddings)
	task  string // the engines' task for each ADD
}

// scoreKindOf picks, from the engines' tasks, what vLLM's ServingScores would: the
// first of embed, classify (score on releases that still list it) the model serves;
// a classifier is a cross-encoder only with one label. ok false: no scoring routes.
func (a *API) scoreKindOf(tasks []string) (scoreKind, bool) {
	has := func(t string) bool {
		for _, x := range tasks {
			if x == t {
				return true
			}
		}
		return false
	}
	switch {
	case has("embed"):
		return scoreKind{task: "embed"}, true
	case has("classify") || has("score"):
		if m := a.poolModelInfo(); m.known && m.numLabels != 1 {
			return scoreKind{}, false // vLLM: "Scoring API is only enabled for num_labels == 1."
		}
		k := scoreKind{cross: true, task: "classify"}
		if has("score") {
			k.task = "score"
		}
		return k, true
	}
	return scoreKind{}, false
}

// writeNotFound is FastAPI's answer for a route the model does not have.
func writeNotFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
}

func (a *API) scoreAPI(w http.ResponseWriter, r *http.Request)  { a.serveScore(w, r, false) }
func (a *API) rerankAPI(w http.ResponseWriter, r *http.Request) { a.serveScore(w, r, true) }

// scorePlan is a request turned into engine prompts.
type scorePlan struct {
	job      poolJob
	kind     scoreKind
	nQueries int // bi-encoder: the first nQueries prompts are the queries
	nPairs   int
	padExtra int      // bi-encoder usage: the pad token vLLM counts between the two texts
	docs     []string // rerank: the documents, for the answer
	topN     int64
	kwargs   map[string]any // the score template's chat_template_kwargs
	// typeSplits: per pair, where its type-1 tokens start (vLLM's
	// compressed_token_type_ids), -1 when the tokenizer returns no type ids.
	typeSplits []int
}

func (a *API) serveScore(w http.ResponseWriter, r *http.Request, rerank bool) {
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
	kind, ok := a.scoreKindOf(tasks)
	if !ok {
		writeNotFound(w)
		return
	}
	var req scoreRequest
	if e := a.decodeSmall(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	plan, apiErr := a.scorePlanOf(r, &req, kind, rerank)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	answers, ok := a.runPool(w, r, plan.job, plan.typeSplits)
	if !ok {
		return
	}
	scores, tokens, apiErr := plan.scores(answers)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	id := plan.job.VisibleID
	if rerank {
		writeJSON(w, http.StatusOK, rerankResponseOf(id, a.poolModelName(), plan, scores, tokens))
		return
	}
	writeJSON(w, http.StatusOK, scoreResponseOf(id, a.now().Unix(), a.poolModelName(), scores, tokens))
}

// scoreTexts reads one side of a score request: a string or a list of strings.
// vLLM also takes multi-modal {"content": [...]} items, for multi-modal models only.
func (a *API) scoreTexts(param string, raw json.RawMessage, listOK bool) ([]string, *APIError) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var items []json.RawMessage
	if !listOK || json.Unmarshal(raw, &items) != nil {
		if strings.HasPrefix(strings.TrimSpace(string(raw)), "{") {
			return nil, a.multiModalRefused()
		}
		what := "a string or a list of strings"
		if !listOK {
			what = "a string"
		}
		return nil, badRequest(param, "%s must be %s", param, what)
	}
	if len(items) > maxScoreInputs {
		return nil, badRequest(param, "%s has %d items, more than the limit of %d", param, len(items), maxScoreInputs)
	}
	out := make([]string, len(items))
	for i, it := range items {
		if json.Unmarshal(it, &out[i]) != nil {
			if strings.HasPrefix(strings.TrimSpace(string(it)), "{") {
				return nil, a.multiModalRefused()
			}
			return nil, badRequest(param, "%s must be a string or a list of strings", param)
		}
	}
	return out, nil
}

// multiModalRefused is vLLM's answer to a multi-modal item on a text-only model.
func (a *API) multiModalRefused() *APIError {
	arch := a.poolModelInfo().arch
	if arch == "" {
		arch = "this model"
	}
	return badRequest("", "MultiModalParam is not supported for %s", arch)
}

// scoreSides picks the request variant's two sides.
func (a *API) scoreSides(req *scoreRequest, rerank bool) (q, d []string, apiErr *APIError) {
	type side struct {
		name string
		raw  json.RawMessage
	}
	var s1, s2 side
	switch {
	case rerank:
		s1, s2 = side{"query", req.Query}, side{"documents", req.Documents}
	case req.Queries != nil && req.Documents != nil:
		s1, s2 = side{"queries", req.Queries}, side{"documents", req.Documents}
	case req.Queries != nil && req.Items != nil:
		s1, s2 = side{"queries", req.Queries}, side{"items", req.Items}
	case req.Data1 != nil && req.Data2 != nil:
		s1, s2 = side{"data_1", req.Data1}, side{"data_2", req.Data2}
	case req.Text1 != nil && req.Text2 != nil:
		s1, s2 = side{"text_1", req.Text1}, side{"text_2", req.Text2}
	default:
		return nil, nil, badRequest("", "Field required: queries and documents (or queries and items, data_1 and data_2, text_1 and text_2)")
	}
	if s1.raw == nil {
		return nil, nil, badRequest(s1.name, "Field required: %s", s1.name)
	}
	if s2.raw == nil {
		return nil, nil, badRequest(s2.name, "Field required: %s", s2.name)
	}
	if q, apiErr = a.scoreTexts(s1.name, s1.raw, !rerank); apiErr != nil {
		return nil, nil, apiErr
	}
	if d, apiErr = a.scoreTexts(s2.name, s2.raw, true); apiErr != nil {
		return nil, nil, apiErr
	}
	// vLLM's _validate_score_input_lens, in its order.
	switch {
	case len(q) > 1 && len(q) != len(d):
		return nil, nil, badRequest("", "Input lengths must be either 1:1, 1:N or N:N")
	case len(q) == 0:
		return nil, nil, badRequest("", "At least one text element must be given")
	case len(d) == 0:
		return nil, nil, badRequest("", "At least one text_pair element must be given")
	}
	return q, d, nil
}

// tokenLimit is vLLM's _validate_token_limit of max_tokens_per_query/_doc.
func (a *API) tokenLimit(name string, v *int64) (int, *APIError) {
	if v == nil || *v == 0 {
		return 0, nil
	}
	if *v < 0 {
		return 0, badRequest(name, "%s must be a non-negative integer", name)
	}
	if m := a.maxModelLen(); m > 0 && *v >= m {
		return 0, badRequest(name, "%s (%d) must be less than max_model_len (%d).", name, *v, m)
	}
	return int(*v), nil
}

func (a *API) scorePlanOf(r *http.Request, req *scoreRequest, kind scoreKind, rerank bool) (*scorePlan, *APIError) {
	if e := a.checkPoolModel(req.Model); e != nil {
		return nil, e
	}
	if req.Normalize != nil {
		return nil, badRequest("normalize", "Parameter `normalize` was removed; use `use_activation` instead.")
	}
	q, d, apiErr := a.scoreSides(req, rerank)
	if apiErr != nil {
		return nil, apiErr
	}
	plan := &scorePlan{kind: kind}
	if rerank {
		plan.docs = d
		if req.TopN != nil {
			if *req.TopN < 0 {
				return nil, badRequest("top_n", "top_n: Input should be greater than or equal to 0")
			}
			plan.topN = *req.TopN
		}
	}
	maxQ, apiErr := a.tokenLimit("max_tokens_per_query", req.MaxTokensPerQuery)
	if apiErr != nil {
		return nil, apiErr
	}
	maxD, apiErr := a.tokenLimit("max_tokens_per_doc", req.MaxTokensPerDoc)
	if apiErr != nil {
		return nil, apiErr
	}
	tp := &tokParams{maxLen: a.maxModelLen(), truncate: req.TruncatePromptTokens, tokLeft: a.poolModelInfo().truncLeft}
	if req.TruncationSide != nil {
		tp.side = *req.TruncationSide
	}
	if apiErr = tp.validate(); apiErr != nil {
		return nil, apiErr
	}
	job := &plan.job
	job.Params = wire.PoolingParams{Task: kind.task, Activation: wire.OptBool{Value: true, Valid: true}}
	if req.UseActivation != nil {
		job.Params.Activation.Value = *req.UseActivation
	}
	if plan.kwargs, apiErr = scoreKwargs(req); apiErr != nil {
		return nil, apiErr
	}
	if kind.cross {
		apiErr = a.crossPrompts(r.Context(), plan, q, d, tp, maxQ, maxD)
	} else {
		apiErr = a.biPrompts(plan, q, d, tp, maxQ, maxD)
	}
	if apiErr != nil {
		return nil, apiErr
	}
	if apiErr = a.jobRouting(r, job, req.Priority, req.RequestID, "score-", false); apiErr != nil {
		return nil, apiErr
	}
	return plan, nil
}

// crossPrompts tokenizes each (query, document) pair as vLLM's cross-encoder
// does: through --chat-template when given (roles query and document), else
// tokenizer(text=query, text_pair=document), or query + document as one text for a
// model whose config.json sets use_sep_token false (an LLM as reranker).
func (a *API) crossPrompts(ctx context.Context, plan *scorePlan, q, d []string, tp *tokParams, maxQ, maxD int) *APIError {
	pt, ok := a.pairTok()
	if !ok {
		return errNeedsTokenizer("documents")
	}
	sep := a.poolModelInfo().sepToken
	plan.nPairs = len(d)
	// Each pair tokenizes its query again (vLLM's way): a long query with many
	// documents would multiply the body's bytes, so the pairs' text is bounded first.
	total := 0
	for i, doc := range d {
		total += len(doc) + len(q[min(i, len(q)-1)])
	}
	if total > maxPairTextBytes {
		return badRequest("documents", "the pairs' texts (the query once per document) total %d bytes, more than the limit of %d", total, maxPairTextBytes)
	}
	for i, doc := range d {
		query := q[0]
		if len(q) > 1 {
			query = q[i]
		}
		if tp.truncate == nil {
			for _, s := range [2]string{query, doc} {
				if e := a.checkTextLen("documents", s); e != nil {
					return e
				}
			}
		}
		query = a.cutText(query, maxQ)
		if !sep || a.text.ScoreTemplate != nil {
			doc = a.cutText(doc, maxD) // the pair template's path cuts the ids instead
		}
		var ids []int64
		var types []uint8
		var apiErr *APIError
		switch {
		case a.text.ScoreTemplate != nil:
			ids, apiErr = a.templatePair(ctx, pt, plan.kwargs, query, doc, tp)
		case sep:
			ids, types, apiErr = a.sepPair(pt, query, doc, tp, maxD)
		default:
			ids, apiErr = a.joinedPair(pt, query, doc, tp, maxD)
		}
		if apiErr != nil {
			return apiErr
		}
		if ids, types, apiErr = tp.after(ids, types); apiErr != nil {
			return apiErr
		}
		split := -1
		if a.poolModelInfo().typeIDs && types != nil {
			var ok bool
			if split, ok = typeSplit(types); !ok {
				return badRequest("documents", errTypeIDs)
			}
		}
		plan.typeSplits = append(plan.typeSplits, split)
		plan.job.Prompts = append(plan.job.Prompts, ids)
	}
	return nil
}

// sepPair is tokenizer(text=query, text_pair=doc): with max_tokens_per_doc only the
// document is cut, to the query's tokens + max_tokens_per_doc + the pair's special
// tokens (or the request's own cut, if smaller).
func (a *API) sepPair(pt pairTokenizer, query, doc string, tp *tokParams, maxD int) ([]int64, []uint8, *APIError) {
	tr := tp.cut()
	if maxD > 0 {
		limit := len(a.text.Tokenizer.Encode(query, false)) + maxD + pt.NumSpecialTokensToAdd(true)
		if tr.MaxLength > 0 {
			limit = min(limit, tr.MaxLength)
		}
		tr = tokenizer.Truncation{MaxLength: limit, Strategy: tokenizer.OnlySecond, Left: tp.tokLeft}
	}
	ids, types, err := pt.EncodePair(query, doc, true, tr)
	if err != nil {
		return nil, nil, badRequest("documents", "%v", err)
	}
	return ids, types, nil
}

// joinedPair is an LLM reranker's prompt: query + document as one text; with
// max_tokens_per_doc, the two texts' ids without special tokens, the document's cut.
func (a *API) joinedPair(pt pairTokenizer, query, doc string, tp *tokParams, maxD int) ([]int64, *APIError) {
	if maxD > 0 {
		d := a.text.Tokenizer.Encode(doc, false)
		return append(a.text.Tokenizer.Encode(query, false), d[:min(len(d), maxD)]...), nil
	}
	ids, err := pt.EncodeTruncated(query+doc, true, tp.cut())
	if err != nil {
		return nil, badRequest("documents", "%v", err)
	}
	return ids, nil
}

// templatePair renders [{role: query}, {role: document}] through --chat-template
// with the request's chat_template_kwargs and tokenizes the text.
func (a *API) templatePair(ctx context.Context, pt pairTokenizer, kwargs map[string]any, query, doc string, tp *tokParams) ([]int64, *APIError) {
	in := ChatInput{
		Messages:      []map[string]any{{"role": "query", "content": query}, {"role": "document", "content": doc}},
		SpecialTokens: a.text.SpecialTokens, Kwargs: kwargs, Now: a.now,
	}
	text, err := a.text.ScoreTemplate.RenderContext(ctx, in)
	if err != nil {
		return nil, badRequest("documents", "chat template: %v", err)
	}
	if tp.truncate == nil {
		if e := a.checkTextLen("documents", text); e != nil {
			return nil, e
		}
	}
	ids, err := pt.EncodeTruncated(text, true, tp.cut())
	if err != nil {
		return nil, badRequest("documents", "%v", err)
	}
	return ids, nil
}

// scoreKwargs is the request's chat_template_kwargs with instruction folded in
// (an explicit kwargs key wins), refusing the keys vLLM reserves.
func scoreKwargs(req *scoreRequest) (map[string]any, *APIError) {
	kw := map[string]any{}
	if !isNull(req.ChatTemplateKwargs) {
		v, err := chattemplate.DecodeJSON(req.ChatTemplateKwargs)
		o, ok := v.(*chattemplate.Object)
		if err != nil || !ok {
			return nil, badRequest("chat_template_kwargs", "chat_template_kwargs: expected an object")
		}
		var reserved []string
		for _, k := range o.Keys() {
			kw[k], _ = o.Get(k)
			if k == "chat_template" || k == "tools" || k == "tokenize" {
				reserved = append(reserved, pyRepr(k))
			}
		}
		if reserved != nil {
			return nil, badRequest("chat_template_kwargs", "chat_template_kwargs contains reserved keys that conflict with fixed scorer arguments: {%s}", strings.Join(reserved, ", "))
		}
	}
	if req.Instruction != nil {
		if _, ok := kw["instruction"]; !ok {
			kw["instruction"] = *req.Instruction
		}
	}
	return kw, nil
}

// cutText keeps a text's first n tokens (0: all), vLLM's max_tokens_per_query/_doc.
// vLLM cuts the text at the n-th token's end offset; this cuts the ids and decodes
// them, the same text unless a merge spans the cut.
func (a *API) cutText(s string, n int) string {
	if n <= 0 {
		return s
	}
	ids := a.text.Tokenizer.Encode(s, false)
	if len(ids) <= n {
		return s
	}
	return a.text.Tokenizer.Decode(ids[:n], false)
}

// biPrompts tokenizes every query and document on its own, queries first.
func (a *API) biPrompts(plan *scorePlan, q, d []string, tp *tokParams, maxQ, maxD int) *APIError {
	if _, ok := a.pairTok(); !ok {
		return errNeedsTokenizer("documents")
	}
	plan.nQueries, plan.nPairs = len(q), len(d)
	for i, s := range append(append([]string(nil), q...), d...) {
		param, n := "queries", maxQ
		if i >= len(q) {
			param, n = "documents", maxD
		}
		ids, apiErr := a.encodeOne(param, a.cutText(s, n), true, tp)
		if apiErr != nil {
			return apiErr
		}
		plan.job.Prompts = append(plan.job.Prompts, ids)
	}
	if a.poolModelInfo().padID >= 0 {
		plan.padExtra = 1
	}
	return nil
}
