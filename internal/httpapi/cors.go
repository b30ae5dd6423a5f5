package httpapi

// CORS as vLLM's API server answers it (FastAPI's CORSMiddleware with
// --allowed-origins, --allowed-methods, --allowed-headers, --allow-credentials),
// so a browser page that calls vLLM calls switchyard unchanged. A request
// without Origin passes untouched.

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// CORS configures the middleware; the zero value is vLLM's default of "*" for
// origins, methods and headers, without credentials.
type CORS struct {
	AllowedOrigins   []string
	AllowedMethods   []string
	AllowedHeaders   []string
	AllowCredentials bool
}

// corsAllMethods is what "*" allows (the methods Starlette lists for it).
var corsAllMethods = []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"}

// corsSafelisted headers are allowed whatever --allowed-headers says.
var corsSafelisted = []string{"accept", "accept-language", "content-language", "content-type"}

// corsMaxAge is how long a browser may cache a preflight answer, in seconds.
const corsMaxAge = "600"

type cors struct {
	allOrigins, allHeaders, credentials bool
	origins, methods, headers           []string // headers lower case
	next                                http.Handler
}

func newCORS(cfg CORS, next http.Handler) *cors {
	c := &cors{next: next, credentials: cfg.AllowCredentials}
	orDefault := func(v []string) []string {
		if v == nil {
			return []string{"*"}
		}
		return corsList(v)
	}
	c.origins = orDefault(cfg.AllowedOrigins)
	c.allOrigins = slices.Contains(c.origins, "*")
	c.methods = orDefault(cfg.AllowedMethods)
	if slices.Contains(c.methods, "*") {
		c.methods = corsAllMethods
	}
	hs := orDefault(cfg.AllowedHeaders)
	c.allHeaders = slices.Contains(hs, "*")
	for _, h := range hs {
		c.headers = append(c.headers, strings.ToLower(h))
	}
	c.headers = append(c.headers, corsSafelisted...)
	slices.Sort(c.headers)
	c.headers = slices.Compact(c.headers)
	return c
}

func (c *cors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		c.next.ServeHTTP(w, r)
		return
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		c.preflight(w, r, origin)
		return
	}
	h := w.Header()
	if c.allOrigins && r.Header.Get("Cookie") == "" {
		h.Set("Access-Control-Allow-Origin", "*")
	} else if c.allowedOrigin(origin) {
		// A request with cookies may not be answered "*": the origin is named.
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
	}
	if c.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	c.next.ServeHTTP(w, r)
}

func (c *cors) allowedOrigin(origin string) bool {
	return c.allOrigins || slices.Contains(c.origins, origin)
}

// preflight answers an OPTIONS with Access-Control-Request-Method itself: 200
// with what is allowed, or 400 naming what is not (origin, method, headers).
func (c *cors) preflight(w http.ResponseWriter, r *http.Request, origin string) {
	h := w.Header()
	explicit := !c.allOrigins || c.credentials
	var failures []string
	switch {
	case !c.allowedOrigin(origin):
		failures = append(failures, "origin")
	case explicit:
		h.Set("Access-Control-Allow-Origin", origin)
	default:
		h.Set("Access-Control-Allow-Origin", "*")
	}
	if explicit {
		h.Add("Vary", "Origin")
	}
	if !slices.Contains(c.methods, r.Header.Get("Access-Control-Request-Method")) {
		failures = append(failures, "method")
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(c.methods, ", "))
	h.Set("Access-Control-Max-Age", corsMaxAge)
	requested, asked := r.Header["Access-Control-Request-Headers"]
	switch {
	case c.allHeaders && asked:
		h.Set("Access-Control-Allow-Headers", strings.Join(requested, ", "))
	case !c.allHeaders:
		h.Set("Access-Control-Allow-Headers", strings.Join(c.headers, ", "))
		for _, name := range strings.Split(strings.Join(requested, ","), ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !slices.Contains(c.headers, name) {
				failures = append(failures, "headers")
				break
			}
		}
	}
	if c.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	if len(failures) > 0 {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte("Disallowed CORS " + strings.Join(failures, ", ")))
		return
	}
	_, _ = w.Write([]byte("OK"))
}

// corsList reads vLLM's form of a list, a JSON array (--allowed-origins
// '["https://a.example"]'), which the flag parser split at its commas; any
// other value is the list itself.
func corsList(v []string) []string {
	joined := strings.TrimSpace(strings.Join(v, ","))
	var out []string
	if strings.HasPrefix(joined, "[") && json.Unmarshal([]byte(joined), &out) == nil {
		return out
	}
	return v
}
