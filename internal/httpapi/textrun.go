package httpapi

// The answer side of a text request: per choice a textgen.Detokenizer turns the
// engine's token ids into text and applies the stop strings; a stop string ends the
// choice and aborts its engine request (the engine would keep generating
// otherwise). Completions and chat completions share the run; only their JSON
// shapes differ (vLLM's protocol.py).

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/switchyard-llm/switchyard/dispatcher"
	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/textgen"
	"github.com/switchyard-llm/switchyard/wire"
)

// textChoice is one choice's state.
type textChoice struct {
	det      *textgen.Detokenizer
	prompt   []int64
	ids      []int64
	finish   *string
	stop     any
	done     bool
	echo     string // the prompt text, sent before the output with echo
	lp       *textgen.CompletionLogprobs
	chatLP   []textgen.ChatLogprobContent
	sentRole bool
	// parsing is the tool and reasoning parsers' state of a streamed chat choice.
	parsing *choiceStream
	// promptLP collects prompt_logprobs (the first position null) when asked for;
	// lpEchoed: the echoed prompt's tokens are in lp.
	promptLP []textgen.PromptEntry
	lpEchoed bool
}

// textRun accumulates one request's choices. The handler goroutine owns it.
type textRun struct {
	text    *Text
	req     *CompletionRequest
	chat    *ChatRequest // nil: completions
	id      string
	model   string
	created int64
	choices []textChoice
	usage   Usage
	open    int
	// continuous: every chunk carries the usage so far (stream_options).
	continuous bool
	// choiceIDs: every completions choice carries its token_ids; set by
	// return_token_ids, and for a token-id prompt under TokenCompat, whose
	// answers without logprobs, stop strings or echo (the token path) always
	// carry them: the same request with logprobs has the same shape.
	choiceIDs bool
}

func newTextRun(text *Text, req *CompletionRequest, chat *ChatRequest, id, model string, created int64, prompts [][]int64) *textRun {
	n := int(req.Choices())
	run := &textRun{text: text, req: req, chat: chat, id: id, model: model, created: created, choices: make([]textChoice, len(prompts)*n)}
	run.continuous = req.StreamOptions != nil && req.StreamOptions.ContinuousUsageStats
	run.choiceIDs = req.ReturnTokenIDs || text.TokenCompat && chat == nil && req.textPrompts == nil
	params := req.textParams()
	params.Stops = textgen.CompileStops(params.Stop) // one automaton for all the choices
	var chatEcho string
	if chat != nil {
		chatEcho = chat.echoText()
	}
	for pi, p := range prompts {
		run.usage.PromptTokens += len(p)
		for j := range n {
			ch := &run.choices[pi*n+j]
			ch.prompt = p
			ch.det = textgen.New(text.Tokenizer, p, params)
			if chat != nil {
				ch.echo = chatEcho
			} else if req.Echo {
				if pi < len(req.textPrompts) {
					ch.echo = req.textPrompts[pi]
				} else {
					ch.echo = text.Tokenizer.Decode(p, params.SkipSpecialTokens)
				}
			}
			if req.Logprobs != nil && chat == nil {
				ch.lp = textgen.NewCompletionLogprobs(text.decodeOne, int(*req.Logprobs), 0)
			}
			if req.PromptLogprobs != nil {
				ch.promptLP = []textgen.PromptEntry{nil}
			}
		}
	}
	run.open = len(run.choices)
	return run
}

// delta is what one engine output of one choice adds.
type delta struct {
	text     string
	ids      []int64
	finish   *string
	stop     any
	lp       *textgen.CompletionLogprobs
	chatLP   []textgen.ChatLogprobContent
	abort    bool // a stop string ended the choice: abort its engine request
	finished bool
	// parsed is the delta the chat parsers made of text, with its finish_reason.
	parsed       *ChatDelta
	parsedFinish *string
}

// parse runs a streamed chat delta of choice i through the request's parsers;
// false: the parsers hold it back (nothing to send).
func (run *textRun) parse(i int, d *delta) bool {
	if run.chat == nil || run.chat.parse == nil {
		return true
	}
	ch := &run.choices[i]
	if ch.parsing == nil {
		ch.parsing = run.chat.parse.newStream()
	}
	out, finish, send := run.chat.parse.feed(ch.parsing, *d)
	d.parsed, d.parsedFinish = &out, finish
	return send
}

