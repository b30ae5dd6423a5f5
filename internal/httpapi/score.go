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
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strings"

	"github.com/switchyard-llm/switchyard/internal/tokenizer"
	"github.com/switchyard-llm/switchyard/wire"
)

// maxScoreInputs bounds the queries and the documents of one request: each pair
// (or text) is an engine request. Cohere's own rerank takes up to 1,000 documents.
const maxScoreInputs = 1000

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
	more, ok := a.admitChoices(w, httpClientKey(r), len(plan.job.Prompts), 1)
	if !ok {
		return
	}
	defer more()
	answers, apiErr := a.pool(r.Context(), plan.job)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	scores, tokens, apiErr := plan.scores(answers)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	id, apiErr := headerRequestID(r, "score-")
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if id == "" {
		id = randomID("score-")
	}
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
	if kind.cross {
		apiErr = a.crossPrompts(plan, q, d, tp, maxQ, maxD)
	} else {
		apiErr = a.biPrompts(plan, q, d, tp, maxQ, maxD)
	}
	if apiErr != nil {
		return nil, apiErr
	}
	if apiErr = a.jobRouting(r, job, req.Priority, req.RequestID, "score-"); apiErr != nil {
		return nil, apiErr
	}
	return plan, nil
}

// jobRouting fills the job's priority, rank (X-data-parallel-rank) and engine ids.
func (a *API) jobRouting(r *http.Request, job *poolJob, priority *int64, requestID *string, prefix string) *APIError {
	if priority != nil {
		job.Priority = *priority
	}
	var apiErr *APIError
	if job.Rank, apiErr = rankHeader(r); apiErr != nil {
		return apiErr
	}
	job.BaseID = randomID(prefix)
	if requestID != nil && *requestID != "" {
		if len(*requestID) > 256 {
			return badRequest("request_id", "request_id is longer than 256 bytes")
		}
		job.BaseID = *requestID + "-" + job.BaseID[len(prefix):]
	}
	return nil
}

// crossPrompts tokenizes each (query, document) pair as vLLM's cross-encoder
// does: tokenizer(text=query, text_pair=document) with the request's truncation,
// or only the document cut when max_tokens_per_doc is set.
func (a *API) crossPrompts(plan *scorePlan, q, d []string, tp *tokParams, maxQ, maxD int) *APIError {
	pt, ok := a.pairTok()
	if !ok {
		return errNeedsTokenizer("documents")
	}
	plan.nPairs = len(d)
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
		query = a.cutText(pt, query, maxQ)
		tr := tp.cut()
		if maxD > 0 {
			// vLLM: only the document is cut, to the query's tokens + max_tokens_per_doc +
			// the pair's special tokens (or the request's own cut, if smaller).
			limit := len(a.text.Tokenizer.Encode(query, false)) + maxD + pt.NumSpecialTokensToAdd(true)
			if tr.MaxLength > 0 {
				limit = min(limit, tr.MaxLength)
			}
			tr = tokenizer.Truncation{MaxLength: limit, Strategy: tokenizer.OnlySecond, Left: tp.tokLeft}
		}
		ids, types, err := pt.EncodePair(query, doc, true, tr)
		if err != nil {
			return badRequest("documents", "%v", err)
		}
		ids, types, apiErr := tp.after(ids, types)
		if apiErr != nil {
			return apiErr
		}
		if _, ok := typeSplit(types); !ok && a.poolModelInfo().typeIDs {
			return badRequest("documents", errTypeIDs)
		}
		plan.job.Prompts = append(plan.job.Prompts, ids)
	}
	return nil
}

