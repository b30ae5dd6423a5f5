package httpapi

// The answers of /score and /rerank: each pair's score from the engines' outputs
// (a cross-encoder's one value, or the cosine of two embeddings), and vLLM's
// ScoreResponse and RerankResponse.

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/switchyard-llm/switchyard/wire"
)

// poolPairs runs a score job with each pair's type-id split in its PoolingParams
// (none: -1; no splits at all: the job as it is). Pairs sharing a split go as one
// pool call (all of them in 1:N, where the query is the same); an N:N request with
// several splits runs one call per split at once, and the first failure ends the
// others.
func (a *API) poolPairs(ctx context.Context, job poolJob, splits []int) ([]pooled, *APIError) {
	groups := map[int][]int{}
	for i, s := range splits {
		groups[s] = append(groups[s], i)
	}
	withSplit := func(j poolJob, s int) poolJob {
		if s >= 0 {
			j.Params.CompressedTokenTypeIDs = wire.SomeInt(int64(s))
		}
		return j
	}
	if len(groups) <= 1 {
		s := -1
		if len(splits) > 0 {
			s = splits[0]
		}
		return a.pool(ctx, withSplit(job, s))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]pooled, len(job.Prompts))
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first *APIError
	for s, idx := range groups {
		sub := withSplit(job, s)
		sub.BaseID = fmt.Sprintf("%s-t%d", job.BaseID, s)
		sub.Prompts = make([][]int64, len(idx))
		for k, i := range idx {
			sub.Prompts[k] = job.Prompts[i]
		}
		wg.Go(func() {
			answers, apiErr := a.pool(ctx, sub)
			mu.Lock()
			defer mu.Unlock()
			if apiErr != nil {
				if first == nil {
					first = apiErr
					cancel()
				}
				return
			}
			for k, i := range idx {
				out[i] = answers[k]
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
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