// add folds one output of choice i. A choice already ended (by a stop string)
// ignores the rest of its outputs.
func (run *textRun) add(i int, out *dispatcher.Output) (delta, bool) {
	ch := &run.choices[i]
	if ch.done {
		return delta{}, false
	}
	if out.PromptLogprobs != nil && ch.promptLP != nil {
		if pos, err := textgen.PromptPositions(out.PromptLogprobs); err == nil {
			ch.promptLP = append(ch.promptLP, textgen.PromptEntries(run.text.decodeOne, pos)...)
		}
	}
	if len(out.TokenIDs) == 0 && !out.Finished() {
		return delta{}, false // prompt logprobs only (a chunked prefill)
	}
	finish := out.Finish
	stopReason := out.StopReason.Value()
	s, hit := ch.det.Update(out.TokenIDs, finish == wire.FinishStop)
	if hit {
		finish, stopReason = wire.FinishStop, s
	}
	d := delta{ids: out.TokenIDs, abort: hit && !out.Finished()}
	ch.ids = append(ch.ids, out.TokenIDs...)
	run.usage.CompletionTokens += len(out.TokenIDs)
	if ch.lp != nil && ch.echo != "" && !ch.lpEchoed {
		// echo with logprobs: the prompt's tokens come first, with their logprobs.
		d.lp = ch.lp.AddPrompt(nil, ch.prompt, ch.promptLP)
		ch.lpEchoed = true
	}
	var pos []textgen.Position
	if out.Logprobs != nil {
		pos, _ = textgen.Positions(out.Logprobs)
	}
	switch {
	case ch.lp != nil:
		d.lp = ch.lp.Add(d.lp, out.TokenIDs, pos)
	case run.chat != nil && run.req.Logprobs != nil:
		d.chatLP = textgen.ChatContent(run.text.decodeOne, out.TokenIDs, pos, int(*run.req.Logprobs))
		ch.chatLP = append(ch.chatLP, d.chatLP...)
	}
	if finish != wire.FinishNone {
		fr := finish.String()
		ch.finish, ch.stop, ch.done = &fr, stopReason, true
		d.finish, d.stop, d.finished = ch.finish, stopReason, true
		run.open--
	}
	d.text = ch.det.Next(d.finished)
	return d, true
}

// fail ends choice i with reason (abort or error) if it is still open.
func (run *textRun) fail(i int, reason wire.FinishReason) delta {
	ch := &run.choices[i]
	if !ch.done {
		fr := reason.String()
		ch.finish, ch.done = &fr, true
		run.open--
	}
	return delta{finish: ch.finish, finished: true}
}

func (run *textRun) done() bool { return run.open == 0 }

func (run *textRun) totals() *Usage {
	u := run.usage
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return &u
}

// into copies the outcome into the token accumulator the access log and the
// trace span read.
func (run *textRun) into(c *completion) {
	c.usage = run.usage
	for i := range run.choices {
		if i < len(c.choices) {
			c.choices[i].FinishReason = run.choices[i].finish
		}
	}
}

// serveText answers a text request: server-sent events when streaming, one JSON
// body otherwise.
func (a *API) serveText(ctx context.Context, w http.ResponseWriter, r *http.Request, run *textRun, streams []*dispatcher.Stream, events *fanIn, span *apicore.Span) {
	var send func(v any) bool
	var write func(b []byte) bool
	buf := make([]byte, 0, 512)
	fast := run.fastChunks()
	var prefix []byte
	if run.req.Stream {
		rc := http.NewResponseController(w)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		w.WriteHeader(http.StatusOK)
		write = func(b []byte) bool {
			if _, err := w.Write(b); err != nil {
				return false
			}
			return rc.Flush() == nil
		}
		send = func(v any) bool {
			b, _ := json.Marshal(v)
			buf = append(append(append(buf[:0], "data: "...), b...), "\n\n"...)
			return write(buf)
		}
		prefix = run.chunkPrefix()
		if run.chat != nil {
			// vLLM's first chunk of each choice: the role, empty content.
			for i := range run.choices {
				if !send(run.chatChunk(i, delta{}, true)) {
					return
				}
			}
			for i := range run.choices { // then chat's echo, as vLLM's
				if run.choices[i].echo != "" && !send(run.echoChunk(i)) {
					return
				}
			}
		}
	}
	for !run.done() {
		ev, err := events.next(ctx)
		if err != nil {
			return // the client left; the caller's deferred Close aborts what is live
		}
		var d delta
		if ev.err != nil {
			apiErr := a.failure(ev.err)
			reason := wire.FinishError
			if apiErr.Status == http.StatusServiceUnavailable {
				reason = wire.FinishAbort
			}
			if !run.req.Stream {
				writeError(w, apiErr)
				return
			}
			d = run.fail(ev.choice, reason)
			run.parse(ev.choice, &d)
			if !send(run.chunk(ev.choice, d)) || !send(apiErr.body()) {
				return
			}
			continue
		}
		if !ev.out.Finished() && len(ev.out.TokenIDs) == 0 && ev.out.PromptLogprobs == nil {
			continue
		}
		if len(ev.out.TokenIDs) > 0 {
			span.FirstToken()
		}
		d, ok := run.add(ev.choice, &ev.out)
		if !ok {
			continue
		}
		if d.abort {
			// The stop string ended it: the engine must stop too, and the
			// vllm:* series count a finish with reason stop, as vLLM's.
			streams[ev.choice].Finished(wire.FinishStop)
		}
		if run.req.Stream && run.parse(ev.choice, &d) {
			if fast {
				buf = append(run.appendChunk(append(buf[:0], "data: "...), prefix, ev.choice, d), "\n\n"...)
				if !write(buf) {
					return
				}
			} else if !send(run.chunk(ev.choice, d)) {
				return
			}
		}
	}
	if !run.req.Stream {
		writeJSON(w, http.StatusOK, run.response())
		return
	}
	if run.req.StreamOptions != nil && run.req.StreamOptions.IncludeUsage && !send(run.usageChunk()) {
		return
	}
	if _, err := io.WriteString(w, "data: [DONE]\n\n"); err == nil {
		_ = http.NewResponseController(w).Flush()
	}
}
