package httpapi

// The pooling core shared by /v1/embeddings, /pooling, /classify, /score and
// /rerank: each input is one engine ADD with pooling_params, the answers come back
// as one pooling_output tensor each, read as bounded float32s and returned in input
// order. Which tasks the model serves comes from the engines themselves
// (get_supported_tasks), as vLLM's API server asks its engine client at start.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// poolMaxElems bounds one pooling answer: 2^24 floats (64 MiB as float32), far
// above any embedding (a few thousand) or a token task's prompt x hidden size at
// the contexts served, far below what would let an engine exhaust memory.
const poolMaxElems = 1 << 24

// tasksTimeout bounds asking the engines for their tasks.
const tasksTimeout = 10 * time.Second

// poolJob is one pooling request: its inputs, already tokenized and truncated.
type poolJob struct {
	Prompts [][]int64
	Params  wire.PoolingParams // Task set; copied into each ADD
	BaseID  string             // engine ids are BaseID-<index>
	// VisibleID is the answer's id (the client's X-Request-Id or request_id, with
	// the endpoint's prefix, else BaseID); pool does not use it.
	VisibleID string
	Rank      wire.OptInt // X-data-parallel-rank
	Priority  int64
	MaxElems  int // bound on each answer's elements; 0 = poolMaxElems
}

// pooled is one input's answer.
type pooled struct {
	Shape        []int64   // [hidden], [labels], [1], or [tokens, hidden] for token tasks
	Data         []float32 // row-major
	PromptTokens int
}

// pool sends every prompt of job as its own ADD and waits for all of them. The
// answers are in input order. On the first failure the other requests are
// aborted (their streams closed) and the failure is returned, ready for
// writeError. ctx is the HTTP request's: a client that leaves aborts them all.
func (a *API) pool(ctx context.Context, job poolJob) ([]pooled, *APIError) {
	maxElems := job.MaxElems
	if maxElems <= 0 {
		maxElems = poolMaxElems
	}
	arrival := float64(a.now().UnixNano()) / 1e9
	streams := make([]*dispatcher.Stream, len(job.Prompts))
	defer func() {
		for _, s := range streams {
			if s != nil {
				s.Close() // a finished stream's Close is a no-op; a live one is aborted
			}
		}
	}()
	for i, prompt := range job.Prompts {
		p := job.Params
		req := &wire.EngineCoreRequest{
			RequestID:        fmt.Sprintf("%s-%d", job.BaseID, i),
			PromptTokenIDs:   prompt,
			Pooling:          &p,
			ArrivalTime:      arrival,
			DataParallelRank: job.Rank,
			Priority:         job.Priority,
			ExternalReqID:    wire.SomeString(job.BaseID),
		}
		s, err := a.d.Submit(ctx, req)
		if err != nil {
			return nil, a.submitError(err)
		}
		streams[i] = s
	}
	out := make([]pooled, len(job.Prompts))
	for i, s := range streams {
		shape, data, apiErr := a.recvPooled(ctx, s, maxElems)
		if apiErr != nil {
			return nil, apiErr
		}
		if !shapeFits(job.Params.Task, shape, len(job.Prompts[i])) {
			return nil, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal,
				Message: fmt.Sprintf("engine's pooling output of shape %v does not fit task %s of a %d-token prompt", shape, job.Params.Task, len(job.Prompts[i]))}
		}
		out[i] = pooled{Shape: shape, Data: data, PromptTokens: len(job.Prompts[i])}
	}
	return out, nil
}

// jobRouting fills the job's priority, rank (X-data-parallel-rank), engine ids and
// answer id, before any engine request. The engine ids stay ours (unique), led by the body's
// request_id when it has one. The answer is named by X-Request-Id, else, where
// bodyNames (vLLM's embeddings and pooling take it as the default), by the body's
// request_id, else by the engine ids' random part; each with prefix.
func (a *API) jobRouting(r *http.Request, job *poolJob, priority *int64, requestID *string, prefix string, bodyNames bool) *APIError {
	if priority != nil {
		job.Priority = *priority
	}
	var apiErr *APIError
	if job.Rank, apiErr = rankHeader(r); apiErr != nil {
		return apiErr
	}
	job.BaseID = randomID(prefix)
	job.VisibleID = job.BaseID
	if requestID != nil && *requestID != "" {
		if len(*requestID) > apicore.MaxRequestIDLen {
			return badRequest("request_id", "request_id is longer than %d bytes", apicore.MaxRequestIDLen)
		}
		if bodyNames {
			job.VisibleID = prefix + *requestID
		}
		job.BaseID = *requestID + "-" + job.BaseID[len(prefix):]
	}
	id, apiErr := headerRequestID(r, prefix)
	if apiErr != nil {
		return apiErr
	}
	if id != "" {
		job.VisibleID = id
	}
	return nil
}

