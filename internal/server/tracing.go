package server

// Tracing: with --otlp-traces-endpoint every completions request is a span
// ("llm_request", as vLLM names it) exported over OTLP/HTTP. The W3C traceparent of
// the HTTP request is its parent, and its own context goes to the engine in
// EngineCoreRequest.trace_headers, so the engine's spans join the same trace, as
// vLLM's frontend does.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard-llm/switchyard/internal/version"
	"github.com/switchyard-llm/switchyard/wire"
)

// tracerName is the instrumentation scope of switchyard's spans.
const tracerName = "github.com/switchyard-llm/switchyard/internal/server"

// propagator is W3C trace context (traceparent, tracestate), what vLLM uses.
var propagator = propagation.TraceContext{}

// newTracerProvider exports spans in batches to endpoint, an OTLP/HTTP URL
// ("http://collector:4318"; with no path, the standard /v1/traces is used).
func newTracerProvider(endpoint string) (*sdktrace.TracerProvider, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otlp-traces-endpoint: %q: want an OTLP/HTTP URL such as http://HOST:4318", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("--otlp-traces-endpoint: %w", err)
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", "switchyard"),
		attribute.String("service.version", version.Get().Version),
	)
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// reqSpan is one completions request's span. Its methods are safe on nil (tracing
// off) and from the request's goroutine only, except firstToken.
type reqSpan struct {
	span  trace.Span
	start time.Time
	first sync.Once
}

// startRequestSpan starts the request's span under the HTTP request's traceparent
// (if any) and returns the context to hand to the engines; nil tracer = off.
func startRequestSpan(tracer trace.Tracer, r *http.Request, id string) (context.Context, *reqSpan) {
	ctx := r.Context()
	if tracer == nil {
		return ctx, nil
	}
	ctx = propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	ctx, span := tracer.Start(ctx, "llm_request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("gen_ai.request.id", id), attribute.String("http.route", r.URL.Path)))
	return ctx, &reqSpan{span: span, start: time.Now()}
}

// traceHeaders is the trace context of ctx as EngineCoreRequest.trace_headers.
func traceHeaders(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// request notes what the request asks for.
func (s *reqSpan) request(ereqs []*wire.EngineCoreRequest) {
	if s == nil || len(ereqs) == 0 {
		return
	}
	prompt := 0
	for _, er := range ereqs {
		prompt += len(er.PromptTokenIDs)
	}
	attrs := []attribute.KeyValue{attribute.Int("gen_ai.usage.prompt_tokens", prompt), attribute.Int("gen_ai.request.n", len(ereqs))}
	if sp := ereqs[0].Sampling; sp != nil {
		if sp.MaxTokens.Valid {
			attrs = append(attrs, attribute.Int64("gen_ai.request.max_tokens", sp.MaxTokens.Value))
		}
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", sp.Temperature), attribute.Float64("gen_ai.request.top_p", sp.TopP))
	}
	s.span.SetAttributes(attrs...)
}

// dispatched records that the engine requests went to rank.
func (s *reqSpan) dispatched(rank int) {
	if s == nil {
		return
	}
	s.span.SetAttributes(attribute.Int("switchyard.rank", rank))
	s.span.AddEvent("dispatched", trace.WithAttributes(attribute.Int("switchyard.rank", rank)))
}

// firstToken records the first generated token (once).
func (s *reqSpan) firstToken() {
	if s == nil {
		return
	}
	s.first.Do(func() {
		ttft := time.Since(s.start)
		s.span.AddEvent("first_token")
		s.span.SetAttributes(attribute.Float64("gen_ai.latency.time_to_first_token", ttft.Seconds()))
	})
}

// end finishes the span with the usage and how the request ended (status is the
// HTTP status, 0 on the client protocol; err, if any, the failure).
func (s *reqSpan) end(completionTokens int, finish []string, status int, err error) {
	if s == nil {
		return
	}
	s.span.SetAttributes(
		attribute.Int("gen_ai.usage.completion_tokens", completionTokens),
		attribute.Float64("gen_ai.latency.e2e", time.Since(s.start).Seconds()),
	)
	if status != 0 {
		s.span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if len(finish) > 0 {
		s.span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", finish))
	}
	s.span.AddEvent("finished")
	if err != nil {
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// errClientGone ends the spans of a client-protocol client that went away.
var errClientGone = errors.New("client gone")

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// startSpan starts a client-protocol request's span, a child of the trace context
// the client put in trace_headers (if any), and replaces that context in the
// request with the span's, keeping the client's other headers. nil: tracing off.
func (s *ClientServer) startSpan(req *wire.EngineCoreRequest, userID string) *reqSpan {
	if s.tracer == nil {
		return nil
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier(req.TraceHeaders))
	ctx, span := s.tracer.Start(ctx, "llm_request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("gen_ai.request.id", userID), attribute.String("switchyard.protocol", "msgpack")))
	h := make(map[string]string, len(req.TraceHeaders)+2)
	for k, v := range req.TraceHeaders {
		h[k] = v
	}
	propagator.Inject(ctx, propagation.MapCarrier(h))
	req.TraceHeaders = h
	rs := &reqSpan{span: span, start: time.Now()}
	rs.request([]*wire.EngineCoreRequest{req})
	return rs
}
