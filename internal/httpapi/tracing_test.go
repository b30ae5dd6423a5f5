package httpapi

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/internal/clientapi"
	"github.com/switchyard-llm/switchyard/internal/testwait"
	"github.com/switchyard-llm/switchyard/wire"
)

// A traced completion: its span is the child of the client's traceparent, carries
// vLLM's gen_ai attributes and the dispatch / first-token / finish events, reaches
// the OTLP receiver, and the engine gets the span's context in trace_headers.
func TestTracing(t *testing.T) {
	rcv := newOTLPReceiver(t)
	tp, err := apicore.NewTracerProvider(rcv.URL) // no path: /v1/traces
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeCore(t, 2)
	api := NewAPI(APIConfig{
		Dispatcher: f.D, Model: apicore.ModelRules{EOSTokenIDs: []int64{2}, MaxLogprobs: apicore.DefaultMaxLogprobs},
		TracerProvider: tp,
	})
	ts := httptest.NewServer(api.Handler())
	defer ts.Close()

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	if resp, body := post(t, ts, `{"prompt": [1, 2, 3], "max_tokens": 3}`,
		"traceparent", "00-"+traceID+"-"+parentID+"-01", RankHeader, "1"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	traced := testwait.Recv(t, f.Adds, "the traced request's ADD")
	if resp, body := post(t, ts, `{"prompt": [5, 6], "max_tokens": 2, "stream": true}`); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	root := testwait.Recv(t, f.Adds, "the streamed request's ADD")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}

	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.spans) != 2 || rcv.paths[0] != "/v1/traces" {
		t.Fatalf("%d spans on %v, want 2 on /v1/traces", len(rcv.spans), rcv.paths)
	}
	byTrace := map[string]*tracepb.Span{}
	for _, s := range rcv.spans {
		byTrace[hex.EncodeToString(s.GetTraceId())] = s
	}
	s := byTrace[traceID]
	if s == nil {
		t.Fatalf("no span in the client's trace %s", traceID)
	}
	if s.GetName() != "llm_request" || hex.EncodeToString(s.GetParentSpanId()) != parentID || s.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("span %q kind %v parent %x, want llm_request, server, parent %s", s.GetName(), s.GetKind(), s.GetParentSpanId(), parentID)
	}
	a := spanAttrs(s)
	for k, v := range map[string]any{"gen_ai.usage.prompt_tokens": int64(3), "gen_ai.usage.completion_tokens": int64(3),
		"gen_ai.request.max_tokens": int64(3), "switchyard.rank": int64(1), "http.response.status_code": int64(200),
		"gen_ai.response.finish_reasons": "length"} {
		if a[k] != v {
			t.Errorf("attribute %s = %v (%T), want %v", k, a[k], a[k], v)
		}
	}
	if id, _ := a["gen_ai.request.id"].(string); !strings.HasPrefix(id, "cmpl-") {
		t.Errorf("gen_ai.request.id = %v", a["gen_ai.request.id"])
	}
	var events []string
	for _, e := range s.GetEvents() {
		events = append(events, e.GetName())
	}
	if strings.Join(events, ",") != "dispatched,first_token,finished" {
		t.Errorf("events %v, want dispatched, first_token, finished", events)
	}
	// The engine's spans join the trace under ours.
	want := "00-" + traceID + "-" + hex.EncodeToString(s.GetSpanId()) + "-01"
	if got := traced.TraceHeaders["traceparent"]; got != want {
		t.Errorf("engine trace_headers %v, want traceparent %s", traced.TraceHeaders, want)
	}

	// No traceparent: a new trace, still handed to the engine.
	var r *tracepb.Span
	for id, sp := range byTrace {
		if id != traceID {
			r = sp
		}
	}
	if r == nil || len(r.GetParentSpanId()) != 0 {
		t.Fatalf("untraced request's span %v: want a root span", r)
	}
	if got := root.TraceHeaders["traceparent"]; !strings.Contains(got, hex.EncodeToString(r.GetTraceId())) {
		t.Errorf("engine trace_headers %v, want the new trace %x", root.TraceHeaders, r.GetTraceId())
	}
	if spanAttrs(r)["gen_ai.usage.completion_tokens"] != int64(2) {
		t.Errorf("streamed span attributes %v", spanAttrs(r))
	}
}

