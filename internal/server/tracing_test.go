package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes each export
// (an ExportTraceServiceRequest, whose wire form is TracesData's) and keeps the spans.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	paths []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{}
	rcv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var td tracepb.TracesData
		if err == nil {
			err = proto.Unmarshal(body, &td)
		}
		if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP export %s %s (%s): %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err)
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		rcv.paths = append(rcv.paths, r.URL.Path)
		for _, rs := range td.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				rcv.spans = append(rcv.spans, ss.GetSpans()...)
			}
		}
		rcv.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rcv.Close)
	return rcv
}

// serve with --otlp-traces-endpoint: a request through the built-in mock engines is
// exported by the time Shutdown returns.
func TestServeTracing(t *testing.T) {
	rcv := newOTLPReceiver(t)
	s := startServer(t, func(c *Config) { c.OTLPTracesEndpoint = rcv.URL + "/v1/traces" })
	resp, err := testwait.HTTPClient.Post("http://"+s.HTTPAddr()+"/v1/completions", "application/json", strings.NewReader(`{"prompt": [1, 2], "max_tokens": 2}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.spans) != 1 || rcv.spans[0].GetName() != "llm_request" {
		t.Fatalf("spans %v, want one llm_request", rcv.spans)
	}
}
