package dispatcher

import "github.com/switchyard-llm/switchyard/wire"

// Finished ends the request as the frontend's own finish with reason: a stop
// string found in the detokenized text, which the engine (it does not
// detokenize) cannot know. The engine is sent an ABORT, as Close does, but the
// request is counted as vLLM counts a stop-string finish: the vllm:* series
// record it with its reason (request_success_total, the e2e latency and the
// length histograms) and the outcome is the reason's, not a cancellation.
// The stream ends as Close ends it. Finished after the end is a no-op.
func (s *Stream) Finished(reason wire.FinishReason) {
	r, d := s.r, s.r.d
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return
	}
	r.done, r.aborting = true, true
	r.buf.push(Output{Finish: wire.FinishAbort})
	r.eng.vm.Finish(&r.vs, reason, d.cfg.Now())
	stop := r.stopWatch
	r.mu.Unlock()
	d.settle(r, stop, finishOutcome(reason), true, true)
}
