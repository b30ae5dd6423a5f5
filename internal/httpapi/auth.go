package httpapi

// --api-key, as vLLM's AuthenticationMiddleware has it: every path under /v1 needs
// "Authorization: Bearer KEY" (the scheme in any case) naming one of the keys;
// /health and /metrics stay open for probes and scrapers, and OPTIONS (CORS
// preflight) passes. Keys are compared as SHA-256 digests in constant time, so the
// time a refusal takes says nothing about how much of a key was right.

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"path"
	"strings"
)

type apiKeys struct {
	digests [][sha256.Size]byte
}

func newAPIKeys(keys []string) *apiKeys {
	k := &apiKeys{}
	for _, key := range keys {
		k.digests = append(k.digests, sha256.Sum256([]byte(key)))
	}
	return k
}

// allowed reports whether the Authorization header carries one of the keys.
func (k *apiKeys) allowed(header string) bool {
	scheme, token, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "bearer") {
		return false
	}
	d := sha256.Sum256([]byte(token))
	ok := 0
	for i := range k.digests {
		ok |= subtle.ConstantTimeCompare(d[:], k.digests[i][:])
	}
	return ok == 1
}

// protected reports whether p needs a key: /v1 and everything under it. The path
// is cleaned first, so "//v1/x" or "/health/../v1/x" is no way around it.
func protected(p string) bool {
	c := path.Clean("/" + p)
	return c == "/v1" || strings.HasPrefix(c, "/v1/")
}

func (k *apiKeys) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions && protected(r.URL.Path) && !isAdminPath(r.URL.Path) && !k.allowed(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, &APIError{Status: http.StatusUnauthorized, Type: TypeUnauthorized, Message: "Unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}