// runPool sends a handler's job once the client's share of engine requests takes
// its prompts (each is one, as a completion's choice), with each pair's type-id
// split when splits is given (poolPairs); the share is returned when the engine
// requests are done. ok false: the refusal or failure is written.
func (a *API) runPool(w http.ResponseWriter, r *http.Request, job poolJob, splits []int) ([]pooled, bool) {
	more, ok := a.admitChoices(w, httpClientKey(r), len(job.Prompts), 1)
	if !ok {
		return nil, false
	}
	defer more()
	answers, apiErr := a.poolPairs(r.Context(), job, splits)
	if apiErr != nil {
		writeError(w, apiErr)
		return nil, false
	}
	return answers, true
}

// recvPooled waits for s's final output and reads its tensor.
func (a *API) recvPooled(ctx context.Context, s *dispatcher.Stream, maxElems int) ([]int64, []float32, *APIError) {
	for {
		o, err := s.Recv(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return nil, nil, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal, Message: "the engine finished the request without a pooling output"}
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return nil, nil, &APIError{Status: 499, Type: TypeBadRequest, Message: "client went away"}
		case err != nil:
			return nil, nil, a.failure(err)
		case !o.Finished():
			continue
		case o.Finish == wire.FinishAbort:
			return nil, nil, &APIError{Status: 499, Type: TypeBadRequest, Message: "request aborted"}
		case o.Finish == wire.FinishError:
			return nil, nil, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal, Message: "the engine failed the request (finish reason error)"}
		}
		shape, data, perr := wire.PoolingFloats(o.PoolingOutput, maxElems)
		if perr != nil {
			return nil, nil, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal, Message: "engine's pooling output refused: " + perr.Error()}
		}
		for _, v := range data {
			if v != v || v > 3.4e38 || v < -3.4e38 { // NaN or ±Inf: vLLM's JSON encoder refuses them too
				return nil, nil, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal, Message: "engine's pooling output holds NaN or infinity"}
			}
		}
		return shape, data, nil
	}
}

// taskCache remembers the engines' tasks for one set of ready ranks.
type taskCache struct {
	mu    sync.Mutex
	key   string
	tasks []string
}

// supportedTasks returns the tasks the engines serve, in the first answering
// engine's order (vLLM's client answers with the first engine's result), asked
// once per set of ready engines.
func (a *API) supportedTasks(ctx context.Context) ([]string, *APIError) {
	var ranks []string
	for _, e := range a.engines() {
		if e.Ready {
			ranks = append(ranks, fmt.Sprint(e.Rank))
		}
	}
	sort.Strings(ranks)
	key := strings.Join(ranks, ",")
	c := &a.poolTasks
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key == key && c.tasks != nil {
		return c.tasks, nil
	}
	if len(ranks) == 0 {
		return nil, &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable, Message: "no engine is connected and ready"}
	}
	ctx, cancel := context.WithTimeout(ctx, tasksTimeout)
	defer cancel()
	res, err := a.d.CallUtility(ctx, "get_supported_tasks")
	if err != nil {
		return nil, a.submitError(err)
	}
	for _, r := range res.Results {
		if r.Err != nil {
			continue
		}
		tasks, ok := stringList(r.Value)
		if !ok {
			continue
		}
		c.key, c.tasks = key, tasks
		return tasks, nil
	}
	return nil, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal,
		Message: fmt.Sprintf("the engines did not say which tasks they serve: %v", res.Err())}
}

// stringList reads get_supported_tasks' tuple of str, at most 64 of them.
func stringList(v any) ([]string, bool) {
	l, ok := v.([]any)
	if !ok || len(l) > 64 {
		return nil, false
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, ok := x.(string)
		if !ok || len(s) > 64 {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// poolingTasks are vLLM's pooling task names, in the order the default task of
// /pooling is chosen from what the model serves.
var poolingTasks = []string{"embed", "classify", "score", "token_embed", "token_classify", "encode", "reward"}

// isPoolingTask reports whether t is one of vLLM's pooling task names.
func isPoolingTask(t string) bool { return slices.Contains(poolingTasks, t) }

// requireTask answers the endpoint's vLLM 400 when the model does not serve task;
// api is the endpoint's name in vLLM's message ("Embeddings", "Pooling", ...).
func (a *API) requireTask(ctx context.Context, task, api string) *APIError {
	tasks, apiErr := a.supportedTasks(ctx)
	if apiErr != nil {
		return apiErr
	}
	if !slices.Contains(tasks, task) {
		return badRequest("", "The model does not support %s API", api)
	}
	return nil
}

// shapeFits: a sequence task answers one vector ([n], or a 0-d score), a token task
// one row per prompt token at most ([tokens, n]).
func shapeFits(task string, shape []int64, promptLen int) bool {
	switch task {
	case "token_embed", "token_classify", "encode", "reward":
		return len(shape) == 2 && shape[0] <= int64(promptLen)
	}
	return len(shape) <= 1
}
