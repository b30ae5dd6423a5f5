package httpapi

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// The three labelled series every answered request counts (switchyard's
// requests, vLLM's requests and duration) are looked up once per label set and
// kept: WithLabelValues hashes and validates the labels and takes the vector's
// lock on every call, about 3 % of an HTTP server's CPU at a few thousand
// requests a second.

// labelKey is what picks a request's series: its wrap's handler, the mux
// pattern it matched (vLLM's handler label), its method and status code.
type labelKey struct {
	handler, pattern, method string
	code                     int
}

// labelSet is one label set's series; vllm is false for the routes vLLM's
// instrumentator leaves out.
type labelSet struct {
	requests prometheus.Counter
	vllm     bool
	vRequest prometheus.Counter
	vSeconds prometheus.Observer
}

// maxLabelSets bounds the cache: the method of a matched route is the route's,
// but a bound keeps a surprise from growing it; past it, lookups go uncached.
const maxLabelSets = 256

// labelCache is read without a lock (a map replaced whole on each addition);
// additions, a few per route over a server's life, take mu. newHTTPMetrics stores
// its first, empty map.
type labelCache struct {
	mu   sync.Mutex
	sets atomic.Pointer[map[labelKey]*labelSet]
}

// series returns the series of r's answer with status code.
func (m *httpMetrics) series(handler string, r *http.Request, code int) *labelSet {
	k := labelKey{handler: handler, pattern: r.Pattern, method: r.Method, code: code}
	if s, ok := (*m.labels.sets.Load())[k]; ok {
		return s
	}
	s := m.newLabelSet(k)
	m.labels.mu.Lock()
	defer m.labels.mu.Unlock()
	if old := *m.labels.sets.Load(); len(old) < maxLabelSets {
		next := maps.Clone(old)
		next[k] = s
		m.labels.sets.Store(&next)
	}
	return s
}

func (m *httpMetrics) newLabelSet(k labelKey) *labelSet {
	s := &labelSet{requests: m.requests.WithLabelValues(k.handler, strconv.Itoa(k.code))}
	route := k.pattern
	if i := strings.IndexByte(route, ' '); i >= 0 {
		route = route[i+1:] // "POST /v1/completions" names the route /v1/completions
	}
	if route != "" && !vllmExcludedHandlers[route] {
		s.vllm = true
		s.vRequest = m.vllm.requests.WithLabelValues(route, k.method, strconv.Itoa(k.code/100)+"xx")
		s.vSeconds = m.vllm.duration.WithLabelValues(route, k.method)
	}
	return s
}