// Without tracing the engine gets no trace_headers (None on the wire).
func TestNoTracingNoTraceHeaders(t *testing.T) {
	f, ts := newTestAPI(t, 1)
	if resp, body := post(t, ts, `{"prompt": [1], "max_tokens": 1}`, "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if req := testwait.Recv(t, f.Adds, "the ADD"); req.TraceHeaders != nil {
		t.Errorf("trace_headers %v with tracing off", req.TraceHeaders)
	}
}

// trace_headers survives every built-in vLLM wire layout, so engines of any
// supported version get the trace context.
func TestTraceHeadersEveryLayout(t *testing.T) {
	hdrs := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "k=v"}
	for _, l := range wire.BuiltinLayouts() {
		sp := wire.DefaultSamplingParams()
		sp.MaxTokens = wire.SomeInt(1)
		sp.Normalize()
		body, aux, err := l.AppendAdd(nil, &wire.EngineCoreRequest{RequestID: "r", PromptTokenIDs: []int64{1}, Sampling: &sp, TraceHeaders: hdrs})
		if err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		var got wire.EngineCoreRequest
		if err := l.DecodeAdd(append([][]byte{body}, aux...), &got); err != nil {
			t.Fatalf("%s: %v", l.Name, err)
		}
		if len(got.TraceHeaders) != 2 || got.TraceHeaders["traceparent"] != hdrs["traceparent"] || got.TraceHeaders["tracestate"] != "k=v" {
			t.Errorf("%s: trace_headers %v after a round trip, want %v", l.Name, got.TraceHeaders, hdrs)
		}
	}
}

// The client protocol: a request whose trace_headers carry the client's context
// gets a span under it, and the engine gets the span's context plus the client's
// other headers.
func TestClientTracing(t *testing.T) {
	rcv := newOTLPReceiver(t)
	tp, err := apicore.NewTracerProvider(rcv.URL)
	if err != nil {
		t.Fatal(err)
	}
	h := newClientHarness(t, clientapi.ClientConfig{TracerProvider: tp})
	const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(2)
	sp.IgnoreEOS = true
	sp.Normalize()
	body, aux, err := wire.AppendAdd(nil, &wire.EngineCoreRequest{
		RequestID: "t1", PromptTokenIDs: []int64{1, 2, 3}, Sampling: &sp,
		TraceHeaders: map[string]string{"traceparent": "00-" + traceID + "-" + parentID + "-01", "x-other": "kept"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cli.Send(append([][]byte{{wire.RequestAdd}, body}, aux...)...); err != nil {
		t.Fatal(err)
	}
	for !h.nextOutputs(t).Outputs[0].Finished() {
	}
	engine := testwait.Recv(t, h.f.Adds, "the ADD")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.spans) != 1 {
		t.Fatalf("%d spans, want 1", len(rcv.spans))
	}
	s := rcv.spans[0]
	if hex.EncodeToString(s.GetTraceId()) != traceID || hex.EncodeToString(s.GetParentSpanId()) != parentID {
		t.Errorf("span trace %x parent %x, want %s %s", s.GetTraceId(), s.GetParentSpanId(), traceID, parentID)
	}
	a := spanAttrs(s)
	if a["gen_ai.request.id"] != "t1" || a["gen_ai.usage.prompt_tokens"] != int64(3) || a["gen_ai.usage.completion_tokens"] != int64(2) ||
		a["gen_ai.response.finish_reasons"] != "length" {
		t.Errorf("attributes %v", a)
	}
	want := "00-" + traceID + "-" + hex.EncodeToString(s.GetSpanId()) + "-01"
	if engine.TraceHeaders["traceparent"] != want || engine.TraceHeaders["x-other"] != "kept" {
		t.Errorf("engine trace_headers %v, want traceparent %s and x-other kept", engine.TraceHeaders, want)
	}
}

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

func spanAttrs(s *tracepb.Span) map[string]any {
	m := map[string]any{}
	for _, kv := range s.GetAttributes() {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = v.IntValue
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.DoubleValue
		case *commonpb.AnyValue_ArrayValue:
			var ss []string
			for _, e := range v.ArrayValue.GetValues() {
				ss = append(ss, e.GetStringValue())
			}
			m[kv.GetKey()] = strings.Join(ss, ",")
		}
	}
	return m
}
