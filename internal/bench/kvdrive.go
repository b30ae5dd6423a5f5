package bench

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/wire"
)

// kvRequestTimeout bounds one request: far beyond any prefill queue the workloads
// build, so reaching it means an engine or switchyard lost the request.
const kvRequestTimeout = 2 * time.Minute

// kvDriver replays a workload through the dispatcher's Go API: a closed loop per
// conversation (a turn is sent its think time after the previous one's answer), all
// conversations at once, so turns of different conversations interleave as their
// starts and think times fall.
type kvDriver struct {
	d *dispatcher.Dispatcher
	w *KVWorkload

	mu   sync.Mutex
	ttft *Hist

	finished, failed, mismatches atomic.Int64
	last                         atomic.Int64 // unix ns of the latest answer
}

func newKVDriver(d *dispatcher.Dispatcher, w *KVWorkload) *kvDriver {
	return &kvDriver{d: d, w: w, ttft: NewHist()}
}

// run replays every conversation from began and returns when all have ended (or ctx
// has).
func (k *kvDriver) run(ctx context.Context, began time.Time) {
	var wg sync.WaitGroup
	for c := range k.w.Config.Conversations {
		wg.Go(func() { k.conversation(ctx, c, began) })
	}
	wg.Wait()
}

// conversation sends one conversation's turns in order: turn 0 its Delay after the
// run began, each later turn its Delay after the previous answer.
func (k *kvDriver) conversation(ctx context.Context, conv int, began time.Time) {
	from := began
	for _, r := range k.w.Conversation(conv) {
		if !sleepUntil(ctx, from.Add(r.Delay)) {
			return
		}
		from = k.one(ctx, r)
	}
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// kvAnswer is what the deliver callback gathers for one request; the driver reads
// it only after done is closed.
type kvAnswer struct {
	first  time.Time
	tokens []int64
	failed bool
	done   chan struct{}
}

// one sends r and waits for its answer; it returns when the answer ended.
func (k *kvDriver) one(ctx context.Context, r KVRequest) time.Time {
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(int64(len(r.Answer)))
	sp.IgnoreEOS = true
	sp.Normalize()
	id := "kv-" + strconv.Itoa(r.Conv) + "-" + strconv.Itoa(r.Turn)
	sent := time.Now()
	req := &wire.EngineCoreRequest{RequestID: id, PromptTokenIDs: r.Prompt, Sampling: &sp,
		ArrivalTime: float64(sent.UnixNano()) / 1e9}
	a := &kvAnswer{tokens: make([]int64, 0, len(r.Answer)), done: make(chan struct{})}
	if _, err := k.d.SubmitFunc(req, a.deliver); err != nil {
		k.failed.Add(1)
		return time.Now()
	}
	tm := time.NewTimer(kvRequestTimeout)
	defer tm.Stop()
	select {
	case <-a.done:
	case <-tm.C:
		k.d.Abort(id)
		k.failed.Add(1)
		return time.Now()
	case <-ctx.Done():
		k.d.Abort(id)
		return time.Now()
	}
	end := time.Now()
	k.record(r, a, sent, end)
	return end
}

// deliver runs on the engine's receive goroutine, never concurrently for one
// request, and nothing follows a finished output or an error.
func (a *kvAnswer) deliver(_ int, out *wire.EngineCoreOutput, err error) {
	if err != nil {
		a.failed = true
		close(a.done)
		return
	}
	if len(out.NewTokenIDs) > 0 && a.first.IsZero() {
		a.first = time.Now()
	}
	a.tokens = append(a.tokens, out.NewTokenIDs...)
	if out.Finished() {
		a.failed = out.FinishReason == wire.FinishAbort || out.FinishReason == wire.FinishError
		close(a.done)
	}
}

// record counts one ended request.
func (k *kvDriver) record(r KVRequest, a *kvAnswer, sent, end time.Time) {
	if a.failed || a.first.IsZero() {
		k.failed.Add(1)
		return
	}
	k.finished.Add(1)
	if !slices.Equal(a.tokens, r.Answer) {
		k.mismatches.Add(1)
	}
	for {
		last := k.last.Load()
		if end.UnixNano() <= last || k.last.CompareAndSwap(last, end.UnixNano()) {
			break
		}
	}
	k.mu.Lock()
	k.ttft.Record(a.first.Sub(sent))
	k.mu.Unlock()
}

// figures are the client side's figures; the engines' counts come separately.
func (k *kvDriver) figures(policy string, began time.Time) *KVPolicy {
	k.mu.Lock()
	s := k.ttft.Summarize()
	k.mu.Unlock()
	p := &KVPolicy{Policy: policy, Requests: k.finished.Load(), Failed: k.failed.Load(),
		AnswerMismatches: k.mismatches.Load(), TTFT: s, TTFTP50MS: s.P50US / 1e3, TTFTP90MS: s.P90US / 1e3}
	if last := k.last.Load(); last > 0 {
		p.Seconds = time.Duration(last - began.UnixNano()).Seconds()
	}
	return p
}