// cutText keeps a text's first n tokens (0: all), vLLM's max_tokens_per_query/_doc.
// vLLM cuts the text at the n-th token's end offset; this cuts the ids and decodes
// them, the same text unless a merge spans the cut.
func (a *API) cutText(pt pairTokenizer, s string, n int) string {
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
	pt, ok := a.pairTok()
	if !ok {
		return errNeedsTokenizer("documents")
	}
	plan.nQueries, plan.nPairs = len(q), len(d)
	for i, s := range append(append([]string(nil), q...), d...) {
		param, n := "queries", maxQ
		if i >= len(q) {
			param, n = "documents", maxD
		}
		ids, apiErr := a.encodeOne(param, a.cutText(pt, s, n), true, tp)
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

// scores reads the answers: each pair's score and its prompt tokens, in pair order.
func (p *scorePlan) scores(answers []pooled) ([]float64, []int, *APIError) {
	scores := make([]float64, p.nPairs)
	tokens := make([]int, p.nPairs)
	for i := range scores {
		if p.kind.cross {
			a := answers[i]
			if len(a.Data) != 1 {
				return nil, nil, badRequest("", "pooled_data should be a scalar score")
			}
			scores[i], tokens[i] = float64(a.Data[0]), a.PromptTokens
			continue
		}
		qi := 0
		if p.nQueries > 1 {
			qi = i
		}
		e1, e2 := answers[qi], answers[p.nQueries+i]
		if len(e1.Shape) != 1 || len(e2.Shape) != 1 || len(e1.Data) != len(e2.Data) {
			return nil, nil, badRequest("", "the embeddings of a pair differ in shape (%v, %v)", e1.Shape, e2.Shape)
		}
		scores[i] = cosine(e1.Data, e2.Data)
		tokens[i] = e1.PromptTokens + p.padExtra + e2.PromptTokens
	}
	return scores, tokens, nil
}

// cosine is torch's cosine_similarity (eps 1e-8) of two float32 vectors, rounded
// to float32 as the tensor's item() is.
func cosine(x, y []float32) float64 {
	var dot, nx, ny float64
	for i := range x {
		a, b := float64(x[i]), float64(y[i])
		dot += a * b
		nx += a * a
		ny += b * b
	}
	return float64(float32(dot / math.Max(math.Sqrt(nx)*math.Sqrt(ny), 1e-8)))
}

// scoreData is vLLM's ScoreResponseData, keys in its order.
type scoreData struct {
	Index  int     `json:"index"`
	Object string  `json:"object"`
	Score  float64 `json:"score"`
}

type scoreResponse struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Data    []scoreData `json:"data"`
	Usage   pooledUsage `json:"usage"`
}

func scoreResponseOf(id string, created int64, model string, scores []float64, tokens []int) scoreResponse {
	resp := scoreResponse{ID: id, Object: "list", Created: created, Model: model, Data: make([]scoreData, len(scores))}
	for i, s := range scores {
		resp.Data[i] = scoreData{Index: i, Object: "score", Score: s}
		resp.Usage.PromptTokens += tokens[i]
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	return resp
}

// rerankDocument is vLLM's RerankDocument: text, or the multi-modal content parts.
type rerankDocument struct {
	Text       *string `json:"text"`
	MultiModal any     `json:"multi_modal"`
}

type rerankResult struct {
	Index          int            `json:"index"`
	Document       rerankDocument `json:"document"`
	RelevanceScore float64        `json:"relevance_score"`
}

type rerankUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

type rerankResponse struct {
	ID      string         `json:"id"`
	Model   string         `json:"model"`
	Usage   rerankUsage    `json:"usage"`
	Results []rerankResult `json:"results"`
}

// rerankResponseOf sorts by relevance, highest first (a stable sort, as Python's),
// and keeps top_n when 0 < top_n < the number of documents. Usage counts every
// document, kept or not.
func rerankResponseOf(id, model string, plan *scorePlan, scores []float64, tokens []int) rerankResponse {
	resp := rerankResponse{ID: id, Model: model, Results: make([]rerankResult, len(scores))}
	for i, s := range scores {
		doc := plan.docs[i]
		resp.Results[i] = rerankResult{Index: i, Document: rerankDocument{Text: &doc}, RelevanceScore: s}
		resp.Usage.PromptTokens += tokens[i]
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	sort.SliceStable(resp.Results, func(i, j int) bool { return resp.Results[i].RelevanceScore > resp.Results[j].RelevanceScore })
	if n := plan.topN; n > 0 && n < int64(len(plan.docs)) {
		resp.Results = resp.Results[:n]
	}
	return resp
}
