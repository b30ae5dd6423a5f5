package httpapi

// The checks a completions request passes before anything is sent: admission
// (shutdown, --max-concurrent-requests, weighted by choices in slots.go) and
// the context length.

import (
	"net/http"

	"github.com/switchyard-llm/switchyard/wire"
)

// admit refuses a request while shutting down or at --max-concurrent-requests;
// release frees its slot.
func (a *API) admit(w http.ResponseWriter) (release func(), ok bool) {
	if reason := a.shutdownReason(); reason != nil {
		// Draining: the listener stays open so new requests learn why (the README's
		// promise) instead of meeting a refused connection.
		w.Header().Set("Connection", "close")
		writeError(w, &APIError{Status: http.StatusServiceUnavailable, Type: TypeServiceUnavailable,
			Message: "switchyard is shutting down and accepts no new requests"})
		return nil, false
	}
	return a.admitChoices(w, 0, 1, 0)
}

// checkContext refuses a max_tokens the client set that does not fit the engine's
// context after the prompt, with vLLM's serving layer's words and status (400). A
// max_tokens the client left out (the default 16) is not refused: the dispatcher
// lowers it to the room left. An unpinned request is checked against the largest
// context among ready engines (in a deployment of one model, all are the same).
func (a *API) checkContext(req *CompletionRequest, ereqs []*wire.EngineCoreRequest) *APIError {
	if req.MaxTokens == nil || len(ereqs) == 0 {
		return nil
	}
	rank := -1
	if ereqs[0].DataParallelRank.Valid {
		rank = int(ereqs[0].DataParallelRank.Value)
	}
	maxLen := a.contextLen(rank)
	if maxLen <= 0 {
		return nil
	}
	want := *req.MaxTokens
	for _, er := range ereqs {
		n := int64(len(er.PromptTokenIDs))
		if n >= maxLen {
			continue // the dispatcher refuses the prompt itself, naming prompt
		}
		if want > maxLen-n {
			return badRequest("max_tokens", "'max_tokens' or 'max_completion_tokens' is too large: %d. "+
				"This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
				want, maxLen, n, want, maxLen, n)
		}
	}
	return nil
}
