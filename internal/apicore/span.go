package apicore

// Tracing: with --otlp-traces-endpoint every completions request is a span
// ("llm_request", as vLLM names it) exported over OTLP/HTTP. The W3C traceparent of
// the HTTP request is its parent, and its own context goes to the engine in
// EngineCoreRequest.trace_headers, so the engine's spans join the same trace, as
// vLLM's frontend does.

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard-llm/switchyard/wire"
)

// TracerName is the instrumentation scope of switchyard's spans.
const TracerName = "github.com/switchyard-llm/switchyard/internal/server"

// Propagator is W3C trace context (traceparent, tracestate), what vLLM uses.
var Propagator = propagation.TraceContext{}

// Span is one completions request's span. Its methods are safe on nil (tracing
// off) and from the request's goroutine only, except firstToken.
type Span struct {
	span  trace.Span
	start time.Time
	first sync.Once
}

// StartRequestSpan starts the request's span under the HTTP request's traceparent
// (if any) and returns the context to hand to the engines; nil tracer = off.
func StartRequestSpan(tracer trace.Tracer, r *http.Request, id string) (context.Context, *Span) {
	ctx := r.Context()
	if tracer == nil {
		return ctx, nil
	}
	ctx = Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	ctx, span := tracer.Start(ctx, "llm_request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("gen_ai.request.id", id), attribute.String("http.route", r.URL.Path)))
	return ctx, &Span{span: span, start: time.Now()}
}

// TraceHeaders is the trace context of ctx as EngineCoreRequest.trace_headers.
func TraceHeaders(ctx context.Context) map[string]string {
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	if len(c) == 0 {
		return nil
	}
	return c
}

// request notes what the request asks for.
func (s *Span) Request(ereqs []*wire.EngineCoreRequest) {
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
func (s *Span) Dispatched(rank int) {
	if s == nil {
		return
	}
	s.span.SetAttributes(attribute.Int("switchyard.rank", rank))
	s.span.AddEvent("dispatched", trace.WithAttributes(attribute.Int("switchyard.rank", rank)))
}

// firstToken records the first generated token (once).
func (s *Span) FirstToken() {
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
func (s *Span) End(completionTokens int, finish []string, status int, err error) {
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

// ErrClientGone ends the spans of a client-protocol client that went away.
var ErrClientGone = errors.New("client gone")

func TracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// NewSpan wraps a started span as a request span (the client protocol starts its
// own, under the client's trace_headers).
func NewSpan(span trace.Span) *Span { return &Span{span: span, start: time.Now()} }
