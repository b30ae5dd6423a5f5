package httpapi

// /ping is vLLM's SageMaker health route: GET and POST both answer as /health
// does, so a load balancer configured for vLLM probes switchyard unchanged.

import "net/http"

// pingRoute is the Allow header of a /ping asked with another method.
const pingRoute = http.MethodGet + ", " + http.MethodPost

// ping serves GET and POST /ping.
func (a *API) ping(w http.ResponseWriter, r *http.Request) { a.health(w, r) }

// shuttingDown answers /health with a 503 once shutdown began: the requests in
// flight still finish, but a load balancer must stop sending new ones, which
// the dispatcher refuses from then on.
func (a *API) shuttingDown(w http.ResponseWriter) bool {
	reason := a.shutdownReason()
	if reason == nil {
		return false
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting_down", "ready_engines": 0,
		"reason": reason.Error()})
	return true
}
