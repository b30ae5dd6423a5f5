package httpapi

// X-Request-Id as vLLM's API server reads and writes it: a client's header names
// its request ("cmpl-<X-Request-Id>", "chatcmpl-<X-Request-Id>": the answer's id,
// the access log's request_id, the trace's request id), and with
// --enable-request-id-headers every answer carries X-Request-Id back. The engine
// request ids stay ours (random), so two clients sending one id cannot collide.

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/switchyard-llm/switchyard/internal/apicore"
)

// RequestIDHeader is the header a client names its request with.
const RequestIDHeader = "X-Request-Id"

// headerRequestID is the visible id the header asks for ("" = none), prefix
// included.
func headerRequestID(r *http.Request, prefix string) (string, *APIError) {
	v := strings.TrimSpace(r.Header.Get(RequestIDHeader))
	switch {
	case v == "":
		return "", nil
	case len(v) > apicore.MaxRequestIDLen:
		// The id is repeated in every streamed chunk: a long one multiplies the answer.
		return "", badRequest(RequestIDHeader, "%s is %d bytes, more than the limit of %d", RequestIDHeader, len(v), apicore.MaxRequestIDLen)
	}
	return prefix + v, nil
}

// echoRequestID sets X-Request-Id on every answer: the client's, else a random
// one (vLLM's XRequestIdMiddleware).
func echoRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if id == "" || len(id) > apicore.MaxRequestIDLen {
			var b [16]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r)
	})
}
