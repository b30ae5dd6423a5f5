package httpapi

// The answers of a completions request: one JSON body, or an SSE stream.

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/openaijson"
	"github.com/switchyard-llm/switchyard/wire"
)

// writeCompletion writes the non-streaming answer: by hand (openaijson), or
// through encoding/json when a value needs it.
func writeCompletion(w http.ResponseWriter, c *completion) {
	bp := answerBufs.Get().(*[]byte)
	defer answerBufs.Put(bp)
	u := c.totals()
	b, ok := openaijson.AppendCompletion((*bp)[:0], c.id, c.model, c.created, c.choices, u)
	if !ok {
		b = openaijson.MarshalCompletion((*bp)[:0], c.id, c.model, c.created, c.choices, u, false)
	}
	b = append(b, '\n')
	*bp = b
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// stream answers with server-sent events: one chunk per engine step per choice, a
// final usage chunk when asked for, then "data: [DONE]".
func (a *API) stream(w http.ResponseWriter, r *http.Request, c *completion, events *fanIn, includeUsage bool, span *apicore.Span) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	bp := answerBufs.Get().(*[]byte)
	defer answerBufs.Put(bp)
	buf := *bp
	write := func() bool {
		buf = append(buf, "\n\n"...)
		*bp = buf
		if _, err := w.Write(buf); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		buf = append(append(buf[:0], "data: "...), b...)
		return write()
	}
	// sendChunk writes a chunk of one choice (or none, with usage) without building
	// a CompletionResponse and without encoding/json.
	one := make([]Choice, 1)
	sendChunk := func(ch *Choice, usage *Usage) bool {
		chs := one[:0]
		if ch != nil {
			one[0] = *ch
			chs = one
		}
		buf = append(buf[:0], "data: "...)
		var ok bool
		if buf, ok = openaijson.AppendCompletion(buf, c.id, c.model, c.created, chs, usage); !ok {
			buf = openaijson.MarshalCompletion(buf, c.id, c.model, c.created, chs, usage, true)
		}
		return write()
	}
	for !c.done() {
		ev, err := events.next(ctx)
		if err != nil {
			return
		}
		if ev.err != nil {
			// The choice ends here; the client learns why, and the other choices go on.
			apiErr := a.failure(ev.err)
			reason := wire.FinishError
			if apiErr.Status == http.StatusServiceUnavailable {
				reason = wire.FinishAbort
			}
			failed := c.fail(ev.choice, reason)
			if !sendChunk(&failed, nil) || !send(apiErr.body()) {
				return
			}
			continue
		}
		if !ev.out.Finished() && len(ev.out.TokenIDs) == 0 {
			continue
		}
		if len(ev.out.TokenIDs) > 0 {
			span.FirstToken()
		}
		delta := c.add(ev.choice, toWire(&ev.out))
		if !sendChunk(&delta, nil) {
			return // write failed: the client left; deferred Close aborts the rest
		}
	}
	if includeUsage && !sendChunk(nil, c.totals()) {
		return
	}
	if _, err := io.WriteString(w, "data: [DONE]\n\n"); err == nil {
		_ = rc.Flush()
	}
}

// toWire views a dispatcher output as the engine's, for the accumulator.
func toWire(o *dispatcher.Output) *wire.EngineCoreOutput {
	return &wire.EngineCoreOutput{NewTokenIDs: o.TokenIDs, FinishReason: o.Finish, StopReason: o.StopReason}
}

// answerBufs are the buffers JSON answers are built in.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}
